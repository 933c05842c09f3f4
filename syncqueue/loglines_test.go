package syncqueue

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store/sqlstore"
)

// What an operator sees of the engine (docs/operating.md, "memfs status",
// Logs): one info line per pass
// that did something, the load summary and its progress, the store's
// name, and a last sync that means the store answered.

// passLines returns the info entries of the flusher's "sync pass" line.
func (e *mgEnv) passLines() []*logrus.Entry {
	var out []*logrus.Entry
	for _, en := range e.hook.AllEntries() {
		if en.Message == "sync pass" {
			if en.Level != logrus.InfoLevel {
				e.t.Errorf("the sync pass line is at %s, want info", en.Level)
			}
			out = append(out, en)
		}
	}
	return out
}

// checkPassLine runs one pass and checks that it logs a line with want's
// fields, or, with want nil, nothing.
func (e *mgEnv) checkPassLine(what string, want logrus.Fields) {
	e.t.Helper()
	before := len(e.passLines())
	e.sync(true, true)
	lines := e.passLines()[before:]
	switch {
	case want == nil && len(lines) != 0:
		e.t.Errorf("%s: logged %v at info, want nothing", what, lines[0].Data)
	case want != nil && len(lines) != 1:
		e.t.Errorf("%s: %d sync pass lines, want 1", what, len(lines))
	case want != nil:
		for k, v := range want {
			if lines[0].Data[k] != v {
				e.t.Errorf("%s: %s=%v, want %v (%v)", what, k, lines[0].Data[k], v, lines[0].Data)
			}
		}
	}
}

