package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseMountOptions: each option is a spelling of a flag; mount(8)'s
// and systemd's own options are ignored; every bad option is named.
func TestParseMountOptions(t *testing.T) {
	for _, tc := range []struct {
		in      string
		sloppy  bool
		set     []flagSetting
		ignored []string
		unknown []string
		err     []string // what the error must say; nil: no error
	}{
		{in: "ro,uid=1000,gid=100,allow_other", set: []flagSetting{{"read-only", "true"}, {"uid", "1000"}, {"gid", "100"}, {"allow-other", "true"}}},
		{in: "rw", set: []flagSetting{{"read-only", "false"}}},
		{in: "api_url=http://127.0.0.1:8080/x?a=b,api_key_file=/etc/memfs/admin.key,state_dir=/var/lib/memfs,sync_interval=30s",
			set: []flagSetting{{"api-url", "http://127.0.0.1:8080/x?a=b"}, {"api-key-file", "/etc/memfs/admin.key"}, {"state-dir", "/var/lib/memfs"}, {"memory-sync-interval", "30s"}}},
		{in: "sync_quiet=off", set: []flagSetting{{"memory-sync-quiet", "off"}}},
		{in: "api_url=https://memfs.internal:8443,ca_file=/etc/memfs/tls/ca.pem", set: []flagSetting{{"api-url", "https://memfs.internal:8443"}, {"ca-file", "/etc/memfs/tls/ca.pem"}}},
		{in: "insecure_http", set: []flagSetting{{"insecure-http", "true"}}},
		{in: "file_mode=0600,dir_mode=0700,umask=022", set: []flagSetting{{"file-mode", "0600"}, {"dir-mode", "0700"}, {"umask", "022"}}},
		{in: "x-mount.mkdir", set: []flagSetting{{"mkdir", "true"}}},
		{in: "x-mount.mkdir=0750", set: []flagSetting{{"mkdir", "0750"}}},
		{in: "uid=a=b", set: []flagSetting{{"uid", "a=b"}}}, // the value is everything after the first =
		{in: "defaults,noauto,auto,nofail,_netdev,user,users,nouser,nosuid,nodev,x-systemd.automount,x-systemd.requires=network-online.target,comment=x,user=joe,ro,",
			set: []flagSetting{{"read-only", "true"}},
			ignored: []string{"defaults", "noauto", "auto", "nofail", "_netdev", "user", "users", "nouser", "nosuid", "nodev",
				"x-systemd.automount", "x-systemd.requires=network-online.target", "comment=x", "user=joe"}},
		{in: ""},
		{in: ",,"},
		// Bad inputs.
		{in: "bogus", err: []string{`unknown mount option "bogus"`, "ro, rw, uid="}},
		{in: "ro,noexec,sync", err: []string{`"noexec"`, `"sync"`}},
		{in: "uid", err: []string{"uid needs a value (uid=...)"}},
		{in: "uid=", err: []string{"uid needs a value"}},
		{in: "ro=yes", err: []string{"ro takes no value"}},
		{in: "allow_other=1", err: []string{"allow_other takes no value"}},
		{in: "api_key=sk-secret", err: []string{"api_key is not accepted", "api_key_file=FILE"}},
		{in: "RO", err: []string{`unknown mount option "RO"`}},
		{in: "x-mount.subdir=a", err: []string{`"x-mount.subdir=a"`}},
		// Sloppy (mount -s): unknown options come back instead of failing;
		// other mistakes still fail.
		{in: "ro,bogus,noexec", sloppy: true, set: []flagSetting{{"read-only", "true"}}, unknown: []string{"bogus", "noexec"}},
		{in: "uid", sloppy: true, err: []string{"uid needs a value"}},
		{in: "api_key=sk-secret", sloppy: true, err: []string{"api_key is not accepted"}},
	} {
		set, ignored, unknown, err := parseMountOptions(tc.in, tc.sloppy)
		if tc.err != nil {
			if err == nil {
				t.Errorf("%q: no error, want one saying %q", tc.in, tc.err)
				continue
			}
			for _, s := range tc.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q: error %q does not say %q", tc.in, err, s)
				}
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("%q: the error repeats the key: %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(set, tc.set) || !reflect.DeepEqual(ignored, tc.ignored) || !reflect.DeepEqual(unknown, tc.unknown) {
			t.Errorf("%q:\nset %v, ignored %v, unknown %v\nwant %v, %v, %v", tc.in, set, ignored, unknown, tc.set, tc.ignored, tc.unknown)
		}
	}
}

