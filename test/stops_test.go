package test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/test/harness"
	"github.com/memfs/memfs/worker"
)

// Tests of how memfs stops (docs/operating.md): an unmount from outside
// is a normal stop, the exit status says whether changes were left in the
// journal (docs/operating.md, "Stopping and exit status"), and memfs serve checks its address
// before it creates anything.

// stUnmount unmounts dir from outside the memfs process, as an operator
// or a systemd .mount unit does: umount(8) (lazy adds -l), or umount(2)
// when umount(8) is not installed. fusermount3 -u does the same
// umount(2) for a normal user; CI has no FUSE helper binaries.
func stUnmount(t *testing.T, dir string, lazy bool) {
	t.Helper()
	if _, err := exec.LookPath("umount"); err == nil {
		args := []string{dir}
		if lazy {
			args = []string{"-l", dir}
		}
		if out, err := exec.Command("umount", args...).CombinedOutput(); err != nil {
			t.Fatalf("umount %v: %v\n%s", args, err, out)
		}
		return
	}
	flags := 0
	if lazy {
		flags = unix.MNT_DETACH
	}
	if err := unix.Unmount(dir, flags); err != nil {
		t.Fatalf("umount(2) %s: %v", dir, err)
	}
}

// TestMountUnmountedFromOutside: umount of a running memfs mount is a
// normal stop, like Ctrl-C: the final sync uploads what was closed
// (deletes included), one info line says it was unmounted from outside and
// that nothing is left, the directory it created is removed, and it exits
// 0 with no error logged. umount -l of a busy mount (a shell in it) is
// noticed at once too, though the kernel keeps that mount's connection
// until the shell leaves.
func TestMountUnmountedFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name string
		lazy bool
	}{
		{"umount", false},
		{"umount -l with a process in the mount", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMtEnv(t, map[string]string{"/existing.md": "v1\n", "/gone.md": "bye\n"})
			m := e.mount()
			mtMustSh(t, m.Dir, `printf 'alpha\n' > a.md && mkdir -p d && printf 'deep\n' > d/b.md && printf 'v2\n' > existing.md && rm gone.md`)
			if got := e.contents(); !maps.Equal(got, map[string]string{"/existing.md": "v1\n", "/gone.md": "bye\n"}) {
				t.Fatalf("something was uploaded before the unmount (the interval is 60 s):\n%v", got)
			}
			if tc.lazy {
				sgHoldBusy(t, m.Dir)
			}
			stUnmount(t, m.Dir, tc.lazy)
			if code := m.Wait(mtExitTimeout); code != 0 {
				t.Fatalf("memfs mount exited %d after an unmount from outside, want 0:\n%s", code, m.Output())
			}
			want := map[string]string{"/existing.md": "v2\n", "/a.md": "alpha\n", "/d/b.md": "deep\n"}
			if got := e.contents(); !maps.Equal(got, want) {
				t.Errorf("the store after memfs mount exited:\n%s", mtDiff(got, want))
			}
			lines := m.Lines("unmounted from outside memfs")
			if len(lines) != 1 || !strings.Contains(lines[0], "level=info") || !strings.Contains(lines[0], "left=nothing") {
				t.Errorf("want one info line saying the mount was unmounted from outside and nothing is left, got %q:\n%s", lines, m.Output())
			}
			if errs := m.Lines("level=error"); len(errs) > 0 {
				t.Errorf("an unmount from outside logged errors: %q", errs)
			}
			sgCheckDetached(t, m.Dir)
			if _, err := os.Lstat(m.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the mount directory memfs mount created is still there: %v", err)
			}
		})
	}
}

