package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// TestMountSaysTheRealErrorFirst: a memfs mount that can't work says why
// in one line, and nothing before it: as a user whose home directory
// does not exist (the default state dir below it), no warning about the
// status socket's mkdir precedes the real error (FUSE, or the state dir);
// a state dir that can't be created is named, with the flag that picks
// another, before anything is started in it.
func TestMountSaysTheRealErrorFirst(t *testing.T) {
	mtRequireFUSE(t)
	// A copy of the binary that another user may run (the harness keeps
	// its own in a 0700 directory).
	binDir := t.TempDir()
	for _, d := range []string{filepath.Dir(binDir), binDir} { // the test's temporary root, and the directory in it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(harness.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "memfs")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, cred *syscall.Credential, env []string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), mtExitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "mount", "--api-url", "http://127.0.0.1:1", "--store", "memstore_x", "--mkdir", filepath.Join(base, "mnt"))
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "MEMFS_API_KEY=sk-memfs-admin-test"}, env...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var errb strings.Builder
		cmd.Stderr = &errb
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("memfs mount did not exit within %s:\n%s", mtExitTimeout, errb.String())
		}
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), errb.String()
	}
	t.Run("a user whose home does not exist", func(t *testing.T) {
		code, stderr := run(t, &syscall.Credential{Uid: 65534, Gid: 65534}, []string{"HOME=/nonexistent"})
		if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "memfs mount: ") {
			t.Errorf("exit %d, want 1 and one line with the real error:\n%s", code, stderr)
		}
		if strings.Contains(stderr, "level=warning") {
			t.Errorf("a warning comes before the error:\n%s", stderr)
		}
	})
	t.Run("a state dir under a file", func(t *testing.T) {
		stateDir := filepath.Join(file, "state")
		code, stderr := run(t, nil, []string{"MEMFS_STATE_DIR=" + stateDir})
		want := "memfs mount: the state dir " + stateDir + ": mkdir " + file + ": not a directory; give another with --state-dir or MEMFS_STATE_DIR\n"
		if code != 1 || stderr != want {
			t.Errorf("exit %d, want 1 and only %q:\n%s", code, want, stderr)
		}
		if _, err := os.Lstat(filepath.Join(base, "mnt")); err == nil {
			t.Errorf("the mount point was created for a mount that could not start")
		}
	})
}

// TestMountBusyStopSaysWhy: Ctrl-C on a busy mount says at once what the
// stop waits for and what a second Ctrl-C does, instead of going silent
// until the lazy detach; the second Ctrl-C detaches it and the process
// exits 0 (the final sync had uploaded everything).
func TestMountBusyStopSaysWhy(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	m := e.mount()
	mtMustSh(t, m.Dir, "echo b > b.md")
	sgHoldBusy(t, m.Dir)
	m.Signal(syscall.SIGINT)
	line := m.WaitOutput(1, "a second Ctrl-C or SIGTERM detaches it now", mtExitTimeout)
	for _, s := range []string{"retrying the unmount for up to ", "then detaching it lazily", "level=warning"} {
		if !strings.Contains(line, s) {
			t.Errorf("the busy mount's line does not say %q:\n%s", s, line)
		}
	}
	if !m.Running() {
		t.Fatalf("memfs mount had exited when it said it waits:\n%s", m.Output())
	}
	t0 := time.Now()
	m.Signal(syscall.SIGINT)
	if code := m.Wait(mtExitTimeout); code != 0 {
		t.Fatalf("memfs mount exited %d after the second Ctrl-C, want 0:\n%s", code, m.Output())
	}
	sgCheckPrompt(t, time.Since(t0), false, true)
	sgCheckDetached(t, m.Dir)
	e.waitStore(map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
}
