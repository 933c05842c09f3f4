package sqlstore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// TestPostgresCreateTimesFollowFeed: a create on PostgreSQL reads the
// clock before it has the store's lock, so a create that read it earlier
// can commit later. Its created_at must still not be before the previous
// change's: created_at follows seq order, as for every other write, so a
// feed pruned by time is pruned from its start. A clock that steps back
// stands in for that race.
func TestPostgresCreateTimesFollowFeed(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro())
	db := open(t, sqltest.Postgres(t), sqlstore.Options{Now: func() time.Time { return time.UnixMicro(clock.Load()) }})
	ctx := t.Context()
	s, err := db.CreateStore(ctx, store.CreateStoreInput{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/first", Content: "1", Actor: store.Actor{Type: store.ActorAPI, APIKeyID: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(-int64(time.Hour / time.Microsecond))
	second, err := db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/second", Content: "2", Actor: store.Actor{Type: store.ActorAPI, APIKeyID: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.GetMemory(ctx, s.ID, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt.Before(first.CreatedAt) || !got.CreatedAt.Equal(second.CreatedAt) {
		t.Fatalf("second create stored created_at %v, returned %v; want both at or after the first's %v", got.CreatedAt, second.CreatedAt, first.CreatedAt)
	}
}