// TestMountLeftInJournal: a mount whose store is unreachable at the end
// exits 3 (changes left in the journal), says what is left, why and what
// uploads it, and the journal holds the changes. memfs replay then exits
// 1 while the store is down (the journal kept), 3 when it uploads some
// but one waits (the store's memory cap), 0 once everything went up, and 0
// with nothing to replay.
func TestMountLeftInJournal(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/base.md": "base\n"})
	m := e.mount()
	e.serve.Stop()
	mtMustSh(t, m.Dir, `printf 'waits\n' > new.md && printf 'changed\n' > base.md`)
	m.Signal(syscall.SIGTERM)
	if code := m.Wait(mtExitTimeout); code != sgExitLeft {
		t.Fatalf("memfs mount exited %d with its store down at the end, want %d:\n%s", code, sgExitLeft, m.Output())
	}
	msg := m.Lines("memfs mount:", "left in the journal")
	if len(msg) != 1 || !strings.Contains(msg[0], e.storeID+": 2 changes") || !strings.Contains(msg[0], syncqueue.ReasonUnreachable) ||
		!strings.Contains(msg[0], "memfs replay") {
		t.Errorf("the exit message does not say what is left, why, and what uploads it: %q\n%s", msg, m.Output())
	}
	sgCheckDetached(t, m.Dir)
	stCheckJournal(t, e.stateDir, e.storeID, map[string]string{"/new.md": "waits\n", "/base.md": "changed\n"})
	var st struct {
		Left []worker.LeftJournal `json:"journals_left_behind"`
	}
	if out, errb, code := cvMemfs(t, nil, "status", "--json", "--state-dir", e.stateDir); code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Errorf("memfs status --json: exit %d:\n%s%s", code, out, errb)
	}
	if len(st.Left) != 1 || st.Left[0].StoreID != e.storeID || st.Left[0].Pending != 2 {
		t.Errorf("memfs status lists journals left behind %+v, want %s's with 2 changes", st.Left, e.storeID)
	}

	replay := func() (stdout, stderr string, code int) {
		return cvMemfs(t, []string{"MEMFS_API_KEY=" + e.serve.AdminKey}, "replay", "--api-url", e.serve.URL, "--state-dir", e.stateDir)
	}
	out, errb, code := replay()
	if code != 1 || !strings.Contains(errb, "could not be replayed") || !strings.Contains(errb, e.storeID+": 2 changes") {
		t.Errorf("memfs replay with the store down: exit %d, want 1 naming what is kept:\n%s%s", code, out, errb)
	}
	stCheckJournal(t, e.stateDir, e.storeID, map[string]string{"/new.md": "waits\n", "/base.md": "changed\n"})

	// At its cap of one memory the store takes the edit of /base.md and
	// refuses /new.md.
	e.serve.Opts.Args = []string{"--max-memories-per-store", "1"}
	e.serve.Restart()
	out, errb, code = replay()
	if code != sgExitLeft || !strings.Contains(out, "1 uploaded") || !strings.Contains(errb, syncqueue.ReasonCap) {
		t.Errorf("memfs replay with a change the store refuses: exit %d, want %d naming the cap:\n%s%s", code, sgExitLeft, out, errb)
	}
	if got, want := e.contents(), map[string]string{"/base.md": "changed\n"}; !maps.Equal(got, want) {
		t.Errorf("the store after the replay at the cap:\n%s", mtDiff(got, want))
	}
	stCheckJournal(t, e.stateDir, e.storeID, map[string]string{"/new.md": "waits\n"})

	e.serve.Stop()
	e.serve.Opts.Args = nil
	e.serve.Restart()
	if out, errb, code = replay(); code != 0 || !strings.Contains(out, "1 uploaded, 0 deleted, nothing left") {
		t.Errorf("memfs replay with room: exit %d, want 0:\n%s%s", code, out, errb)
	}
	if got, want := e.contents(), map[string]string{"/base.md": "changed\n", "/new.md": "waits\n"}; !maps.Equal(got, want) {
		t.Errorf("the store after the last replay:\n%s", mtDiff(got, want))
	}
	if out, errb, code = replay(); code != 0 || !strings.Contains(errb, "nothing to replay") {
		t.Errorf("memfs replay with nothing to replay: exit %d, want 0:\n%s%s", code, out, errb)
	}
}

// stCheckJournal fails unless the store's journal (no process holds it)
// holds exactly want as pending changes: path -> content.
func stCheckJournal(t *testing.T, stateDir, storeID string, want map[string]string) {
	t.Helper()
	auth, err := syncqueue.JournalAuth(stateDir, storeID)
	if err != nil {
		t.Fatal(err)
	}
	auth.AnySession = true
	j, err := journal.Open(syncqueue.JournalDir(stateDir, storeID), journal.Options{Auth: auth})
	if err != nil {
		t.Fatalf("open the journal left behind: %v", err)
	}
	defer j.Close(context.Background())
	got := map[string]string{}
	for _, p := range j.Pending() {
		got[p.Path] = string(p.Content)
	}
	if !maps.Equal(got, want) {
		t.Errorf("the journal of %s holds:\n%s", storeID, mtDiff(got, want))
	}
}

