package sqlstore

import (
	"context"
	"errors"
	"testing"

	"github.com/memfs/memfs/store"
)

// TestListMemoriesProbeErrorSurfaces fails the query that asks whether a
// full page has a next one. That error must reach the caller: answering
// the page as the last one would tell a client (the sync engine) that the
// store ends there, and it would drop from the mount what it did not see.
func TestListMemoriesProbeErrorSurfaces(t *testing.T) {
	db, fd := openFaulty(t)
	ctx := context.Background()
	st, err := db.CreateStore(ctx, store.CreateStoreInput{Name: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/x", "/b/x", "/c/x"} {
		if _, err := db.CreateMemory(ctx, st.ID, store.CreateMemoryInput{Path: p, Content: p, Actor: store.APIActor("key")}); err != nil {
			t.Fatal(err)
		}
	}
	// With depth 1 and limit 2, the page fills with the roll-ups /a/ and
	// /b/ at the end of a batch, so only the probe can find /c/.
	opts := store.ListMemoriesOptions{Depth: 1, Limit: 2}
	page, err := db.ListMemories(ctx, st.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[0].Prefix != "/a/" || page.Data[1].Prefix != "/b/" || page.NextPage == "" {
		t.Fatalf("unfaulted listing: %+v, want /a/ and /b/ with a next page", page)
	}

	boom := errors.New("injected: connection reset by peer")
	fd.failOn("SELECT 1 FROM memories", boom)
	page, err = db.ListMemories(ctx, st.ID, opts)
	if fd.injected() == 0 {
		t.Fatal("the listing never ran the continuation probe: this test no longer covers it")
	}
	if err == nil {
		t.Fatalf("the continuation probe failed, yet ListMemories answered %d items, next_page %q and no error: a short last page", len(page.Data), page.NextPage)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("ListMemories: %v, want the probe's error wrapped", err)
	}
	if len(page.Data) != 0 || page.NextPage != "" {
		t.Errorf("with its error, ListMemories also answered a partial page %+v", page)
	}
}
