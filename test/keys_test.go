package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// Keys off the command line (docs/operating.md, "Commands and keys"): every key-taking flag has
// a --NAME-file twin, and what ps shows of a process holds no key.

// writeKeyFile writes key (and a newline, as echo would) to a new file
// with exactly mode perm.
func writeKeyFile(t *testing.T, key string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // not WriteFile's mode: the umask narrows it
		t.Fatal(err)
	}
	return p
}

// procArgv is what ps shows any user of a process: /proc/PID/cmdline,
// the arguments separated by NUL bytes.
func procArgv(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// TestMountAPIKeyFile mounts with --api-key-file: the mount works (reads
// and an upload go through with the key from the file), and the argv of
// the memfs mount process, as ps shows it, does not hold the key.
func TestMountAPIKeyFile(t *testing.T) {
	t.Parallel()
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	key := e.serve.AdminKey
	o := e.opts()
	o.APIKey, o.APIKeyFile = "", writeKeyFile(t, key, 0o600)
	m := harness.StartMount(t, o)

	argv := procArgv(t, m.Pid())
	if strings.Contains(strings.Join(argv, " "), key) {
		t.Fatalf("ps shows the admin key in the argv of memfs mount: %q", argv)
	}
	if !strings.Contains(strings.Join(argv, " "), "--api-key-file "+o.APIKeyFile) {
		t.Fatalf("the argv %q is not that of a mount with --api-key-file (is this the right process?)", argv)
	}
	if got := mtMustSh(t, m.Dir, "cat a.md"); got != "a\n" {
		t.Errorf("a.md on the mount = %q, want %q", got, "a\n")
	}
	mtMustSh(t, m.Dir, "echo b > b.md")
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0})
	e.waitStore(map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
	mtStop(t, m)
}

// TestMountAPIKeyFileRefused: a key file memfs mount can't use, or a key
// given twice, stops it before it mounts anything, and says why without
// showing the key.
func TestMountAPIKeyFileRefused(t *testing.T) {
	t.Parallel()
	e := newMtEnv(t, nil)
	key := e.serve.AdminKey
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(o *harness.MountOptions)
		code   int
		stderr []string
	}{
		{name: "0644", code: 1, stderr: []string{"--api-key-file", "can be read by other users", "chmod 600"},
			mutate: func(o *harness.MountOptions) { o.APIKeyFile = writeKeyFile(t, key, 0o644) }},
		{name: "empty", code: 1, stderr: []string{"--api-key-file", "is empty"},
			mutate: func(o *harness.MountOptions) { o.APIKeyFile = empty }},
		{name: "missing", code: 1, stderr: []string{"--api-key-file", "no such file"},
			mutate: func(o *harness.MountOptions) { o.APIKeyFile = filepath.Join(t.TempDir(), "missing") }},
		{name: "flag and file", code: 2, stderr: []string{"--api-key and --api-key-file both given"},
			mutate: func(o *harness.MountOptions) {
				o.APIKey = ""
				o.Args = append(o.Args, "--api-key", key, "--api-key-file", writeKeyFile(t, key, 0o600))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := e.opts()
			o.Dir = filepath.Join(t.TempDir(), "mnt")
			tc.mutate(&o)
			code, stdout, stderr := harness.RunMount(t, o, mtExitTimeout)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not say %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stdout+stderr, key) {
				t.Errorf("the output shows the key:\n%s%s", stdout, stderr)
			}
			if _, err := os.Lstat(o.Dir); err == nil || harness.IsMounted(o.Dir) {
				t.Errorf("the refused mount created or mounted %s", o.Dir)
			}
		})
	}
}

// TestServeAdminKeyFile: memfs serve accepts the key of --admin-key-file,
// which its argv does not show.
func TestServeAdminKeyFile(t *testing.T) {
	t.Parallel()
	const key = "sk-memfs-admin-key-from-a-file-0123456789"
	srv := startBare(t, t.TempDir(), "--admin-key-file", writeKeyFile(t, key, 0o600))
	if argv := procArgv(t, srv.cmd.Process.Pid); strings.Contains(strings.Join(argv, " "), key) {
		t.Errorf("ps shows the admin key in the argv of memfs serve: %q", argv)
	}
	if _, err := newServeAPI(srv.url, key).call(context.Background(), "GET", "/v1/memory_stores", nil, nil); err != nil {
		t.Errorf("the key of --admin-key-file does not work: %v", err)
	}
	if strings.Contains(srv.out.String(), "generated") {
		t.Errorf("memfs serve generated a key although it was given one:\n%s", srv.out)
	}
	srv.stop(t)
}

// keyFlagRe finds a key-taking flag in --help's flag list.
var keyFlagRe = regexp.MustCompile(`(?m)^  -((?:api|admin|environment|replay-api)-key) string$`)

// keyOnCommandLineRe matches a key flag given a value: --api-key KEY,
// --environment-key=..., but not --api-key-file FILE.
var keyOnCommandLineRe = regexp.MustCompile(`-key[ =]`)

// TestKeyFlagsHelp: the --help of every command offers --NAME-file next to
// each key-taking flag, shows no key given on the command line in its
// synopsis or examples, and prints no key it found in the environment.
func TestKeyFlagsHelp(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{}
	var env []string
	for _, v := range []string{"MEMFS_API_KEY", "MEMFS_ADMIN_KEY", "MEMFS_ENVIRONMENT_KEY", "ANTHROPIC_ENVIRONMENT_KEY", "MEMFS_REPLAY_API_KEY", "ANTHROPIC_WORK_SECRET"} {
		secrets[v] = "sk-secret-from-" + strings.ToLower(v)
		env = append(env, v+"="+secrets[v])
	}
	found := map[string]bool{}
	for _, args := range [][]string{{"mount"}, {"replay"}, {"worker"}, {"session"}, {"serve"}, {"up"},
		{"stores", "ls"}, {"memories", "put"}, {"versions", "ls"}, {"sessions", "create"}, {"environments", "create"}, {"stores"}} {
		name := strings.Join(args, " ")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, harness.Binary(t), append(args, "--help")...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("memfs %s --help: %v\n%s", name, err, out)
			continue
		}
		for v, s := range secrets {
			if bytes.Contains(out, []byte(s)) {
				t.Errorf("memfs %s --help prints the key in %s:\n%s", name, v, out)
			}
		}
		for _, m := range keyFlagRe.FindAllStringSubmatch(string(out), -1) {
			found[m[1]] = true
			if !strings.Contains(string(out), "  -"+m[1]+"-file string") {
				t.Errorf("memfs %s --help has -%s but no -%s-file:\n%s", name, m[1], m[1], out)
			}
		}
		// The synopsis and the examples: no --NAME KEY.
		for _, line := range strings.Split(string(out), "\n") {
			trimmed := strings.TrimSpace(line)
			if !strings.HasPrefix(trimmed, "Usage: memfs") && !strings.HasPrefix(trimmed, "memfs ") && !strings.Contains(trimmed, " memfs ") {
				continue
			}
			if keyOnCommandLineRe.MatchString(trimmed) {
				t.Errorf("memfs %s --help shows a key on the command line: %q", name, trimmed)
			}
		}
	}
	for _, f := range []string{"api-key", "admin-key", "environment-key", "replay-api-key"} {
		if !found[f] {
			t.Errorf("no --help lists -%s: is the check above still looking at the right output?", f)
		}
	}
}
