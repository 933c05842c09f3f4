package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// The work queue seen from around it: item metadata, listing, stats,
// healthcheck items, wake-ups of blocked pollers, and pollers racing.

func testWorkMetadata(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	w := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	s := func(v string) *string { return &v }

	got, err := b.UpdateWorkMetadata(ctx, env.ID, w.ID, map[string]*string{"a": s("1"), "b": s("2")})
	ok(t, err, "UpdateWorkMetadata")
	if want := map[string]string{"a": "1", "b": "2"}; !reflect.DeepEqual(got.Metadata, want) {
		t.Errorf("metadata %v, want %v", got.Metadata, want)
	}
	got, err = b.UpdateWorkMetadata(ctx, env.ID, w.ID, map[string]*string{"a": nil, "c": s("3"), "missing": nil})
	ok(t, err, "UpdateWorkMetadata patch")
	want := map[string]string{"b": "2", "c": "3"}
	if !reflect.DeepEqual(got.Metadata, want) || got.State != store.WorkQueued {
		t.Errorf("after the patch: %+v, want metadata %v, state queued", got, want)
	}
	_, err = b.UpdateWorkMetadata(ctx, env.ID, w.ID, map[string]*string{strings.Repeat("k", 65): s("v")})
	wantErr(t, err, store.ErrInvalid, "a 65-character key")
	if g := getWork(t, b, env.ID, w.ID); !reflect.DeepEqual(g.Metadata, want) {
		t.Errorf("a refused patch changed the metadata to %v", g.Metadata)
	}
	_, err = b.UpdateWorkMetadata(ctx, env.ID, "work_nope", map[string]*string{"a": s("1")})
	wantErr(t, err, store.ErrNotFound, "metadata of an unknown item")
}

func testWorkList(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")
	var want []string // newest first
	for range 3 {
		s := newSession(t, b, env.ID)
		newSession(t, b, other.ID)
		want = append([]string{workOf(t, b, env.ID, s.ID).ID}, want...)
	}
	hc, err := b.EnqueueHealthcheck(ctx, env.ID)
	ok(t, err, "EnqueueHealthcheck")
	want = append([]string{hc.ID}, want...)

	var got []string
	page := ""
	for range maxPages {
		p, err := b.ListWork(ctx, env.ID, 1, page)
		ok(t, err, "ListWork")
		if len(p.Data) > 1 {
			t.Fatalf("ListWork limit 1 returned %d", len(p.Data))
		}
		for _, w := range p.Data {
			if w.EnvironmentID != env.ID {
				t.Errorf("ListWork(%s) returned %s of %s", env.ID, w.ID, w.EnvironmentID)
			}
			got = append(got, w.ID)
		}
		if page = p.NextPage; page == "" {
			break
		}
	}
	equalStrings(t, "work items, newest first", got, want)
	if n := len(allWork(t, b, other.ID)); n != 3 {
		t.Errorf("the other environment lists %d items, want 3", n)
	}
}

func testWorkStats(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")
	stats := func(envID string) store.WorkQueueStats {
		t.Helper()
		st, err := b.WorkStats(ctx, envID)
		ok(t, err, "WorkStats")
		if st.Type != store.TypeWorkQueueStats {
			t.Errorf("stats type %q", st.Type)
		}
		return *st
	}
	check := func(what string, depth, pending int, oldest *time.Time, workers int) {
		t.Helper()
		st := stats(env.ID)
		if st.Depth != depth || st.Pending != pending || st.WorkersPolling != workers ||
			(st.OldestQueuedAt == nil) != (oldest == nil) || (oldest != nil && !st.OldestQueuedAt.Equal(*oldest)) {
			t.Errorf("%s: stats depth %d pending %d oldest %v workers %d; want %d %d %v %d",
				what, st.Depth, st.Pending, st.OldestQueuedAt, st.WorkersPolling, depth, pending, oldest, workers)
		}
	}
	check("empty", 0, 0, nil, 0)
	w1 := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	w2 := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	check("two queued", 2, 0, &w1.CreatedAt, 0)

	if g := pollOnce(t, b, env.ID, "worker-a"); g == nil || g.ID != w1.ID {
		t.Fatalf("Poll = %+v, want %s", g, w1.ID)
	}
	check("one claimed", 1, 1, &w1.CreatedAt, 1)
	if g := pollOnce(t, b, env.ID, "worker-b"); g == nil || g.ID != w2.ID {
		t.Fatalf("Poll = %+v, want %s", g, w2.ID)
	}
	check("both claimed", 0, 2, &w1.CreatedAt, 2)
	pollOnce(t, b, env.ID, "worker-a") // the same worker again
	pollOnce(t, b, env.ID, "")         // a worker without an id isn't counted
	check("a worker polling twice", 0, 2, &w1.CreatedAt, 2)
	pollOnce(t, b, env.ID, "worker-c")
	check("a third worker", 0, 2, &w1.CreatedAt, 3)

	_, err := b.Ack(ctx, env.ID, w1.ID)
	ok(t, err, "Ack")
	check("one acknowledged", 0, 1, &w2.CreatedAt, 3)
	_, err = b.Ack(ctx, env.ID, w2.ID)
	ok(t, err, "Ack")
	check("both acknowledged", 0, 0, nil, 3)

	if st := stats(other.ID); st.Depth != 0 || st.Pending != 0 || st.WorkersPolling != 0 || st.OldestQueuedAt != nil {
		t.Errorf("another environment's stats %+v, want all zero", st)
	}
	_, err = b.WorkStats(ctx, "env_nope")
	wantErr(t, err, store.ErrNotFound, "stats of an unknown environment")
}

