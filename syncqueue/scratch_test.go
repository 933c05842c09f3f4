package syncqueue

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
)

// pendingAt is the pending change at path p in status, or false.
func pendingAt(st Status, p string) (PendingChange, bool) {
	for _, c := range st.Pending {
		if c.Path == p {
			return c, true
		}
	}
	return PendingChange{}, false
}

// TestScratchHeldThenUploaded: the write tool's atomic save, with a pass
// between the temporary file's close and its rename (the race the hold is
// for): the pass uploads nothing and status lists the temporary file as a
// pending create held until its grace ends; after the rename over the
// target one pass makes one update of the target's memory (its id kept),
// and no memory ever had the temporary name. A new file saved the same way
// is one create at its own name. A file left at a scratch name (a tool
// killed between close and rename, or a user's own file of that name) is
// uploaded by the first pass after its grace, and one written just before
// the end by the final sync: the end leaves nothing. It runs in a synctest
// bubble (bubble_test.go), where the grace passes by time.Sleep.
func TestScratchHeldThenUploaded(t *testing.T) {
	synctest.Test(t, testScratchHeldThenUploaded)
}

func testScratchHeldThenUploaded(t *testing.T) {
	e := mgSetupBubble(t, map[string]string{"/notes/a.md": "v1\n"}, sqlstore.Options{})
	eng := e.startOwned(nil)
	target := e.ids["/notes/a.md"]

	tmp := "/notes/.agenttoolset-1234567890"
	e.mustWrite(tmp, "v2\n")
	seen := time.Now() // the pass that first sees the temporary file starts its grace
	if res := e.sync(true, true); res.Uploaded+res.Deleted != 0 || res.Left != 1 {
		t.Fatalf("a pass between the close and the rename = %+v, want nothing uploaded and the temporary file left", res)
	}
	st := eng.Status()
	c, ok := pendingAt(st, tmp)
	if !ok || c.Op != "create" || c.Reason != ReasonScratch || !c.Until.Equal(seen.Add(ScratchGrace)) || st.PendingUploads != 1 {
		t.Errorf("status of the temporary file: %+v (%d uploads pending); want a create held until %v", st.Pending, st.PendingUploads, seen.Add(ScratchGrace))
	}
	e.rename(tmp, "/notes/a.md")
	if res := e.sync(true, true); res.Uploaded != 1 || res.Deleted != 0 || res.Left != 0 {
		t.Fatalf("the pass after the rename = %+v, want one upload", res)
	}
	if got := e.memory("/notes/a.md"); got == nil || got.ID != target {
		t.Fatalf("the memory at the target after the save is %+v, want %s (its id kept)", got, target)
	}
	if ops := e.ops(target); !slices.Equal(ops, []string{"created", "modified"}) {
		t.Errorf("the target's versions: %v, want created, modified", ops)
	}

	// A new file through the same save.
	tmp2 := "/notes/.agenttoolset-222"
	e.mustWrite(tmp2, "fresh\n")
	e.sync(true, true)
	e.rename(tmp2, "/notes/new.md")
	if res := e.sync(true, true); res.Uploaded != 1 {
		t.Fatalf("the pass after saving a new file = %+v, want one upload", res)
	}
	for v, err := range e.remote.Versions(e.ctx(), e.storeID, store.ListVersionsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Path != nil && strings.Contains(*v.Path, ScratchPrefix) {
			t.Errorf("version %s (%s) of memory %s has the temporary name %s", v.ID, v.Operation, v.MemoryID, *v.Path)
		}
	}

	// One left at its name: held for its grace, then uploaded.
	stray := "/notes/.agenttoolset-333"
	e.mustWrite(stray, "stray\n")
	if res := e.sync(true, true); res.Uploaded != 0 || res.Left != 1 {
		t.Fatalf("the first pass to see a stray = %+v, want it held and left", res)
	}
	time.Sleep(ScratchGrace - time.Millisecond)
	if res := e.sync(true, true); res.Uploaded != 0 || res.Left != 1 {
		t.Fatalf("a pass within the grace = %+v, want it held", res)
	}
	time.Sleep(time.Millisecond)
	if c, _ := pendingAt(eng.Status(), stray); c.Reason != ReasonWaiting {
		t.Errorf("status of the stray once its grace is over: %+v, want it waiting for the next pass", c)
	}
	if res := e.sync(true, true); res.Uploaded != 1 || res.Left != 0 {
		t.Fatalf("the pass after the grace = %+v, want the stray uploaded", res)
	}

	// One written just before the end: the final sync uploads it.
	e.mustWrite("/.agenttoolset-mine", "a user's file of that name\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng.Finish(ctx, true)
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l := eng.Left(); !l.Empty() {
		t.Errorf("the end left %s, want nothing", l)
	}
	want := map[string]string{"/notes/a.md": "v2\n", "/notes/new.md": "fresh\n", stray: "stray\n", "/.agenttoolset-mine": "a user's file of that name\n"}
	if got := e.storeContents(); !maps.Equal(got, want) {
		t.Errorf("the store holds %v, want %v", got, want)
	}
}

// A file at a scratch name that the final sync can't upload is left, with
// the reason it waits: the end never reports it stored.
func TestScratchLeftWhenTheEndCantUploadIt(t *testing.T) {
	e := mgSetup(t, nil)
	eng := e.startOwned(nil)
	e.mustWrite("/.agenttoolset-999", "kept\n")
	e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		if kind != "create" {
			return false
		}
		mgWriteError(w, http.StatusServiceUnavailable, "overloaded_error", "down")
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng.Finish(ctx, true)
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l := eng.Left(); l.Changes != 1 || l.Reasons[ReasonUnreachable] != 1 {
		t.Errorf("the end left %s, want the scratch-named file, the store unreachable", l)
	}
}
