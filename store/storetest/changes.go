package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

var changeTests = []test{
	{"Head", testChangesHead},
	{"Sequence", testChangesSequence},
	{"HasMore", testChangesHasMore},
	{"NoOp", testChangesNoOp},
	{"Subscribe", testSubscribe},
	{"SubscribeAfterCommit", testSubscribeAfterCommit},
	{"Prune", testPrune},
}

// The tests never assume what a fresh store's head is (0 or more): they
// take it with Changes(after=0) and count from there.

func testChangesHead(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	p, err := b.Changes(ctx, s.ID, 0, 0)
	ok(t, err, "Changes on an empty store")
	if p.Data == nil || len(p.Data) != 0 || p.NextCursor < 0 || p.HasMore {
		t.Fatalf("empty store feed = %+v, want data [] (not nil), a cursor, no more", p)
	}
	h0 := p.NextCursor
	// A client that takes the head of an empty store and follows the feed
	// from it must see the first write (so the head can't be 0, which
	// means "tell me the head").
	m := create(t, b, s.ID, "/first", "")
	p, err = b.Changes(ctx, s.ID, h0, 10)
	ok(t, err, "Changes(after=head of the empty store)")
	if len(p.Data) != 1 || p.Data[0].MemoryID != m.ID || p.Data[0].Seq != h0+1 || p.NextCursor != h0+1 {
		t.Fatalf("following a fresh store from its head %d after one write = %+v, want that write as seq %d", h0, p, h0+1)
	}
	for i := range 2 {
		create(t, b, s.ID, fmt.Sprintf("/%d", i), "")
	}
	p, err = b.Changes(ctx, s.ID, 0, 10)
	ok(t, err, "Changes(after=0)")
	if p.Data == nil || len(p.Data) != 0 || p.NextCursor != h0+3 || p.HasMore {
		t.Fatalf("Changes(after=0) after 3 writes = %+v, want no data and cursor %d", p, h0+3)
	}
	p, err = b.Changes(ctx, s.ID, h0+3, 10)
	ok(t, err, "Changes(after=head)")
	if p.Data == nil || len(p.Data) != 0 || p.NextCursor != h0+3 || p.HasMore {
		t.Fatalf("Changes(after=head) = %+v, want data [] and cursor %d", p, h0+3)
	}
	// Each store has its own sequence.
	other := newStore(t, b, "other")
	if h := head(t, b, other.ID); h != h0 {
		t.Fatalf("second fresh store's head %d, want %d like the first", h, h0)
	}
	_, err = b.Changes(ctx, "memstore_doesnotexist", 0, 0)
	wantErr(t, err, store.ErrNotFound, "Changes unknown store")
}