func TestPassLogLines(t *testing.T) {
	t.Parallel()
	e := mgSetupWith(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n"}, sqlstore.Options{MaxMemoriesPerStore: 3})
	e.start(nil)
	e.checkPassLine("an idle pass", nil)
	e.mustWrite("/c.md", "c\n")
	e.checkPassLine("an upload", logrus.Fields{"uploaded": 1, "refused": 0, "failed": 0, "left": 0})
	e.mustWrite("/d.md", "over the cap\n")
	e.checkPassLine("a refusal at the cap", logrus.Fields{"uploaded": 0, "refused": 1, "failed": 1, "left": 1})
	e.checkPassLine("the same change refused again", nil)
	e.mustWrite("/d.md", "over the cap, edited\n")
	// Not sent while the store is at its cap and nothing was deleted
	// (capwait.go): nothing new to say.
	e.checkPassLine("the edited change, waiting for room", nil)
	e.unlink("/d.md")
	e.unlink("/c.md")
	e.checkPassLine("a delete", logrus.Fields{"deleted": 1, "left": 0})
	e.proxy.holdFeed()
	e.mustWrite("/a.md", "mine\n")
	e.remotePut("/a.md", "theirs\n")
	e.checkPassLine("a conflict", logrus.Fields{"conflicts": 1, "uploaded": 0})
	e.proxy.releaseFeed()
	e.caughtUp()
	e.checkPassLine("idle again", nil)
}

// A path conflict that lasts is said at info once, not every pass.
func TestPathWaitLoggedOnce(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.proxy.holdFeed() // the mount does not learn that /x.md is taken
	e.remotePut("/x.md", "theirs\n")
	e.mustWrite("/x.md", "mine\n")
	count := func() int {
		n := 0
		for _, en := range e.hook.AllEntries() {
			if en.Level == logrus.InfoLevel && en.Message == "changes wait on a path the store still holds for another memory; retried every pass" {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		e.sync(true, false)
		if st := e.eng.Status(); len(st.Pending) != 1 || st.Pending[0].Reason != ReasonPath {
			t.Fatalf("pass %d: pending %+v, want /x.md waiting on its path", i, st.Pending)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("%d info lines about the path that waits over 3 passes, want 1", n)
	}
}

// Loading a store reports progress page by page, ends with Done, and logs
// one summary line; status names the store.
func TestLoadProgressAndSummary(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	var bytes int64
	for i := range 45 {
		p := fmt.Sprintf("/m%02d.md", i)
		if i%3 == 0 {
			p = fmt.Sprintf("/dir%d/m%02d.md", i%2, i)
		}
		files[p] = fmt.Sprintf("memory %d\n", i)
		bytes += int64(len(files[p]))
	}
	e := mgSetup(t, files)
	var mu sync.Mutex
	var seen []LoadProgress
	e.start(func(o *EngineOptions) {
		o.OnLoad = func(p LoadProgress) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, p)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	// 30 memories at the root: two pages of at most 20; 15 in two folders.
	if len(seen) < 4 {
		t.Fatalf("%d progress reports, want one per page (at least 4)", len(seen))
	}
	for i, p := range seen {
		if p.StoreID != e.storeID {
			t.Errorf("report %d names store %q", i, p.StoreID)
		}
		if i > 0 && (p.Memories < seen[i-1].Memories || p.Bytes < seen[i-1].Bytes || p.Elapsed < seen[i-1].Elapsed) {
			t.Errorf("report %d went back: %+v after %+v", i, p, seen[i-1])
		}
		if p.Done != (i == len(seen)-1) {
			t.Errorf("report %d: Done=%v", i, p.Done)
		}
	}
	if last := seen[len(seen)-1]; last.Memories != 45 || last.Bytes != bytes {
		t.Errorf("last report %+v, want 45 memories, %d bytes", last, bytes)
	}
	var summary []*logrus.Entry
	for _, en := range e.hook.AllEntries() {
		if en.Message == "memory store loaded" {
			summary = append(summary, en)
		}
	}
	if len(summary) != 1 || summary[0].Level != logrus.InfoLevel {
		t.Fatalf("summary lines %v, want one at info", summary)
	}
	if d := summary[0].Data; d["memories"] != 45 || d["bytes"] != bytes || d["seconds"] == nil {
		t.Errorf("summary %v, want memories=45 bytes=%d seconds=...", d, bytes)
	}
	if st := e.eng.Status(); st.StoreName != t.Name() || st.Loaded != 45 {
		t.Errorf("status names store %q with %d loaded, want %q with 45", st.StoreName, st.Loaded, t.Name())
	}
}

// A pass while the store is unreachable is no sync, even with nothing
// to send: last_sync keeps the last pass that reached the store. It runs
// in a synctest bubble (bubble_test.go), where each pass has a time of
// its own by time.Sleep.
func TestLastSyncNeedsTheStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testLastSyncNeedsTheStore)
}

func testLastSyncNeedsTheStore(t *testing.T) {
	e := mgSetupBubble(t, mgFiles, sqlstore.Options{})
	e.start(nil)
	at := time.Now()
	e.sync(true, false)
	first := e.eng.Status().LastSync
	if first == nil || !first.Equal(at) {
		t.Fatalf("last sync %v after a pass with the store up, want %v", first, at)
	}
	n := e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		mgWriteError(w, http.StatusServiceUnavailable, "overloaded_error", "down")
		return true
	})
	e.proxy.releaseFeed()
	e.proxy.waitNewPoll(t, n)
	eventually(t, "the store to be reported unreachable", func() bool { return e.eng.Status().Unreachable })
	time.Sleep(time.Second) // not longer: the overlay's backoff would outgrow eventually's deadline
	at = time.Now()
	e.sync(true, false)
	st := e.eng.Status()
	if st.LastSync == nil || !st.LastSync.Equal(*first) {
		t.Errorf("last sync %v after a pass during the outage, want still %v", st.LastSync, first)
	}
	if st.LastPass == nil || !st.LastPass.At.Equal(at) {
		t.Errorf("last pass %+v, want the pass at %v", st.LastPass, at)
	}
	if st.LastError == "" || st.LastErrorAt == nil {
		t.Errorf("no last error during the outage: %+v", st)
	}
	e.proxy.setFault(nil)
	eventually(t, "the store to be reported back", func() bool { return !e.eng.Status().Unreachable })
	time.Sleep(time.Second)
	at = time.Now()
	e.sync(true, false)
	if st := e.eng.Status(); st.LastSync == nil || !st.LastSync.Equal(at) {
		t.Errorf("last sync %v after the store came back, want %v", st.LastSync, at)
	}
}

// The overlay retries a failed poll within the sync interval, so the end
// of an outage is logged within an interval even with nothing to upload.
func TestOverlayBackoffWithinInterval(t *testing.T) {
	t.Parallel()
	for _, interval := range []time.Duration{MinInterval, 15 * time.Second, time.Hour} {
		bo := overlayBackoff(interval)
		limit := min(interval, overlayBackoffCap)
		for i := range 30 {
			if w := bo.next(); w <= 0 || w > limit {
				t.Fatalf("interval %s: wait %d is %s, want within (0, %s]", interval, i, w, limit)
			}
		}
	}
}

// While the store is away the overlay's polls don't wait for changes, so
// its return is noticed at once, not a long poll later.
func TestRecoveryNotHeldByLongPoll(t *testing.T) {
	t.Parallel()
	e := mgSetup(t, mgFiles)
	const pollWait = 15 * time.Second // longer than eventually's deadline
	e.start(func(o *EngineOptions) { o.PollWait = pollWait })
	// The head at Open, then the first long poll: it waits at the server.
	eventually(t, "the first long poll", func() bool { return len(e.proxy.requests("changes")) >= 2 })
	e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		if kind == "changes" {
			mgWriteError(w, http.StatusServiceUnavailable, "overloaded_error", "down")
			return true
		}
		return false
	})
	e.remotePut("/a.md", "ends the long poll in flight\n")
	eventually(t, "the store to be reported unreachable", func() bool { return e.eng.Status().Unreachable })
	e.proxy.setFault(nil)
	eventually(t, "the store to be reported back within a poll's wait", func() bool { return !e.eng.Status().Unreachable })
	for _, en := range e.hook.AllEntries() {
		if en.Message == "store recovered" {
			return
		}
	}
	t.Error("no store recovered line")
}
