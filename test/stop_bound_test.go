package test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memfs/memfs/test/harness"
	"github.com/memfs/memfs/worker"
)

// Tests that a stop ends within the stop timeout docs/operating.md
// documents (worker.StopTimeout), whatever was done to the mounts. The bound is a correctness bound, not a speed goal: a stop that
// hangs never ends; one that works ends in a second or two.

// TestWorkerStopTamperedMounts: root on the host (the agent's shell can't
// any more: TestToolsSandboxProbes) unmounts one store of a session whose
// tools run, and bind-mounts a directory over the other (each logged as an
// error when it happens); SIGTERM still
// ends the worker within the stop timeout, exit 0: the unmounted store had
// its final sync when it went, the other
// one has its final sync, the directory mounted over it is detached (a
// warning names it) and left as it was, nothing stays mounted, and the
// mount directories are removed. (go-fuse's Server.Unmount unmounted the
// bind mount instead and waited for ever for the FUSE connection to end.)
func TestWorkerStopTamperedMounts(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	a := e.newStore("Alpha", map[string]string{"/a.md": "a1\n"})
	b := e.newStore("Beta", map[string]string{"/b.md": "b1\n"})
	w := e.startToolsWorker(nil, "--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(a), wkRW(b))
	e.waitRunning(w, sess)
	w.WaitOutput(1, wkQuickTimeout, "running the session's tools", sess.ID)
	aDir, bDir := sess.Resources[0].MountPath, sess.Resources[1].MountPath
	cover := filepath.Join(e.base, "cover")
	if err := os.MkdirAll(cover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cover, "keep.txt"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.mustTool(sess.ID, "bash", bash(`printf 'a2\n' > `+aDir+`/a.md && printf 'b2\n' > `+bDir+`/b.md`))

	sbHost(t, "umount", aDir)
	w.WaitOutput(1, wkExitTimeout, "unmounted from outside the worker", wkField("store", a))
	sbHost(t, "mount", "--bind", cover, bDir)
	if got, err := os.ReadFile(filepath.Join(bDir, "keep.txt")); err != nil || string(got) != "keep\n" {
		t.Fatalf("the bind mount over %s does not show %s: %q, %v", bDir, cover, got, err)
	}
	w.WaitOutput(1, wkQuickTimeout, "something is mounted over the store's mount path", wkField("store", b), wkField("cover", bDir))

	sbStopWarnsOnce(t, w, fmt.Sprintf("one warning that the bind mount over %s was detached", bDir), "something was mounted over the memory store's mount", wkField("store", b), wkField("cover", bDir))
	// The errors are the tampering's, logged when it happened: the umount
	// of one store and the mount over the other; the stop logs none.
	if errs := w.Lines("level=error"); len(errs) != 2 || len(w.Lines("level=error", "unmounted from outside the worker", wkField("store", a))) != 1 ||
		len(w.Lines("level=error", "something is mounted over the store's mount path", wkField("store", b), wkField("cover", bDir))) != 1 {
		t.Errorf("want two error lines, for the umount of %s and the mount over %s, got %q", aDir, bDir, errs)
	}
	e.checkStore(a, map[string]string{"/a.md": "a2\n"})
	e.checkStore(b, map[string]string{"/b.md": "b2\n"})
	if m := harness.MountsUnder(e.root); len(m) > 0 {
		t.Errorf("still mounted after the worker exited: %v", m)
	}
	wkCheckGone(t, aDir, bDir)
	if got, err := os.ReadFile(filepath.Join(cover, "keep.txt")); err != nil || string(got) != "keep\n" {
		t.Errorf("the directory that was mounted over the store changed: %q, %v", got, err)
	}
}

// sbHost runs a command on the host, as the test's user (root).
func sbHost(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
}

// TestWorkerStopBusyMount: a process working in a mount (its working
// directory) keeps the unmount busy; the worker retries until the
// unmount's time is up, then detaches the mount lazily, says so, and exits
// 0 within the stop timeout, with the store's writes uploaded, nothing
// left in the mount table and the mount directory removed.
func TestWorkerStopBusyMount(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	a := e.newStore("Alpha", map[string]string{"/a.md": "a1\n"})
	w := e.startWorker("--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(a))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	mtMustSh(t, dir, `printf 'a2\n' > a.md`)
	sgHoldBusy(t, dir)

	sbStopWarnsOnce(t, w, "one warning that the busy mount was detached lazily", "detached lazily (MNT_DETACH)", wkField("store", a))
	e.checkStore(a, map[string]string{"/a.md": "a2\n"})
	wkCheckGone(t, dir)
}

// TestWorkerStopMountCopiedElsewhere: a process in a mount namespace of
// its own (unshare -m, as a sandbox makes) holds a copy of the store's
// mount, so unmounting it in the worker's namespace does not end its FUSE
// connection. The worker still exits 0 within the stop timeout, with the
// store's writes uploaded and nothing left in its mount table, and says
// that the connection outlived the unmount. (go-fuse's Server.Unmount
// waited for ever for that connection to end.)
func TestWorkerStopMountCopiedElsewhere(t *testing.T) {
	t.Parallel()
	requireTool(t, "unshare") // util-linux
	e := newWkEnv(t)
	a := e.newStore("Alpha", map[string]string{"/a.md": "a1\n"})
	w := e.startWorker("--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(a))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	mtMustSh(t, dir, `printf 'a2\n' > a.md`)
	// The copy is made once unshare prints; its mounts are private, so
	// the worker's unmount does not reach them.
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", "echo ready; exec sleep 600")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	t.Cleanup(func() {
		holder.Process.Kill()
		holder.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("unshare -m printed %q, %v", line, err)
	}

	sbStopWarnsOnce(t, w, "one warning that the connection outlived the unmount", "FUSE connection is still open after the unmount", wkField("store", a))
	e.checkStore(a, map[string]string{"/a.md": "a2\n"})
	wkCheckGone(t, dir)
}

// sbStopWarnsOnce sends w SIGTERM, wants exit 0 within the stop timeout
// and exactly one warning line holding parts: what names it in the error.
func sbStopWarnsOnce(t *testing.T, w *harness.Worker, what string, parts ...string) {
	t.Helper()
	w.Signal(syscall.SIGTERM)
	if code := w.Wait(worker.StopTimeout); code != 0 {
		t.Fatalf("memfs worker exited %d after SIGTERM, want 0:\n%s", code, w.Output())
	}
	lines := w.Lines(parts...)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=warning") {
		t.Errorf("want %s, got %q:\n%s", what, lines, w.Output())
	}
}
