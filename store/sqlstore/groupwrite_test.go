package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// These tests run groups of updates and deletes through db.changes.run
// itself, so the group is exactly the one written down, whatever the
// scheduler does; TestChangesQueueInGroups checks that UpdateMemory and
// DeleteMemory reach that runner through the queue.

var groupActor = store.APIActor("apikey_grouptest")

// eachBackend runs fn on a fresh SQLite database and, when
// MEMFS_TEST_POSTGRES_URL is set, a fresh PostgreSQL one.
func eachBackend(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Run("SQLite", func(t *testing.T) {
		fn(t, openForTest(t, filepath.Join(t.TempDir(), "memfs.db")))
	})
	t.Run("Postgres", func(t *testing.T) {
		fn(t, openForTest(t, sqltest.Postgres(t)))
	})
}

func openForTest(t *testing.T, dsn string) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// groupOutcome is one member's answer.
type groupOutcome struct {
	m   *store.Memory
	err error
}

// runGroup runs writes as one group of db.changes and returns each
// member's answer.
func runGroup(t *testing.T, db *DB, storeID string, writes ...groupWrite) []groupOutcome {
	t.Helper()
	reqs := make([]*groupReq[*store.Memory], len(writes))
	for i, w := range writes {
		reqs[i] = &groupReq[*store.Memory]{ctx: t.Context(), arg: w}
	}
	db.changes.run(t.Context(), storeID, reqs)
	out := make([]groupOutcome, len(reqs))
	for i, r := range reqs {
		out[i] = groupOutcome{r.res, r.err}
	}
	return out
}

func update(storeID, memoryID string, in store.UpdateMemoryInput) *updateArg {
	in.Actor = groupActor
	return &updateArg{storeID: storeID, memoryID: memoryID, in: in}
}

func remove(storeID, memoryID string, in store.DeleteMemoryInput) *deleteArg {
	in.Actor = groupActor
	return &deleteArg{storeID: storeID, memoryID: memoryID, in: in}
}

func sp(s string) *string { return &s }

