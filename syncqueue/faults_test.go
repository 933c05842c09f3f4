package syncqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
)

// rename moves a file or directory on the tree, as mv would.
func (e *mgEnv) rename(from, to string) {
	e.t.Helper()
	parentOf := func(p string) uint64 {
		d := path.Dir(p)
		if d == "/" {
			return fs.RootIno
		}
		a, err := e.lookup(d)
		if err != nil {
			e.t.Fatalf("lookup %s: %v", d, err)
		}
		return a.Ino
	}
	if err := e.tree.Rename(parentOf(from), path.Base(from), parentOf(to), path.Base(to), 0); err != nil {
		e.t.Fatalf("mv %s %s: %v", from, to, err)
	}
}

// storeIDs maps each path of the store to its memory id.
func (e *mgEnv) storeIDs() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	p, err := e.remote.ListMemories(e.ctx(), e.storeID, store.ListMemoriesOptions{Limit: store.MaxListLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, it := range p.Data {
		if it.Memory != nil {
			out[it.Memory.Path] = it.Memory.ID
		}
	}
	return out
}

// A cycle of moves (a swap through a temporary name, longer cycles, whole
// folders, a file and a folder trading places) goes up in ONE pass and
// keeps every memory id; no temporary path is left in the store.
func TestCyclesOfMovesConvergeInOnePass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		moves [][2]string
		want  map[string]string // path -> the original path of the memory now there
	}{
		{"swap through a temporary name", map[string]string{"/a.md": "A\n", "/b.md": "B\n"},
			[][2]string{{"/a.md", "/t.md"}, {"/b.md", "/a.md"}, {"/t.md", "/b.md"}},
			map[string]string{"/a.md": "/b.md", "/b.md": "/a.md"}},
		{"cycle of three", map[string]string{"/x/1": "one\n", "/x/2": "two\n", "/x/3": "three\n"},
			[][2]string{{"/x/1", "/x/t"}, {"/x/3", "/x/1"}, {"/x/2", "/x/3"}, {"/x/t", "/x/2"}},
			map[string]string{"/x/1": "/x/3", "/x/2": "/x/1", "/x/3": "/x/2"}},
		{"folders swapped", map[string]string{"/p/n.md": "p\n", "/q/n.md": "q\n", "/q/only.md": "only q\n"},
			[][2]string{{"/p", "/tmp"}, {"/q", "/p"}, {"/tmp", "/q"}},
			map[string]string{"/p/n.md": "/q/n.md", "/p/only.md": "/q/only.md", "/q/n.md": "/p/n.md"}},
		{"a file and a folder trade places", map[string]string{"/f": "file\n", "/d/g": "in d\n"},
			[][2]string{{"/f", "/tmp"}, {"/d", "/f"}, {"/tmp", "/d"}},
			map[string]string{"/d": "/f", "/f/g": "/d/g"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newMgEnv(t, tc.files)
			for _, mv := range tc.moves {
				e.rename(mv[0], mv[1])
			}
			res := e.sync(true, false)
			if res.Failed != 0 || res.Left != 0 || res.Uploaded != len(tc.want) {
				t.Fatalf("one pass: %+v, want %d uploaded, nothing failed or left", res, len(tc.want))
			}
			got := e.storeIDs()
			want := map[string]string{}
			for p, from := range tc.want {
				want[p] = e.ids[from]
			}
			if !maps.Equal(got, want) {
				t.Fatalf("store after one pass (path -> memory id):\n got %v\nwant %v", got, want)
			}
			for p, from := range tc.want {
				if c := e.storeContents()[p]; c != tc.files[from] {
					t.Errorf("%s holds %q, want %q", p, c, tc.files[from])
				}
			}
			e.noPending()
			e.noConflicts()
			// The overlay saw the temporary moves go by: the mount still
			// shows the moved files, nothing at a temporary path.
			e.caughtUp()
			for p, from := range tc.want {
				if got, _ := e.read(p); got != tc.files[from] {
					t.Errorf("mount: %s holds %q, want %q", p, got, tc.files[from])
				}
			}
			if _, err := e.lookup("/" + strings.TrimPrefix(TempPathPrefix, "/")); err == nil {
				t.Error("a temporary path shows on the mount")
			}
		})
	}
}

