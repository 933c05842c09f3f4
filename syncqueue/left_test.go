package syncqueue

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store/sqlstore"
)

// TestLeftAtClose: Close notes what the end left in the journal, each
// upload with the reason status gives it, deletes apart; what the final
// sync uploaded is not in it. The store is at its cap and the end is a
// worker's stop (writes only), so a create, content that is not UTF-8 and
// a delete stay.
func TestLeftAtClose(t *testing.T) {
	t.Parallel()
	e := mgSetupWith(t, map[string]string{"/1.md": "1", "/2.md": "2"}, sqlstore.Options{MaxMemoriesPerStore: 2})
	eng := e.startOwned(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	e.mustWrite("/1.md", "changed: goes up\n")
	e.mustWrite("/new.md", "at the cap\n")
	if err := e.write("/bin.dat", "\xff\xfe"); err == nil {
		t.Fatal("close of content that is not UTF-8 succeeded")
	}
	e.unlink("/2.md")

	res := eng.Finish(ctx, false)
	if res.Uploaded != 1 {
		t.Fatalf("final sync: %+v, want /1.md uploaded", res)
	}
	if !eng.Left().Empty() {
		t.Fatalf("Left before Close: %+v, want nothing noted yet", eng.Left())
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l := eng.Left()
	want := map[string]int{ReasonCap: 1, ReasonNotUTF8: 1}
	if l.StoreID != e.storeID || l.Changes != 3 || l.Deletes != 1 || l.Unjournaled != 0 || !maps.Equal(l.Reasons, want) || l.Empty() {
		t.Fatalf("Left = %+v, want 3 changes of %s (%v, 1 delete)", l, e.storeID, want)
	}
	for _, s := range []string{"3 changes", "1 " + ReasonCap, "1 " + ReasonNotUTF8, "1 delete not sent"} {
		if !strings.Contains(l.String(), s) {
			t.Errorf("Left.String() = %q, does not say %q", l, s)
		}
	}
	if got := e.storeContents()["/1.md"]; got != "changed: goes up\n" {
		t.Errorf("/1.md in the store: %q", got)
	}
	if err := eng.Close(ctx); err != nil || eng.Left().Changes != 3 {
		t.Errorf("a second Close: %v, Left %+v (want it unchanged)", err, eng.Left())
	}
}

// A Left with nothing in it says so.
func TestLeftString(t *testing.T) {
	if s := (Left{StoreID: "memstore_x"}).String(); s != "nothing" {
		t.Errorf("empty Left says %q", s)
	}
	l := Left{Changes: 1, Reasons: map[string]int{ReasonUnreachable: 1}, Unjournaled: 2,
		UnjournaledReasons: map[string]int{ReasonNoSpace: 1, ReasonJournalIO + " (EIO)": 1}}
	if s := l.String(); s != "1 change (1 store unreachable); 2 files never journaled (1 I/O error on the journal (EIO), 1 no space for the journal)" {
		t.Errorf("Left says %q", s)
	}
}