// groupFixture is a store holding one memory per path, content = path.
func groupFixture(t *testing.T, db *DB, paths ...string) (string, map[string]*store.Memory) {
	t.Helper()
	s, err := db.CreateStore(t.Context(), store.CreateStoreInput{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ms := map[string]*store.Memory{}
	for _, p := range paths {
		m, err := db.CreateMemory(t.Context(), s.ID, store.CreateMemoryInput{Path: p, Content: p, Actor: groupActor})
		if err != nil {
			t.Fatal(err)
		}
		ms[p] = m
	}
	return s.ID, ms
}

func feedHead(t *testing.T, db *DB, storeID string) int64 {
	t.Helper()
	p, err := db.Changes(t.Context(), storeID, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p.NextCursor
}

// sameMemory fails unless got is want, field by field.
func sameMemory(t *testing.T, what string, got, want *store.Memory) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
	g, w := *got, *want
	if g.Content == nil || w.Content == nil || *g.Content != *w.Content {
		t.Fatalf("%s: content %v, want %v", what, g.Content, w.Content)
	}
	g.Content, w.Content = nil, nil
	if !g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) {
		t.Fatalf("%s: times %v/%v, want %v/%v", what, g.CreatedAt, g.UpdatedAt, w.CreatedAt, w.UpdatedAt)
	}
	g.CreatedAt, g.UpdatedAt = w.CreatedAt, w.UpdatedAt
	if g != w {
		t.Fatalf("%s: %+v, want %+v", what, g, w)
	}
}

func (db *DB) mustGet(t *testing.T, storeID, memoryID string) *store.Memory {
	t.Helper()
	m, err := db.GetMemory(t.Context(), storeID, memoryID)
	if err != nil {
		t.Fatalf("GetMemory %s: %v", memoryID, err)
	}
	return m
}

// TestGroupWritesEachOwnOutcome: one group of updates, renames and deletes
// behaves as its writes one after another with one commit. A refused write
// (precondition, path conflict, not found) refuses only itself and writes
// nothing; later writes see the earlier ones (a rename into a path a
// delete freed, a precondition on content an earlier update wrote); each
// answer is the memory as that write left it, even when a later write of
// the group changes the same memory again.
func TestGroupWritesEachOwnOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		s, ms := groupFixture(t, db, "/a", "/b", "/c", "/d")
		a, b, c, d := ms["/a"], ms["/b"], ms["/c"], ms["/d"]
		h0 := feedHead(t, db, s)
		out := runGroup(t, db, s,
			update(s, a.ID, store.UpdateMemoryInput{Content: sp("lost"), ExpectedSHA256: sp(store.SHA256Hex("wrong"))}), // 0 refused
			remove(s, b.ID, store.DeleteMemoryInput{}),                                                           // 1 frees /b
			update(s, c.ID, store.UpdateMemoryInput{Path: sp("/b")}),                                             // 2 takes /b
			update(s, d.ID, store.UpdateMemoryInput{Path: sp("/b")}),                                             // 3 refused: taken by 2
			update(s, a.ID, store.UpdateMemoryInput{Content: sp("x"), ExpectedSHA256: sp(a.ContentSHA256)}),      // 4
			update(s, a.ID, store.UpdateMemoryInput{Content: sp("y"), ExpectedSHA256: sp(store.SHA256Hex("x"))}), // 5 sees 4
			update(s, a.ID, store.UpdateMemoryInput{Content: sp("y")}),                                           // 6 changes nothing
			remove(s, b.ID, store.DeleteMemoryInput{}),                                                           // 7 refused: gone by 1
			remove(s, d.ID, store.DeleteMemoryInput{ExpectedSHA256: sp(store.SHA256Hex("wrong"))}),               // 8 refused
		)
		wantKind := map[int]error{0: store.ErrPreconditionFailed, 3: store.ErrPathConflict, 7: store.ErrNotFound, 8: store.ErrPreconditionFailed}
		for i, o := range out {
			if k := wantKind[i]; k != nil {
				if !errors.Is(o.err, k) {
					t.Fatalf("member %d: %v, want %v", i, o.err, k)
				}
				continue
			}
			if o.err != nil {
				t.Fatalf("member %d: %v", i, o.err)
			}
		}
		var pe *store.Error
		if !errors.As(out[0].err, &pe) || pe.Code != "memory_precondition_failed" {
			t.Fatalf("member 0: %v, want code memory_precondition_failed", out[0].err)
		}

		// Each answer is its own write's result.
		if got := out[2].m; got.Path != "/b" || *got.Content != "/c" {
			t.Fatalf("rename's answer %+v, want /c's content at /b", got)
		}
		sameMemory(t, "rename's answer", out[2].m, db.mustGet(t, s, c.ID))
		x, y := out[4].m, out[5].m
		if *x.Content != "x" || x.ContentSHA256 != store.SHA256Hex("x") || x.ContentSizeBytes != 1 || x.MemoryVersionID == y.MemoryVersionID {
			t.Fatalf("first update's answer %+v (content %q), want its own write (x)", x, *x.Content)
		}
		v, err := db.GetVersion(ctx, s, x.MemoryVersionID)
		if err != nil || *v.Content != "x" || *v.Path != "/a" || v.Operation != store.OpModified || !v.CreatedAt.Equal(x.UpdatedAt) {
			t.Fatalf("first update's version %+v, %v; want x at /a, at its updated_at", v, err)
		}
		if !x.CreatedAt.Equal(a.CreatedAt) {
			t.Fatalf("first update's created_at %v, want the create's %v", x.CreatedAt, a.CreatedAt)
		}
		final := db.mustGet(t, s, a.ID)
		sameMemory(t, "second update's answer", y, final)
		sameMemory(t, "no-op update's answer", out[6].m, final)
		sameMemory(t, "refused rename's memory", db.mustGet(t, s, d.ID), d)
		if _, err := db.GetMemory(ctx, s, b.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted memory: %v, want not found", err)
		}

		// Only the writes that were not refused are in the feed, in group
		// order, numbered on from the head.
		p, err := db.Changes(ctx, s, h0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, ch := range p.Data {
			if ch.Seq != h0+int64(i)+1 {
				t.Fatalf("feed seqs %+v not gap-free from %d", p.Data, h0)
			}
			got = append(got, fmt.Sprintf("%s %s %s<-%s", ch.Operation, ch.MemoryID, ch.Path, ch.PreviousPath))
		}
		want := []string{
			fmt.Sprintf("%s %s /b<-", store.OpDeleted, b.ID),
			fmt.Sprintf("%s %s /b<-/c", store.OpModified, c.ID),
			fmt.Sprintf("%s %s /a<-", store.OpModified, a.ID),
			fmt.Sprintf("%s %s /a<-", store.OpModified, a.ID),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("feed after the group:\n%v\nwant\n%v", got, want)
		}
		vs, err := db.ListVersions(ctx, s, store.ListVersionsOptions{MemoryID: a.ID})
		if err != nil || len(vs.Data) != 3 {
			t.Fatalf("versions of /a: %d, %v; want 3 (created, x, y)", len(vs.Data), err)
		}
		st, err := db.GetStore(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if items, err := db.ListMemories(ctx, s, store.ListMemoriesOptions{}); err != nil || len(items.Data) != 3 {
			t.Fatalf("store %s lists %d memories (%v), want 3", st.ID, len(items.Data), err)
		}
	})
}

