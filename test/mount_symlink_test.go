package test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/test/harness"
)

// TestMountThroughSymlink: a mount point reached through a symlink
// (link -> real, memfs mount link/sub) is mounted where the kernel puts
// it, at real/sub, and stays mounted: ls and cat work through the link,
// and Ctrl-C ends it after the final sync with exit 0. A mount point that
// is itself a symlink to an empty directory works too, and so does
// mount.memfs on a path through a symlink.
func TestMountThroughSymlink(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/hello.md": "hello\n"})
	base := t.TempDir()
	real := filepath.Join(base, "real")
	for _, d := range []string{filepath.Join(real, "sub"), filepath.Join(real, "alias-target"), filepath.Join(real, "helper")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("real", filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "alias-target"), filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/hello.md": "hello\n"}
	for i, tc := range []struct{ given, real string }{
		{filepath.Join(base, "link", "sub"), filepath.Join(real, "sub")},
		{filepath.Join(base, "alias"), filepath.Join(real, "alias-target")},
	} {
		o := e.opts()
		o.Dir, o.NoMkdir = tc.given, true
		m := harness.StartMount(t, o)
		if m.Dir != tc.real {
			t.Errorf("memfs mount %s says it mounted at %s, want the resolved path %s", tc.given, m.Dir, tc.real)
		}
		if got := mtMustSh(t, tc.given, "ls"); !strings.Contains(got, "hello.md\n") {
			t.Errorf("ls in %s = %q", tc.given, got)
		}
		if got := mtMustSh(t, tc.given, "cat hello.md"); got != "hello\n" {
			t.Errorf("cat %s/hello.md = %q", tc.given, got)
		}
		name := "new" + strconv.Itoa(i) + ".md"
		mtMustSh(t, tc.given, "echo through the link > "+name)
		want["/"+name] = "through the link\n"
		if !m.Running() {
			t.Fatalf("memfs mount %s exited by itself:\n%s", tc.given, m.Output())
		}
		mtStop(t, m)
		if out := m.Output(); strings.Contains(out, "unmounted from outside") {
			t.Errorf("memfs mount %s took its own mount for an unmount from outside:\n%s", tc.given, out)
		}
		if fi, err := os.Stat(tc.real); err != nil || !fi.IsDir() {
			t.Errorf("the mount point %s it did not create is gone: %v", tc.real, err)
		}
	}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store after the mounts:\n%s", mtDiff(got, want))
	}

	// mount.memfs returns once the store is listed at the resolved path.
	dir := filepath.Join(base, "link", "helper")
	pid := 0
	t.Cleanup(func() {
		if harness.IsMounted(dir) {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		if pid > 0 && mhRunning(pid) {
			syscall.Kill(pid, syscall.SIGKILL) // by its pid: the memfs mount this test started
		}
	})
	keyFile := writeKeyFile(t, e.serve.AdminKey, 0o600)
	code, stdout, stderr := mhRun(t, mhHelper(t), e.storeID, dir, "-v", "-o",
		"api_url="+e.serve.URL+",api_key_file="+keyFile+",state_dir="+e.stateDir+",sync_interval=60s")
	if m := regexp.MustCompile(`\(pid (\d+)\)`).FindStringSubmatch(stdout); m != nil {
		pid, _ = strconv.Atoi(m[1])
	}
	if code != 0 || strings.Contains(stdout+stderr, "<nil>") {
		t.Fatalf("mount.memfs %s exited %d:\n%s%s", dir, code, stdout, stderr)
	}
	if got := mtMustSh(t, dir, "cat hello.md"); got != "hello\n" {
		t.Errorf("cat %s/hello.md = %q", dir, got)
	}
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", dir, err, out)
	}
	deadline := time.Now().Add(mtExitTimeout)
	for mhRunning(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("memfs mount (pid %d) still runs %s after umount", pid, mtExitTimeout)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