// TestMountOptionFlag: -o sets the flags it spells, in command-line order
// with the flags (the later wins), and a bad value is the flag's error.
func TestMountOptionFlag(t *testing.T) {
	parse := func(args ...string) (*flag.FlagSet, error) {
		fs := flag.NewFlagSet("mount", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Bool("read-only", false, "")
		fs.String("uid", "", "")
		fs.String("memory-sync-interval", "15s", "")
		fs.Var(&mkdirFlag{}, "mkdir", "")
		check := addMountOptionFlag(fs)
		if err := fs.Parse(args); err != nil {
			return fs, err
		}
		return fs, check()
	}
	get := func(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }
	fs, err := parse("-o", "ro,uid=7", "-o", "sync_interval=1m,x-mount.mkdir=0700")
	if err != nil {
		t.Fatal(err)
	}
	if get(fs, "read-only") != "true" || get(fs, "uid") != "7" || get(fs, "memory-sync-interval") != "1m" || get(fs, "mkdir") != "0700" {
		t.Errorf("-o set read-only=%s uid=%s interval=%s mkdir=%s", get(fs, "read-only"), get(fs, "uid"), get(fs, "memory-sync-interval"), get(fs, "mkdir"))
	}
	if fs, _ = parse("--uid", "1", "-o", "uid=2,rw", "--read-only"); get(fs, "uid") != "2" || get(fs, "read-only") != "true" {
		t.Errorf("later wins: uid=%s read-only=%s, want 2 and true", get(fs, "uid"), get(fs, "read-only"))
	}
	if fs, _ = parse("-o", "uid=2", "--uid", "3"); get(fs, "uid") != "3" {
		t.Errorf("later wins: uid=%s, want 3", get(fs, "uid"))
	}
	if _, err := parse("-o", "x-mount.mkdir=0644"); err == nil || !strings.Contains(err.Error(), "0644") {
		t.Errorf("x-mount.mkdir=0644 (no way in for its owner): %v", err)
	}
	if _, err := parse("-o", "ro,frobnicate"); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Errorf("an unknown option: %v", err)
	} else if _, ok := err.(usageError); !ok {
		t.Errorf("an unknown option: %v is not a usage error (exit 2)", err)
	}
	// The error names the bad option, never the whole value: it may hold a key.
	if _, err := parse("-o", "ro,api_key=sk-secret"); err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("api_key=: %v", err)
	}
}

func TestMkdirFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		on   bool
		mode os.FileMode
		bad  bool
	}{
		{in: "true", on: true, mode: 0o755},
		{in: "false"},
		{in: "0700", on: true, mode: 0o700},
		{in: "755", on: true, mode: 0o755},
		{in: "0644", bad: true}, // the owner could not enter it
		{in: "1", bad: true},
		{in: "0", bad: true},
		{in: "01777", bad: true},
		{in: "0789", bad: true},
		{in: "yes", bad: true},
		{in: "", bad: true},
	} {
		var m mkdirFlag
		err := m.Set(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (m.on != tc.on || m.mode != tc.mode)) {
			t.Errorf("Set(%q) = %v, on=%v mode=%#o", tc.in, err, m.on, m.mode)
		}
	}
}

// TestPrepareMountDir: without --mkdir a missing mount point is an error
// that says what to do and creates nothing; with it the parents are made
// (the mount makes the mount point itself).
func TestPrepareMountDir(t *testing.T) {
	base := t.TempDir()
	missing := filepath.Join(base, "a", "b", "mnt")
	err := prepareMountDir(missing, mkdirFlag{})
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "--mkdir") {
		t.Errorf("a missing mount point: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "a")); !os.IsNotExist(err) {
		t.Errorf("a refused mount point created its parent (%v)", err)
	}
	if err := prepareMountDir(base, mkdirFlag{}); err != nil {
		t.Errorf("an existing mount point: %v", err)
	}
	// 0700: no usual umask (022, 027, 077) changes it.
	if err := prepareMountDir(missing+"/", mkdirFlag{on: true, mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(base, "a"), filepath.Join(base, "a", "b")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Errorf("%s: %v %v, want a folder of mode 0700", d, fi, err)
		}
	}
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Errorf("the mount point itself was created (%v); the mount creates it, to remove it at unmount", err)
	}
	if err := prepareMountDir(filepath.Join(base, "a", "b", "mnt2"), mkdirFlag{on: true, mode: 0o755}); err != nil {
		t.Errorf("parents that exist: %v", err)
	}
}