// TestGroupWritesArchivedStore: in an archived store an update is refused
// and a delete still runs (as outside a group); neither fails the other.
func TestGroupWritesArchivedStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *DB) {
		s, ms := groupFixture(t, db, "/a", "/b")
		if _, err := db.ArchiveStore(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		out := runGroup(t, db, s,
			update(s, ms["/a"].ID, store.UpdateMemoryInput{Content: sp("x")}),
			remove(s, ms["/b"].ID, store.DeleteMemoryInput{}),
		)
		if !errors.Is(out[0].err, store.ErrForbidden) || out[1].err != nil {
			t.Fatalf("update %v, delete %v; want forbidden, success", out[0].err, out[1].err)
		}
		sameMemory(t, "refused update's memory", db.mustGet(t, s, ms["/a"].ID), ms["/a"])
	})
}

// TestGroupWritesDatabaseError: a statement failing in the middle of a
// group fails every member, the writes before it too, and leaves nothing
// of the group written.
func TestGroupWritesDatabaseError(t *testing.T) {
	db, fd := openFaulty(t)
	s, ms := groupFixture(t, db, "/a", "/b", "/c")
	h0 := feedHead(t, db, s)
	boom := errors.New("injected: connection lost")
	fd.failOn("DELETE FROM memories WHERE id", boom)
	out := runGroup(t, db, s,
		update(s, ms["/a"].ID, store.UpdateMemoryInput{Content: sp("x")}),
		update(s, ms["/b"].ID, store.UpdateMemoryInput{Path: sp("/x")}),
		remove(s, ms["/c"].ID, store.DeleteMemoryInput{}),
		update(s, ms["/a"].ID, store.UpdateMemoryInput{ExpectedSHA256: sp(store.SHA256Hex("wrong"))}),
	)
	if fd.injected() == 0 {
		t.Fatal("no statement failed on cue: this test no longer covers a failing group")
	}
	fd.failOn("", nil)
	for i, o := range out {
		if !errors.Is(o.err, boom) || o.m != nil {
			t.Fatalf("member %d: %+v, %v; want the injected error", i, o.m, o.err)
		}
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		sameMemory(t, p+" after the failed group", db.mustGet(t, s, ms[p].ID), ms[p])
	}
	if h := feedHead(t, db, s); h != h0 {
		t.Fatalf("feed head %d after the failed group, want %d", h, h0)
	}
}

// TestChangesQueueInGroups: updates, renames and deletes arriving while a
// group of them is in flight run together as the next group, each with
// its own answer.
func TestChangesQueueInGroups(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *DB) {
		s, ms := groupFixture(t, db, "/a", "/b", "/c", "/d")
		release := make(chan struct{})
		var mu sync.Mutex
		var sizes []int
		run := db.changes.run
		db.changes.run = func(ctx context.Context, key string, reqs []*groupReq[*store.Memory]) {
			mu.Lock()
			sizes = append(sizes, len(reqs))
			mu.Unlock()
			<-release
			run(ctx, key, reqs)
		}
		started := func(n int) func() bool {
			return func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == n }
		}
		errs := make(chan error, 4)
		go func() {
			_, err := db.UpdateMemory(t.Context(), s, ms["/a"].ID, store.UpdateMemoryInput{Content: sp("x"), Actor: groupActor})
			errs <- err
		}()
		waitFor(t, "the first group to start", started(1))
		go func() {
			errs <- db.DeleteMemory(t.Context(), s, ms["/b"].ID, store.DeleteMemoryInput{Actor: groupActor})
		}()
		waitFor(t, "the delete to queue", func() bool { return queuedChanges(db, s) == 1 })
		go func() {
			_, err := db.UpdateMemory(t.Context(), s, ms["/c"].ID, store.UpdateMemoryInput{Path: sp("/b"), Actor: groupActor})
			errs <- err
		}()
		waitFor(t, "the rename to queue", func() bool { return queuedChanges(db, s) == 2 })
		go func() {
			_, err := db.UpdateMemory(t.Context(), s, ms["/d"].ID, store.UpdateMemoryInput{Path: sp("/b"), Actor: groupActor})
			errs <- err
		}()
		waitFor(t, "the second rename to queue", func() bool { return queuedChanges(db, s) == 3 })
		close(release)
		var conflicts int
		for range 4 {
			switch err := <-errs; {
			case errors.Is(err, store.ErrPathConflict):
				conflicts++
			case err != nil:
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(sizes) != "[1 3]" || conflicts != 1 {
			t.Fatalf("groups of %v with %d conflicts, want [1 3] with 1 (the second rename to /b)", sizes, conflicts)
		}
		if m := db.mustGet(t, s, ms["/c"].ID); m.Path != "/b" {
			t.Fatalf("/c is at %s, want /b", m.Path)
		}
	})
}

func queuedChanges(db *DB, storeID string) int {
	db.changes.mu.Lock()
	defer db.changes.mu.Unlock()
	if q := db.changes.m[storeID]; q != nil {
		return len(q.pending)
	}
	return 0
}