// A create refused because the store is at its memory cap (422) waits,
// warned about once, and goes up by itself once another client makes room
// (the delete comes through the change feed: capwait.go).
func TestCreateAtTheCapIsRetried(t *testing.T) {
	t.Parallel()
	e := mgSetupWith(t, map[string]string{"/1.md": "1", "/2.md": "2"}, sqlstore.Options{MaxMemoriesPerStore: 2})
	e.start(nil)
	e.mustWrite("/new.md", "waits for room\n")
	for range 2 {
		if res := e.sync(true, false); res.Uploaded != 0 || res.Failed != 1 || res.Left != 1 {
			t.Fatalf("pass at the cap: %+v, want one failure and the change left", res)
		}
	}
	if n := len(e.warnings("memory cap")); n != 1 {
		t.Fatalf("%d warnings about the cap, want 1", n)
	}
	st := e.eng.Status()
	if len(st.Pending) != 1 || st.Pending[0].Path != "/new.md" || st.Pending[0].Reason != ReasonCap {
		t.Fatalf("status at the cap: %+v", st.Pending)
	}
	e.remoteDelete("/1.md")
	e.caughtUp()
	if res := e.sync(true, false); res.Uploaded != 1 || res.Left != 0 {
		t.Fatalf("pass once there is room: %+v", res)
	}
	if c := e.storeContents()["/new.md"]; c != "waits for room\n" {
		t.Fatalf("store after the retry: %q", c)
	}
}

// A file removed and another created in a store at its memory cap go up
// in one pass, as in the final sync at a clean end: the pass's delete
// makes the room its create needs, so the create is tried again after it
// instead of being left for a next pass that a final sync doesn't have.
func TestCreateAtTheCapAfterADeleteOfTheSamePass(t *testing.T) {
	t.Parallel()
	e := mgSetupWith(t, map[string]string{"/1.md": "1", "/2.md": "2"}, sqlstore.Options{MaxMemoriesPerStore: 2})
	e.start(nil)
	e.unlink("/1.md")
	e.mustWrite("/new.md", "takes its place\n")
	if res := e.sync(true, true); res.Uploaded != 1 || res.Deleted != 1 || res.Failed != 0 || res.Left != 0 {
		t.Fatalf("final-sync pass: %+v, want the delete and the create, nothing left", res)
	}
	want := map[string]string{"/2.md": "2", "/new.md": "takes its place\n"}
	if got := e.storeContents(); !maps.Equal(got, want) {
		t.Fatalf("store after the pass: %v, want %v", got, want)
	}
	e.noPending()
}

// One pass that mixes uploads the store refuses (at its cap) with uploads
// it accepts, many at once: under -race this is where the flusher's
// bookkeeping of refused files raced ("concurrent map writes").
func TestRefusedAndAcceptedUploadsInOnePass(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("/old/%02d.md", i)] = "v1\n"
	}
	e := mgSetupWith(t, files, sqlstore.Options{MaxMemoriesPerStore: len(files)})
	e.start(func(o *EngineOptions) { o.Concurrency = 8 })
	for i := range 12 {
		e.mustWrite(fmt.Sprintf("/old/%02d.md", i), "v2\n")
		e.mustWrite(fmt.Sprintf("/new/%02d.md", i), "refused at the cap\n")
	}
	res := e.sync(true, false)
	if res.Uploaded != 12 || res.Failed != 12 {
		t.Fatalf("mixed pass: %+v, want 12 uploaded and 12 refused", res)
	}
	for p, c := range e.storeContents() {
		if c != "v2\n" {
			t.Errorf("%s holds %q after the pass", p, c)
		}
	}
}

// mgHoldUpdates holds every update until release is closed (a store that
// stops answering writes).
func mgHoldUpdates(release chan struct{}) mgFault {
	return func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		if kind != "update" {
			return false
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return true
		}
		return false
	}
}

