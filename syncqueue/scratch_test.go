package syncqueue

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// TestScratchNeverUploaded: the write tool's atomic save, with a pass
// between the temporary file's close and its rename (the race the rule is
// for): the pass uploads nothing and status lists nothing pending; after
// the rename over the target one pass makes one update of the target's
// memory (its id kept), and no memory ever had the temporary name. A new
// file saved the same way is one create at its own name. A scratch file
// left at its temporary name is never uploaded and is not left in the
// journal at the end (Left is empty).
func TestScratchNeverUploaded(t *testing.T) {
	e := mgSetup(t, map[string]string{"/notes/a.md": "v1\n"})
	eng := e.startOwned(nil)
	target := e.ids["/notes/a.md"]

	tmp := "/notes/.agenttoolset-1234567890"
	e.mustWrite(tmp, "v2\n")
	if res := e.sync(true, true); res.Uploaded+res.Deleted != 0 || res.Left != 0 {
		t.Fatalf("a pass between the close and the rename = %+v, want nothing uploaded and nothing left", res)
	}
	if st := eng.Status(); len(st.Pending) != 0 || st.PendingUploads != 0 {
		t.Errorf("status lists the temporary file as pending: %+v", st.Pending)
	}
	e.rename(tmp, "/notes/a.md")
	if res := e.sync(true, true); res.Uploaded != 1 || res.Deleted != 0 || res.Left != 0 {
		t.Fatalf("the pass after the rename = %+v, want one upload", res)
	}
	if got := e.memory("/notes/a.md"); got == nil || got.ID != target {
		t.Fatalf("the memory at the target after the save is %+v, want %s (its id kept)", got, target)
	}
	if got := e.storeContents()["/notes/a.md"]; got != "v2\n" {
		t.Errorf("the target holds %q after the save, want v2", got)
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

	// One left behind (a tool killed between close and rename).
	e.mustWrite("/notes/.agenttoolset-333", "stray\n")
	e.sync(true, true)
	want := map[string]string{"/notes/a.md": "v2\n", "/notes/new.md": "fresh\n"}
	if got := e.storeContents(); !maps.Equal(got, want) {
		t.Errorf("the store holds %v, want %v", got, want)
	}
	for v, err := range e.remote.Versions(e.ctx(), e.storeID, store.ListVersionsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Path != nil && strings.Contains(*v.Path, ScratchPrefix) {
			t.Errorf("version %s (%s) of memory %s has the temporary name %s", v.ID, v.Operation, v.MemoryID, *v.Path)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng.Finish(ctx, true)
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l := eng.Left(); !l.Empty() {
		t.Errorf("the end left %s, want nothing: a scratch file is never uploaded", l)
	}
}