func testChangesSequence(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	cursor := head(t, b, s.ID)

	a := createBy(t, b, s.ID, "/a", "a1", apiActor)
	bm := createBy(t, b, s.ID, "/b", "b1", sessionActor)
	a2 := update(t, b, s.ID, a.ID, store.UpdateMemoryInput{Content: ptr("a2"), Actor: sessionActor})
	b2 := update(t, b, s.ID, bm.ID, store.UpdateMemoryInput{Path: ptr("/c"), Actor: apiActor})
	ok(t, b.DeleteMemory(ctx, s.ID, a.ID, store.DeleteMemoryInput{Actor: otherAPI}), "DeleteMemory")
	b3 := update(t, b, s.ID, bm.ID, store.UpdateMemoryInput{Path: ptr("/d/e"), Content: ptr(""), Actor: otherSession})
	del := allVersions(t, b, s.ID, store.ListVersionsOptions{MemoryID: a.ID, Operation: store.OpDeleted})
	if len(del) != 1 {
		t.Fatalf("%d deleted versions, want 1", len(del))
	}

	type wantChange struct {
		op, memoryID, path, prev, version string
		content                           *string // nil on delete
		by                                store.Actor
	}
	want := []wantChange{
		{store.OpCreated, a.ID, "/a", "", a.MemoryVersionID, ptr("a1"), apiActor},
		{store.OpCreated, bm.ID, "/b", "", bm.MemoryVersionID, ptr("b1"), sessionActor},
		{store.OpModified, a.ID, "/a", "", a2.MemoryVersionID, ptr("a2"), sessionActor},
		{store.OpModified, bm.ID, "/c", "/b", b2.MemoryVersionID, ptr("b1"), apiActor},
		{store.OpDeleted, a.ID, "/a", "", del[0].ID, nil, otherAPI},
		{store.OpModified, bm.ID, "/d/e", "/c", b3.MemoryVersionID, ptr(""), otherSession},
	}
	got := changesAfter(t, b, s.ID, cursor)
	if len(got) != len(want) {
		t.Fatalf("%d changes after cursor %d, want %d: %+v", len(got), cursor, len(want), got)
	}
	for i, c := range got {
		w := want[i]
		what := fmt.Sprintf("change %d (%+v)", i, c)
		if c.Seq != cursor+int64(i)+1 {
			t.Fatalf("%s: seq %d, want %d", what, c.Seq, cursor+int64(i)+1)
		}
		if c.Operation != w.op || c.MemoryID != w.memoryID || c.Path != w.path || c.PreviousPath != w.prev || c.MemoryVersionID != w.version {
			t.Fatalf("%s: want op %s memory %s path %s previous %q version %s", what, w.op, w.memoryID, w.path, w.prev, w.version)
		}
		if w.content == nil {
			if c.ContentSHA256 != nil || c.ContentSizeBytes != nil {
				t.Fatalf("%s: a deletion carries sha/size", what)
			}
		} else if c.ContentSHA256 == nil || *c.ContentSHA256 != store.SHA256Hex(*w.content) || c.ContentSizeBytes == nil || *c.ContentSizeBytes != int64(len(*w.content)) {
			t.Fatalf("%s: sha/size, want those of %q", what, *w.content)
		}
		if c.CreatedBy == nil || *c.CreatedBy != w.by {
			t.Fatalf("%s: created_by %+v, want %+v", what, c.CreatedBy, w.by)
		}
	}
	// Following from the middle returns the rest.
	rest := changesAfter(t, b, s.ID, cursor+3)
	if len(rest) != 3 || rest[0].Seq != cursor+4 {
		t.Fatalf("Changes(after=%d) = %+v, want seqs %d..%d", cursor+3, rest, cursor+4, cursor+6)
	}
	p, err := b.Changes(ctx, s.ID, cursor+6, 10)
	ok(t, err, "Changes(after=head)")
	if len(p.Data) != 0 || p.NextCursor != cursor+6 || p.HasMore {
		t.Fatalf("Changes(after=head) = %+v", p)
	}
}

func testChangesHasMore(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	h := head(t, b, s.ID)
	for i := range 5 {
		create(t, b, s.ID, fmt.Sprintf("/%d", i), "")
	}
	seqs := func(p store.ChangePage) []int64 {
		out := []int64{}
		for _, c := range p.Data {
			out = append(out, c.Seq-h)
		}
		return out
	}
	// Seqs and cursors relative to the fresh store's head h.
	tests := []struct {
		after   int64
		limit   int
		want    []int64
		cursor  int64
		hasMore bool
	}{
		{0, 2, []int64{1, 2}, 2, true},
		{2, 2, []int64{3, 4}, 4, true},
		{4, 2, []int64{5}, 5, false},
		{0, 5, []int64{1, 2, 3, 4, 5}, 5, false},
		{0, 4, []int64{1, 2, 3, 4}, 4, true},
		{1, 1, []int64{2}, 2, true},
		{5, 2, []int64{}, 5, false},
	}
	for _, tc := range tests {
		if h+tc.after == 0 {
			continue // after=0 means "the head"; covered by testChangesHead
		}
		p, err := b.Changes(ctx, s.ID, h+tc.after, tc.limit)
		ok(t, err, "Changes")
		if fmt.Sprint(seqs(p)) != fmt.Sprint(tc.want) || p.NextCursor-h != tc.cursor || p.HasMore != tc.hasMore {
			t.Fatalf("Changes(after=h+%d, limit=%d) = seqs h+%v cursor h+%d has_more %v; want h+%v h+%d %v (h=%d)",
				tc.after, tc.limit, seqs(p), p.NextCursor-h, p.HasMore, tc.want, tc.cursor, tc.hasMore, h)
		}
	}
}

