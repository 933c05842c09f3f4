package sqlstore_test

import (
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// TestPostgresCrossProcessWorkWake: a work poll blocked on one instance
// (as store/server's poll loop blocks: subscribe, poll, wait) wakes when
// another instance on the same database enqueues work, by a session create
// or a healthcheck, and then claims that item. The wait stands for a long
// block_ms (60 s) bounded by a 20 s test deadline, so the test can only
// pass by the NOTIFY, never by the block running out.
func TestPostgresCrossProcessWorkWake(t *testing.T) {
	url := sqltest.Postgres(t)
	a := open(t, url, sqlstore.Options{})
	b := open(t, url, sqlstore.Options{})
	ctx := t.Context()
	env, err := a.CreateEnvironment(ctx, store.CreateEnvironmentInput{Name: "e", KeyHash: []byte("k")})
	must(t, err)

	blockedPoll := func(enqueue func() string) {
		t.Helper()
		woken, release := a.SubscribeQueue(env.ID)
		defer release()
		w, err := a.Poll(ctx, store.PollInput{EnvironmentID: env.ID, WorkerID: "w", ReclaimAfter: store.DefaultReclaimAfter})
		if err != nil || w != nil {
			t.Fatalf("poll on an empty queue: %+v, %v; want nothing", w, err)
		}
		block := time.NewTimer(60 * time.Second)
		defer block.Stop()
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		want := enqueue()
		select {
		case <-woken:
		case <-block.C:
			t.Fatal("the poll waited out its block")
		case <-deadline.C:
			t.Fatalf("enqueuing %s through B did not wake A's blocked poll within 20s", want)
		}
		w, err = a.Poll(ctx, store.PollInput{EnvironmentID: env.ID, WorkerID: "w", ReclaimAfter: store.DefaultReclaimAfter})
		if err != nil || w == nil || w.Data.ID != want {
			t.Fatalf("poll after the wake: %+v, %v; want the item of %s", w, err, want)
		}
	}
	for range 2 {
		blockedPoll(func() string {
			s, err := b.CreateSession(ctx, store.CreateSessionInput{EnvironmentID: env.ID, MemoryRoot: "/mnt/memory"})
			must(t, err)
			return s.ID
		})
	}
	blockedPoll(func() string {
		w, err := b.EnqueueHealthcheck(ctx, env.ID)
		must(t, err)
		return w.Data.ID
	})
}