// TestWorkerStoreUnmountedFromOutside: umount of one store of a running
// session is the end of that mount, not of the session or the worker: its
// final sync (writes only) uploads what was closed on it, one error line
// says so with what is left, memfs status lists it as an error, the
// directory is removed; the session's other
// store stays mounted and syncing, its work item stays active, and the
// worker stops later with exit 0, nothing left.
func TestWorkerStoreUnmountedFromOutside(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	a := e.newStore("Alpha", map[string]string{"/a.md": "a1\n"})
	b := e.newStore("Beta", map[string]string{"/b.md": "b1\n"})
	w := e.startWorker("--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(a), wkRW(b))
	e.waitRunning(w, sess)
	aDir, bDir := sess.Resources[0].MountPath, sess.Resources[1].MountPath
	mtMustSh(t, aDir, `printf 'a2\n' > a.md && echo new > n.md`)

	stUnmount(t, aDir, false)
	line := w.WaitOutput(1, wkExitTimeout, "unmounted from outside the worker", wkField("store", a))
	if !strings.Contains(line, "level=error") || !strings.Contains(line, "left=nothing") || !strings.Contains(line, wkField("session", sess.ID)) {
		t.Errorf("want an error line naming the session and saying nothing is left: %s", line)
	}
	e.checkStore(a, map[string]string{"/a.md": "a2\n", "/n.md": "new\n"})
	wkCheckGone(t, aDir)
	if errs := w.Lines("level=error"); len(errs) != 1 {
		t.Errorf("an unmount from outside logged errors other than the one line that says so: %q", errs)
	}
	// memfs status lists it, as an error, while the session runs.
	var lost []worker.UnmountedStore
	for _, p := range stStatus(t, "--state-dir", e.stateDir).Processes {
		lost = append(lost, p.Unmounted...)
	}
	if len(lost) != 1 || lost[0].StoreID != a || lost[0].Dir != aDir || lost[0].SessionID != sess.ID || lost[0].Left != "nothing" ||
		!strings.Contains(lost[0].Error, "unmounted from outside the worker") {
		t.Errorf("memfs status lists as unmounted from outside %+v, want store %s at %s of session %s, nothing left", lost, a, aDir, sess.ID)
	}
	if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, "UNMOUNTED FROM OUTSIDE") || !strings.Contains(text, "  "+aDir+"  "+a+"\n    ERROR ") {
		t.Errorf("memfs status (text) does not list %s as unmounted from outside:\n%s", aDir, text)
	}

	if !w.Running() {
		t.Fatalf("the worker exited after a store was unmounted:\n%s", w.Output())
	}
	if st := e.workOf(sess.ID).State; st != store.WorkActive {
		t.Errorf("the session's work item is %s after one store was unmounted, want active", st)
	}
	mtMustSh(t, bDir, `printf 'b2\n' >> b.md`)
	wkStopWorker(t, w, syscall.SIGTERM)
	e.checkStore(b, map[string]string{"/b.md": "b1\nb2\n"})
	e.checkStore(a, map[string]string{"/a.md": "a2\n", "/n.md": "new\n"})
	wkCheckGone(t, bDir)
}

// TestSessionLeftInJournal: memfs session stopped with a change the store
// can't take (content that is not UTF-8) exits 3, naming the store and the
// reason; what could go up went up.
func TestSessionLeftInJournal(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Notes", map[string]string{"/n.md": "n1\n"})
	sess := e.newSession(wkRW(st))
	raw, _, _ := e.poll()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	work := wkWriteFile(t, t.TempDir(), "work.json", b, 0o600)
	p := harness.StartProc(t, harness.ProcOptions{}, "session", "--api-url", e.serve.URL, "--memory-root", e.root,
		"--state-dir", e.stateDir, "--memory-sync-interval", "60s", "--work-json", work)
	t.Cleanup(func() { harness.DetachUnder(e.root) })
	p.WaitOutput(1, wkStartTimeout, "session running", sess.ID)
	dir := sess.Resources[0].MountPath
	mtMustSh(t, dir, `printf 'n2\n' > n.md && printf '\377' > bin.dat`)
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(wkExitTimeout); code != sgExitLeft {
		t.Fatalf("memfs session exited %d with a change the store can't take, want %d:\n%s", code, sgExitLeft, p.Output())
	}
	if l := p.Lines("memfs session:", "left in the journal", st+": 1 change (1 "+syncqueue.ReasonNotUTF8+")"); len(l) != 1 {
		t.Errorf("the exit message does not say what is left and why:\n%s", p.Output())
	}
	e.checkStore(st, map[string]string{"/n.md": "n2\n"})
	wkCheckGone(t, dir)
}

// TestServeAddressInUse: memfs serve on an address already in use exits 1
// with a message naming it, before it creates anything: no data dir, no
// admin.key, no database.
func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	dataDir := filepath.Join(t.TempDir(), "data")
	out, errb, code := cvMemfs(t, nil, "serve", "--listen", addr, "--data-dir", dataDir)
	if code != 1 || !strings.Contains(errb, "listen on "+addr) || !strings.Contains(errb, "address already in use") {
		t.Errorf("memfs serve on a taken address: exit %d, want 1 naming %s:\n%s%s", code, addr, out, errb)
	}
	for _, f := range []string{dataDir, filepath.Join(dataDir, "admin.key"), filepath.Join(dataDir, "memfs.db")} {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after memfs serve failed to listen (%v): a taken port must leave nothing behind", f, err)
		}
	}
	// The same data dir serves once the address is free.
	s := harness.StartServe(t, harness.ServeOptions{DataDir: dataDir})
	if _, err := os.Stat(filepath.Join(s.DataDir, "memfs.db")); err != nil {
		t.Errorf("memfs serve on a free address: %v", err)
	}
}