func testChangesNoOp(t *testing.T, open Opener) {
	b := open(t, 2)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/n", "same")
	o := create(t, b, s.ID, "/o", "other")
	h := head(t, b, s.ID)

	update(t, b, s.ID, m.ID, store.UpdateMemoryInput{})
	update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("same"), Path: ptr("/n")})
	// Refused writes add nothing either.
	_, err := b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("x"), ExpectedSHA256: ptr(o.ContentSHA256), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "stale precondition")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Path: ptr("/o"), Actor: apiActor})
	wantErr(t, err, store.ErrPathConflict, "rename onto /o")
	_, err = b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/n", Content: "", Actor: apiActor})
	wantErr(t, err, store.ErrPathConflict, "create on /n")
	_, err = b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/p", Content: "", Actor: apiActor})
	wantErr(t, err, store.ErrLimit, "create at the cap")
	err = b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{ExpectedSHA256: ptr(o.ContentSHA256), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "delete with stale precondition")

	if h2 := head(t, b, s.ID); h2 != h {
		t.Fatalf("head moved from %d to %d without a change", h, h2)
	}
	if cs := changesAfter(t, b, s.ID, h); len(cs) != 0 {
		t.Fatalf("changes after no-ops: %+v", cs)
	}
}

func testSubscribe(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	other := newStore(t, b, "other")

	ch, release := b.Subscribe(s.ID)
	defer release()
	if isClosed(ch) {
		t.Fatal("subscription closed before any write")
	}
	create(t, b, other.ID, "/x", "elsewhere")
	if isClosed(ch) {
		t.Fatal("a write to another store closed the subscription")
	}
	m := create(t, b, s.ID, "/a", "1")
	waitClosed(t, ch, "create")

	// Each kind of mutation wakes a fresh subscription; several
	// subscribers all wake.
	ch1, rel1 := b.Subscribe(s.ID)
	ch2, rel2 := b.Subscribe(s.ID)
	defer rel1()
	defer rel2()
	update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("2")})
	waitClosed(t, ch1, "update, first subscriber")
	waitClosed(t, ch2, "update, second subscriber")

	ch3, rel3 := b.Subscribe(s.ID)
	defer rel3()
	ok(t, b.DeleteMemory(t.Context(), s.ID, m.ID, store.DeleteMemoryInput{Actor: apiActor}), "DeleteMemory")
	waitClosed(t, ch3, "delete")

	// A released subscription doesn't break later writes or subscriptions.
	_, rel4 := b.Subscribe(s.ID)
	rel4()
	ch5, rel5 := b.Subscribe(s.ID)
	defer rel5()
	create(t, b, s.ID, "/b", "")
	waitClosed(t, ch5, "create after a release")
}

// testSubscribeAfterCommit checks that a waiter woken by the channel sees
// the write in the feed: the channel closes after the commit, not before.
func testSubscribeAfterCommit(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	for round := 1; round <= 5; round++ {
		ch, release := b.Subscribe(s.ID)
		seen := make(chan int64, 1)
		go func() {
			select {
			case <-ch:
			case <-time.After(waitBound):
				seen <- -1
				return
			}
			p, err := b.Changes(ctxBG(), s.ID, 0, 0)
			if err != nil {
				seen <- -2
				return
			}
			seen <- p.NextCursor
		}()
		create(t, b, s.ID, fmt.Sprintf("/r%d", round), "")
		got := <-seen
		release()
		if got < int64(round) {
			t.Fatalf("round %d: woken waiter read head %d, want >= %d (-1: not woken within %v)", round, got, round, waitBound)
		}
	}
}

