package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mountOptions are the -o options mount.memfs takes (docs/operating.md,
// "From /etc/fstab or a systemd .mount unit": memfs's own, then mount(8)'s that it ignores). A name ending in "="
// takes a value; "x-systemd." is a prefix.
var mountOptions = []string{
	"ro", "rw", "uid=", "gid=", "allow_other", "api_url=", "api_key_file=", "state_dir=", "sync_interval=",
	"defaults", "auto", "noauto", "nofail", "_netdev", "x-systemd.",
}

// checkMountOptions checks a comma-separated option list: known options
// only, the key from a file, and _netdev so that systemd orders the mount
// after the network.
func checkMountOptions(opts string) []string {
	var p []string
	seen := map[string]bool{}
	for _, o := range strings.Split(opts, ",") {
		name, _, hasValue := strings.Cut(o, "=")
		ok := false
		for _, known := range mountOptions {
			switch {
			case strings.HasSuffix(known, "."):
				ok = ok || strings.HasPrefix(o, known)
			case strings.HasSuffix(known, "="):
				ok = ok || hasValue && name+"=" == known
			default:
				ok = ok || !hasValue && o == known
			}
		}
		if !ok {
			p = append(p, fmt.Sprintf("mount option %q is not one mount.memfs takes", o))
		}
		seen[name] = true
	}
	for _, need := range []string{"api_url", "api_key_file", "_netdev"} {
		if !seen[need] {
			p = append(p, fmt.Sprintf("mount options %q lack %s", opts, need))
		}
	}
	return p
}

// escapePath is systemd-escape --path for the plain paths used here
// (letters, digits, dashes would need \x2d and are refused).
func escapePath(p string) (string, error) {
	p = strings.Trim(p, "/")
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '/') {
			return "", fmt.Errorf("path %q needs systemd-escape", p)
		}
	}
	return strings.ReplaceAll(p, "/", "-"), nil
}

func TestMountUnit(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("systemd", "*.mount"))
	if len(files) == 0 {
		t.Fatal("no .mount example under systemd/")
	}
	for _, f := range files {
		u := readUnit(t, f)
		if got := u.get("Mount", "Type"); got != "memfs" {
			t.Errorf("%s: Type=%q, want memfs (mount(8) then runs mount.memfs)", f, got)
		}
		if what := u.get("Mount", "What"); !strings.HasPrefix(what, "memstore_") {
			t.Errorf("%s: What=%q is not a store id", f, what)
		}
		where := u.get("Mount", "Where")
		name, err := escapePath(where)
		if err != nil {
			t.Fatal(err)
		}
		if name+".mount" != filepath.Base(f) {
			t.Errorf("%s: Where=%s must be in a unit named %s.mount", f, where, name)
		}
		for _, p := range checkMountOptions(u.get("Mount", "Options")) {
			t.Errorf("%s: %s", f, p)
		}
		if d, err := parseTimespan(u.get("Mount", "TimeoutSec")); err != nil || d < minStopTimeout {
			t.Errorf("%s: TimeoutSec=%q: at least %v (loading a store, and unmounting)", f, u.get("Mount", "TimeoutSec"), minStopTimeout)
		}
	}
}

// TestFstabExample checks that the fstab line says what the .mount unit
// says: same store, mount point, type and options (plus fstab's own).
func TestFstabExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("systemd", "fstab.example"))
	if err != nil {
		t.Fatal(err)
	}
	u := readUnit(t, filepath.Join("systemd", "mnt-memory-prefs.mount"))
	var lines [][]string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, strings.Fields(l))
		}
	}
	if len(lines) != 1 || len(lines[0]) != 6 {
		t.Fatalf("fstab.example: want one line of 6 fields, got %q", lines)
	}
	f := lines[0]
	if f[0] != u.get("Mount", "What") || f[1] != u.get("Mount", "Where") || f[2] != u.get("Mount", "Type") {
		t.Errorf("fstab line %q does not mount what the .mount unit does (%s at %s, %s)", f[:3], u.get("Mount", "What"), u.get("Mount", "Where"), u.get("Mount", "Type"))
	}
	for _, p := range checkMountOptions(f[3]) {
		t.Error("fstab.example: " + p)
	}
	opts := strings.Split(f[3], ",")
	for _, o := range strings.Split(u.get("Mount", "Options"), ",") {
		if !slices.Contains(opts, o) {
			t.Errorf("fstab.example lacks the unit's option %q", o)
		}
	}
}

func TestMountChecksCatch(t *testing.T) {
	for opts, want := range map[string]string{
		"api_url=http://x,api_key=sk-x,_netdev":          "api_key",
		"api_url=http://x,api_key_file=/k":               "_netdev",
		"api_url=http://x,api_key_file=/k,_netdev,color": "color",
		"api_url=http://x,api_key_file,_netdev":          "api_key_file",
	} {
		if p := strings.Join(checkMountOptions(opts), "\n"); !strings.Contains(p, want) {
			t.Errorf("checkMountOptions(%q) = %q, want a problem naming %q", opts, p, want)
		}
	}
	if _, err := escapePath("/mnt/my-store"); err == nil {
		t.Error("escapePath accepted a dash, which systemd escapes as \\x2d")
	}
}
