package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/worker"
)

// Mounts over a store (docs/operating.md) on a real worker: a mount over a store's mount path, or
// inside it, shows in memfs status as an error of that store and in the
// log, and clears once it is unmounted; the session runs on.

// cvCoverTimeout bounds memfs status seeing a mount-table change: the
// worker's watch wakes at the change itself.
const cvCoverTimeout = 10 * time.Second

// cvBind bind-mounts src on dir as an operator would (mount --bind), and
// returns the umount; t.Cleanup detaches it if the test did not.
func cvBind(t *testing.T, src, dir string) (umount func()) {
	t.Helper()
	if out, err := exec.Command("mount", "--bind", src, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind %s %s: %v\n%s", src, dir, err, out)
	}
	bound := true
	t.Cleanup(func() {
		if bound {
			unix.Unmount(dir, unix.MNT_DETACH) // a failed test's bind mount
		}
	})
	return func() {
		t.Helper()
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Fatalf("umount %s: %v\n%s", dir, err, out)
		}
		bound = false
	}
}

// cvCovered waits until memfs status shows exactly want ("where mount
// point") as the covers of the mount at dir, and returns them.
func cvCovered(t *testing.T, stateDir, dir, what string, want ...string) []worker.MountCover {
	t.Helper()
	deadline := time.Now().Add(cvCoverTimeout)
	for {
		covers := stStatus(t, "--state-dir", stateDir).mount(t, dir).Covered
		var got []string
		for _, c := range covers {
			got = append(got, c.Where+" "+c.MountPoint)
		}
		if strings.Join(got, ", ") == strings.Join(want, ", ") {
			return covers
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: memfs status shows the covers %q of %s after %s, want %q", what, got, dir, cvCoverTimeout, want)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// cvCoverError is the error memfs status and the log give for a cover:
// its source written as findmnt writes a bind mount's, /dev/vda[/dir].
func cvCoverError(c worker.MountCover) string {
	return fmt.Sprintf("something is mounted %s the store's mount path: %s (%s %s[%s]); the agent may see files that are not the store's",
		c.Where, c.MountPoint, c.FSType, c.Source, c.Root)
}

// TestWorkerStoreCovered: root bind-mounts a directory over a read-only
// store's mount path, and later one on a directory inside the mount. Each
// time, memfs status (--json and text) shows the error on that store
// within a bounded wait, naming the mount point, and the worker logs it
// once as an error; after umount the error clears and an info line says
// so. The session runs on, the store's files show again, and the worker
// stops cleanly.
func TestWorkerStoreCovered(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	files := map[string]string{"/guide.md": "read me\n", "/sub/ref.md": "ref\n"}
	ro := e.newStore("Reference", files)
	w := e.startWorker("--memory-sync-interval", "60s")
	sess := e.newSession(wkRO(ro))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	fake := filepath.Join(e.base, "fake")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "guide.md"), []byte("forged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := stStatus(t, "--state-dir", e.stateDir).mount(t, dir).Covered; len(c) != 0 {
		t.Fatalf("memfs status shows covers before any: %+v", c)
	}

	for _, tc := range []struct {
		where, at string
	}{
		{"over", dir},
		{"inside", filepath.Join(dir, "sub")},
	} {
		umount := cvBind(t, fake, tc.at)
		if b, err := os.ReadFile(filepath.Join(tc.at, "guide.md")); err != nil || string(b) != "forged\n" {
			t.Fatalf("the bind mount at %s does not show the forged file: %q, %v", tc.at, b, err)
		}
		covers := cvCovered(t, e.stateDir, dir, "mount --bind at "+tc.at, tc.where+" "+tc.at)
		c := covers[0]
		// The bind mount shows the fake directory: its root ends so.
		if c.FSType == "" || c.Source == "" || !strings.HasSuffix(c.Root, "/fake") || c.Error != cvCoverError(c) {
			t.Errorf("the cover in memfs status: %+v; want its type, source, root .../fake and the error %q", c, cvCoverError(c))
		}
		want := "  ERROR       something is mounted " + tc.where + " the store's mount path:\n" +
			"              " + tc.at + " (" + c.FSType + " " + c.Source + "[" + c.Root + "])\n" +
			"              the agent may see files that are not the store's\n"
		if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, want) {
			t.Errorf("memfs status (text) does not show the error:\n%s\nin:\n%s", want, text)
		}
		line := w.WaitOutput(1, wkQuickTimeout, "something is mounted "+tc.where+" the store's mount path", wkField("store", ro), wkField("cover", tc.at))
		if !strings.Contains(line, "level=error") || !strings.Contains(line, wkField("session", sess.ID)) {
			t.Errorf("want an error line naming the session: %s", line)
		}

		umount()
		cvCovered(t, e.stateDir, dir, "umount of "+tc.at)
		w.WaitOutput(1, wkQuickTimeout, "level=info", "is no longer mounted "+tc.where+" the store's mount path", wkField("cover", tc.at))
		if n := len(w.Lines("something is mounted "+tc.where, wkField("cover", tc.at))); n != 1 {
			t.Errorf("the cover at %s was logged %d times, want once", tc.at, n)
		}
	}

	if got := mtMountFiles(t, dir); got["/guide.md"] != files["/guide.md"] || got["/sub/ref.md"] != files["/sub/ref.md"] {
		t.Errorf("after the covers went, the mount shows %v, want the store's files %v", got, files)
	}
	if !w.Running() || e.workOf(sess.ID).State != store.WorkActive {
		t.Fatalf("the session did not run on while covered (worker running %v, work item %s):\n%s", w.Running(), e.workOf(sess.ID).State, w.Output())
	}
	wkStopWorker(t, w, syscall.SIGTERM)
	wkCheckGone(t, dir)
}