func testPrune(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	other := newStore(t, b, "other")
	h := head(t, b, s.ID)
	m := create(t, b, s.ID, "/m", "")
	for i := range 4 {
		create(t, b, s.ID, fmt.Sprintf("/%d", i), "")
	}
	create(t, b, other.ID, "/x", "")
	create(t, b, other.ID, "/y", "")

	n, err := b.PruneChanges(ctx, time.Now().Add(-time.Hour))
	ok(t, err, "PruneChanges with a past cutoff")
	if n != 0 {
		t.Fatalf("pruning before any change dropped %d", n)
	}
	if h > 0 {
		if cs := changesAfter(t, b, s.ID, h); len(cs) != 5 {
			t.Fatalf("%d changes after a no-op prune, want 5", len(cs))
		}
	}
	if cs := changesAfter(t, b, s.ID, h+1); len(cs) != 4 {
		t.Fatalf("%d changes after a no-op prune, want 4", len(cs))
	}

	n, err = b.PruneChanges(ctx, time.Now().Add(time.Hour))
	ok(t, err, "PruneChanges with a future cutoff")
	if n != 7 {
		t.Fatalf("pruning everything dropped %d changes, want 7", n)
	}
	for _, after := range []int64{h + 1, h + 3, h + 4} {
		_, err = b.Changes(ctx, s.ID, after, 10)
		wantErr(t, err, store.ErrGone, fmt.Sprintf("Changes(after=%d) after pruning", after))
	}
	_, err = b.Changes(ctx, other.ID, h+1, 10)
	wantErr(t, err, store.ErrGone, "Changes(after=h+1) of the other store after pruning")

	p, err := b.Changes(ctx, s.ID, 0, 10)
	ok(t, err, "Changes(after=0) after pruning")
	if p.NextCursor != h+5 || len(p.Data) != 0 {
		t.Fatalf("Changes(after=0) after pruning = %+v, want cursor %d", p, h+5)
	}
	p, err = b.Changes(ctx, s.ID, h+5, 10)
	ok(t, err, "Changes(after=head) after pruning")
	if p.NextCursor != h+5 || len(p.Data) != 0 || p.HasMore {
		t.Fatalf("Changes(after=head) after pruning = %+v", p)
	}

	// The feed goes on from the head.
	update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("after prune")})
	cs := changesAfter(t, b, s.ID, h+5)
	if len(cs) != 1 || cs[0].Seq != h+6 || cs[0].MemoryID != m.ID || cs[0].Operation != store.OpModified {
		t.Fatalf("changes after pruning and one write: %+v, want seq %d", cs, h+6)
	}
	n, err = b.PruneChanges(ctx, time.Now().Add(time.Hour))
	ok(t, err, "PruneChanges again")
	if n != 1 {
		t.Fatalf("second prune dropped %d, want 1", n)
	}
	_, err = b.Changes(ctx, s.ID, h+5, 10)
	wantErr(t, err, store.ErrGone, "Changes(after=h+5) after the second prune")
	if cs := changesAfter(t, b, s.ID, h+6); len(cs) != 0 {
		t.Fatalf("changes after the head: %+v", cs)
	}
	// Pruning the feed keeps memories and versions.
	if names := listNames(t, b, s.ID, store.ListMemoriesOptions{}); len(names) != 5 {
		t.Fatalf("pruning changed the memories: %q", names)
	}
	if vs := allVersions(t, b, s.ID, store.ListVersionsOptions{}); len(vs) != 6 {
		t.Fatalf("pruning changed the versions: %d, want 6", len(vs))
	}
}