// While uploads hang on a slow store, remote changes keep arriving, and
// the store is reported unreachable within the stall bound — not after
// the requests time out.
func TestSlowStoreDoesNotStallRemoteChanges(t *testing.T) {
	t.Parallel()
	e := mgSetup(t, map[string]string{"/mine.md": "v1\n", "/theirs.md": "v1\n"})
	e.start(func(o *EngineOptions) { o.StallAfter = 300 * time.Millisecond })
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	e.proxy.setFault(mgHoldUpdates(release))
	e.mustWrite("/mine.md", "v2 waits on a slow store\n")
	passDone := make(chan SyncResult, 1)
	go func() { passDone <- e.eng.SyncNow(e.ctx(), true, false) }()
	eventually(t, "the upload to hang", func() bool { return len(e.proxy.requests("update")) > 0 })
	start := time.Now()
	e.remotePut("/theirs.md", "changed elsewhere while an upload hangs\n")
	if d := e.waitLocal("/theirs.md", "changed elsewhere while an upload hangs\n", true); d > 5*time.Second {
		t.Errorf("the remote change took %s while an upload hung", d)
	}
	eventually(t, "the stall to be reported", func() bool { return len(e.warnings("store unreachable")) > 0 })
	t.Logf("remote change applied and outage reported %s into a hanging upload", time.Since(start).Round(time.Millisecond))
	if !e.eng.Status().Unreachable {
		t.Error("status does not say the store is unreachable")
	}
	once.Do(func() { close(release) })
	if res := <-passDone; res.Uploaded != 1 {
		t.Fatalf("the pass once the store answered: %+v", res)
	}
	if c := e.storeContents()["/mine.md"]; c != "v2 waits on a slow store\n" {
		t.Fatalf("store: %q", c)
	}
}

// mgShortListing answers every listing with its first item only and no
// next page: a server (or a database error) that ends a listing early.
func mgShortListing(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
	if kind == "changes" {
		return mgFeedNotFound(p, w, r, kind, body)
	}
	if kind != "list" || !strings.Contains(r.URL.RawQuery, "view=basic") {
		return false
	}
	rec := p.forward(r, body)
	var page map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		return false
	}
	if data, ok := page["data"].([]any); ok && len(data) > 1 {
		page["data"] = data[:1]
	}
	page["next_page"] = nil
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(page)
	return true
}

// A listing that ends early never deletes a local file: a memory missing
// from it is looked up on its own, and stays. It runs in a synctest bubble
// (bubble_test.go): the intervals pass in virtual time.
func TestPartialListingDeletesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testPartialListingDeletesNothing)
}

func testPartialListingDeletesNothing(t *testing.T) {
	files := map[string]string{"/a.md": "a", "/b.md": "b", "/c/d.md": "d"}
	e := mgSetupBubble(t, mgWith(files), sqlstore.Options{})
	e.start(func(o *EngineOptions) { o.Interval = MinInterval })
	// The background content fetch lists too: the listings counted are
	// the interval's.
	e.waitContent()
	e.proxy.setFault(mgShortListing) // after the mount's own listing
	loaded := len(e.proxy.requests("list"))
	sleep(2 * MinInterval)
	if n := len(e.proxy.requests("list")) - loaded; n < 2 {
		t.Fatalf("%d listings in two intervals, want 2", n)
	}
	e.afterMerge()
	for p, c := range files {
		if got, ok := e.read(p); !ok || got != c {
			t.Errorf("%s after partial listings: %q, %v", p, got, ok)
		}
	}
}