// TestParseHelperArgs: mount(8)'s calling convention of mount.memfs.
func TestParseHelperArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want helperArgs
		err  string
	}{
		{args: []string{"memstore_1", "/mnt/m"}, want: helperArgs{store: "memstore_1", dir: "/mnt/m"}},
		{args: []string{"memstore_1", "/mnt/m", "-o", "ro,noauto"}, want: helperArgs{store: "memstore_1", dir: "/mnt/m", options: []string{"ro,noauto"}}},
		{args: []string{"memstore_1", "/mnt/m", "-sfnv", "-oro", "-o", "uid=1", "-t", "memfs"},
			want: helperArgs{store: "memstore_1", dir: "/mnt/m", options: []string{"ro", "uid=1"}, sloppy: true, fake: true, verbose: true}},
		{args: []string{"-v", "-o", "ro", "memstore_1", "/mnt/m", "-n", "-s", "-tfuse.memfs"},
			want: helperArgs{store: "memstore_1", dir: "/mnt/m", options: []string{"ro"}, verbose: true, sloppy: true}},
		{args: []string{"memstore_1", "--", "-odd"}, want: helperArgs{store: "memstore_1", dir: "-odd"}},
		{args: []string{"--help"}, want: helperArgs{help: true}},
		{args: []string{"memstore_1", "/mnt/m", "-h"}, want: helperArgs{help: true}},
		// Bad inputs.
		{args: nil, err: "want STORE MOUNTPOINT, got 0"},
		{args: []string{"memstore_1"}, err: "got 1"},
		{args: []string{"memstore_1", "/a", "/b"}, err: "got 3"},
		{args: []string{"/dev/sdb1", "/mnt/m"}, err: `memory store id (memstore_...), not "/dev/sdb1"`},
		{args: []string{"memstore_", "/mnt/m"}, err: "memory store id"},
		{args: []string{"memstore_1", "/mnt/m", "-o"}, err: "-o needs a value"},
		{args: []string{"memstore_1", "/mnt/m", "-t", "ext4"}, err: "-t ext4: mount.memfs mounts only type memfs"},
		{args: []string{"memstore_1", "/mnt/m", "-x"}, err: "unknown flag -x"},
		{args: []string{"memstore_1", "/mnt/m", "--bogus"}, err: `unknown flag "--bogus"`},
		{args: []string{"memstore_1", "/mnt/m", "-N", "/proc/1/ns/mnt"}, err: "-N"},
	} {
		got, err := parseHelperArgs(tc.args)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
			} else if _, ok := err.(usageError); !ok {
				t.Errorf("%q: %v is not a usage error (exit 2)", tc.args, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case !reflect.DeepEqual(got, tc.want):
			t.Errorf("%q: %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

// TestMountHelperChecksFirst: mount.memfs reports bad arguments itself,
// at once (exit 2), and -f mounts nothing; -s drops unknown options.
func TestMountHelperChecksFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"memstore_1", dir, "-o", "ro,bogus"}, code: 2, stderr: `unknown mount option "bogus"`},
		{args: []string{"/dev/sdb1", dir}, code: 2, stderr: "memory store id"},
		{args: []string{"memstore_1", dir, "-f", "-v", "-o", "ro,noauto,_netdev", "-o", "uid=5"}, code: 0,
			stdout: "would run memfs mount --mount-mode fuse --store memstore_1 -o ro,noauto,_netdev,uid=5 -- " + dir},
		{args: []string{"memstore_1", dir, "-fsv", "-o", "bogus,ro,noexec"}, code: 0,
			stdout: "would run memfs mount --mount-mode fuse --store memstore_1 -o ro -- " + dir, stderr: `ignoring unknown option "bogus"`},
		{args: []string{"memstore_1", dir, "-f", "-o", "mount_mode=directory"}, code: 2, stderr: "mounts with FUSE"},
		{args: []string{"memstore_1", dir, "-f", "-o", "mount_mode=auto"}, code: 2, stderr: "memfs mount --mount-mode directory"},
		{args: []string{"--help"}, code: 0, stdout: "Usage: mount.memfs STORE MOUNTPOINT"},
	} {
		r := runAs(t, mountHelperName, []string{"MEMFS_STATE_DIR=" + t.TempDir()}, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("mount.memfs %q: exit %d\nstdout: %s\nstderr: %s\nwant exit %d, stdout with %q, stderr with %q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// TestDeployExampleOptions: the options of the shipped .mount units and
// fstab example are all ones mount.memfs takes (not sloppy).
func TestDeployExampleOptions(t *testing.T) {
	var lists []string
	units, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "systemd", "*.mount"))
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if o, ok := strings.CutPrefix(strings.TrimSpace(l), "Options="); ok {
				lists = append(lists, o)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "fstab.example")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 6 && !strings.HasPrefix(f[0], "#") {
				lists = append(lists, f[3])
			}
		}
	}
	if len(units) == 0 || len(lists) < 2 {
		t.Fatalf("found %d units and %d option lists under deploy/systemd", len(units), len(lists))
	}
	for _, o := range lists {
		if _, _, _, err := parseMountOptions(o, false); err != nil {
			t.Errorf("%s: %v", o, err)
		}
	}
}
