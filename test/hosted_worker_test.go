package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// newWkEnvHosted is newWkEnv against the hosted path: a strict memfs serve
// (it always is) with the change feed off, so mounts follow their stores as
// they do against the hosted API.
func newWkEnvHosted(t *testing.T) *wkEnv {
	t.Helper()
	mtRequireFUSE(t)
	return newWkEnvServe(t, nil, "--change-feed=false")
}

// TestWorkerFeedOff: the hosted path end to end. A worker runs a session
// with two stores, one read-only, against a strict memfs serve with the
// change feed off (--change-feed=false answers its route 404, as the
// hosted API does): each mount says it follows its store through the
// memory versions, an edit goes up, a change made in the store comes down,
// the read-only store refuses writes, and archiving the session ends it
// with a final sync while the worker goes on; SIGTERM then exits 0.
func TestWorkerFeedOff(t *testing.T) {
	t.Parallel()
	e := newWkEnvHosted(t)
	rw := e.newStore("notes", map[string]string{"/a.md": "a\n"})
	ro := e.newStore("docs", map[string]string{"/b.md": "b\n"})
	w := e.startWorker("--memory-sync-interval", "5s")
	sess := e.newSession(wkRW(rw), wkRO(ro))
	e.waitRunning(w, sess)
	rwDir, roDir := sess.Resources[0].MountPath, sess.Resources[1].MountPath
	w.WaitOutput(2, wkSyncTimeout, "following the store through its memory versions", "the server refused its change feed")

	mtMustSh(t, rwDir, `echo new > new.md && printf 'a2\n' > a.md`)
	e.waitStore(rw, map[string]string{"/a.md": "a2\n", "/new.md": "new\n"}, wkSyncTimeout)

	if _, err := e.admin.CreateMemory(context.Background(), ro, "/remote.md", "from the store\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wkSyncTimeout)
	for {
		b, err := os.ReadFile(filepath.Join(roDir, "remote.md"))
		if err == nil && string(b) == "from the store\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a memory created in the store did not come down to %s within %s: %q, %v", roDir, wkSyncTimeout, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, stderr, err := mtSh(t, roDir, `echo x > c.md`); err == nil || !strings.Contains(stderr, "Read-only file system") {
		t.Errorf("a write on the read-only mount: %v, stderr %q; want it refused with \"Read-only file system\"", err, stderr)
	}

	mtMustSh(t, rwDir, `echo last > last.md`)
	if _, err := e.admin.ArchiveSession(context.Background(), sess.ID); err != nil {
		t.Fatal(err)
	}
	w.WaitOutput(1, wkBeatTimeout, "session ending", "ending=clean", sess.ID)
	e.waitWorkState(sess.ID, store.WorkStopped, wkExitTimeout)
	e.checkStore(rw, map[string]string{"/a.md": "a2\n", "/new.md": "new\n", "/last.md": "last\n"})
	e.checkStore(ro, map[string]string{"/b.md": "b\n", "/remote.md": "from the store\n"})
	wkCheckGone(t, rwDir, roDir)
	if !w.Running() {
		t.Fatalf("the worker exited after a session ended:\n%s", w.Output())
	}
	wkStopWorker(t, w, syscall.SIGTERM)
}