// Status names every pending change with the reason it waits.
func TestStatusReasons(t *testing.T) {
	t.Parallel()
	e := mgSetup(t, map[string]string{"/blocker": "goes\n"})
	e.start(nil)
	e.mustWrite("/ok.md", "goes up\n")
	if err := e.write("/bin.dat", "\xff\xfe"); err == nil {
		t.Fatal("close of content that is not UTF-8 succeeded")
	}
	// This mount makes a folder where another client then puts a file:
	// the overlay keeps the store's file out, and the upload below the
	// folder finds its path taken.
	e.mustWrite("/dir/x.md", "below a folder the store has as a file\n")
	e.remotePut("/dir", "a file in the store\n")
	e.caughtUp()
	res := e.sync(true, false)
	if res.Uploaded != 1 {
		t.Fatalf("pass: %+v, want /ok.md uploaded", res)
	}
	e.unlink("/blocker")
	st := e.eng.Status()
	reasons := map[string]string{}
	for _, p := range st.Pending {
		reasons[p.Path] = p.Reason
	}
	want := map[string]string{"/bin.dat": ReasonNotUTF8, "/blocker": ReasonDeleteDelay, "/dir/x.md": ReasonPath}
	if !maps.Equal(reasons, want) {
		t.Fatalf("status reasons: %v, want %v", reasons, want)
	}
	if st.PendingUploads != 2 || st.PendingDeletes != 1 || st.LastPass == nil {
		t.Fatalf("status: %+v", st)
	}
	if !hasEntry(e.hook.AllEntries(), logrus.WarnLevel, "not valid UTF-8") {
		t.Error("no warning named the file that is not UTF-8")
	}
}

func hasEntry(entries []*logrus.Entry, level logrus.Level, substr string) bool {
	for _, en := range entries {
		if en.Level == level && strings.Contains(en.Message, substr) {
			return true
		}
	}
	return false
}

// mgHoldAnswers lets updates reach the server but holds their answers
// until release is closed: the store has applied a write whose response
// the engine has not seen yet, while the feed already shows it.
func mgHoldAnswers(release chan struct{}) mgFault {
	return func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		if kind != "update" {
			return false
		}
		rec := p.forward(r, body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mgCopy(w, rec)
		return true
	}
}

// An editor's atomic save (write a temporary file, rename it over the
// memory's file) goes up as one update of the memory. When the feed shows
// that update before its answer arrives, the memory must be bound to the
// new file, not to the file the rename replaced: a remote move of the
// memory afterwards moves the new file (it once created a second copy).
func TestAtomicSaveSeenBeforeItsAnswer(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, map[string]string{"/n.md": "v1\n"})
	e.mustWrite("/.n.md.tmp", "v2\n")
	e.rename("/.n.md.tmp", "/n.md")
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	e.proxy.setFault(mgHoldAnswers(release))
	done := make(chan SyncResult, 1)
	go func() { done <- e.eng.SyncNow(e.ctx(), true, false) }()
	eventually(t, "the update to reach the store", func() bool { return e.storeContents()["/n.md"] == "v2\n" })
	e.caughtUp() // the overlay has seen the update, whose answer is still held
	once.Do(func() { close(release) })
	if res := <-done; res.Failed != 0 || res.Left != 0 {
		t.Fatalf("the pass: %+v", res)
	}
	e.proxy.setFault(nil)
	if got := e.storeIDs()["/n.md"]; got != e.ids["/n.md"] {
		t.Fatalf("/n.md is memory %s, want %s (an atomic save keeps the id)", got, e.ids["/n.md"])
	}
	moved := "/moved.md"
	if _, err := e.remote.UpdateMemory(e.ctx(), e.storeID, e.ids["/n.md"], store.UpdateMemoryInput{Path: &moved}); err != nil {
		t.Fatal(err)
	}
	e.waitLocal(moved, "v2\n", true)
	e.waitLocal("/n.md", "", false)
	e.noPending()
	e.noConflicts()
}

// memfs status and metrics scrapes call Status from their own goroutines
// at any time, also while the mount closes and the journal is released:
// under -race this fails if Status reads the journal Close drops.
func TestStatusWhileClosing(t *testing.T) {
	e := mgSetup(t, map[string]string{"/a.md": "a"})
	eng := e.startOwned(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.write("/b.md", "b"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	calls := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				calls <- n
				return
			default:
			}
			eng.Status()
			n++
		}
	}()
	if len(eng.Status().Pending) == 0 {
		t.Fatal("the change to /b.md is not pending before the close")
	}
	eng.Finish(ctx, false)
	if err := eng.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	close(done)
	if n := <-calls; n == 0 {
		t.Fatal("Status never ran while the engine closed")
	}
	if st := eng.Status(); st.StoreID != e.storeID || len(st.Pending) != 0 {
		t.Errorf("status after close: store %q, %d pending; want %q and none (the journal is closed)", st.StoreID, len(st.Pending), e.storeID)
	}
}