func testWorkHealthcheck(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	hc, err := b.EnqueueHealthcheck(ctx, env.ID)
	ok(t, err, "EnqueueHealthcheck")
	if !strings.HasPrefix(hc.ID, store.PrefixWork) || hc.Data.Type != "healthcheck" || !strings.HasPrefix(hc.Data.ID, store.PrefixHealthcheck) ||
		hc.State != store.WorkQueued || hc.EnvironmentID != env.ID || hc.Type != store.TypeWork {
		t.Fatalf("healthcheck item %+v: want a work_ id, data {healthcheck hc_…}, queued", hc)
	}
	got := claimAck(t, b, env.ID, hc)
	if got.State != store.WorkStarting || got.Data != hc.Data {
		t.Errorf("acked healthcheck %+v", got)
	}
	if hb := heartbeat(t, b, env.ID, hc.ID, store.NoHeartbeat, 0); hb.State != store.WorkActive {
		t.Errorf("healthcheck heartbeat state %s, want active", hb.State)
	}
	if st, err := b.StopWork(ctx, env.ID, hc.ID, true); err != nil || st.State != store.WorkStopped {
		t.Errorf("stop healthcheck: %+v, %v", st, err)
	}
	_, err = b.EnqueueHealthcheck(ctx, "env_nope")
	wantErr(t, err, store.ErrNotFound, "healthcheck on an unknown environment")
}

func testWorkWakeups(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")

	ch, release := b.SubscribeQueue(env.ID)
	newSession(t, b, other.ID)
	if isClosed(ch) {
		t.Error("a session on another environment woke this queue's waiters")
	}
	newSession(t, b, env.ID)
	waitClosed(t, ch, "queue after a session create")
	// Still subscribed, ch would take the next wake (as the oldest waiter
	// without one): release it, as a woken poll does.
	release()

	ch2, release2 := b.SubscribeQueue(env.ID)
	defer release2()
	if isClosed(ch2) {
		t.Fatal("a fresh subscription is already closed")
	}
	_, err := b.EnqueueHealthcheck(ctx, env.ID)
	ok(t, err, "EnqueueHealthcheck")
	waitClosed(t, ch2, "queue after a healthcheck")
}

// testWorkConcurrentPolls: workers polling at once never claim the same
// item, and between them claim every item.
func testWorkConcurrentPolls(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	const items, workers = 12, 6
	want := map[string]bool{}
	for range items {
		want[workOf(t, b, env.ID, newSession(t, b, env.ID).ID).ID] = true
	}
	var mu sync.Mutex
	claims := map[string]int{} // GUARDED_BY(mu)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				w, err := b.Poll(ctxBG(), store.PollInput{EnvironmentID: env.ID, WorkerID: fmt.Sprintf("w%d", i), ReclaimAfter: time.Hour})
				if err != nil {
					errc <- err
					return
				}
				if w == nil {
					return
				}
				mu.Lock()
				claims[w.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("concurrent Poll: %v", err)
	}
	// A poll that lost a race may have answered nothing early: drain.
	for w := pollOnce(t, b, env.ID, "drain"); w != nil; w = pollOnce(t, b, env.ID, "drain") {
		claims[w.ID]++
	}
	for id, n := range claims {
		if n != 1 || !want[id] {
			t.Errorf("item %s claimed %d times (one of ours: %v)", id, n, want[id])
		}
	}
	if len(claims) != items {
		t.Errorf("%d of %d items claimed", len(claims), items)
	}
}
