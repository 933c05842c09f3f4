package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// TestRowsAffectedErrorSurfaces fails reading the row count of the
// statement an operation judges its outcome by. The error must reach the
// caller, never be read as "no such row" (a 404 for an environment or
// session that exists) or as "nothing pruned".
func TestRowsAffectedErrorSurfaces(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("injected: row count unavailable")
	cases := []struct {
		name, match string
		run         func(t *testing.T, db *DB) error
	}{
		{"ArchiveEnvironment", "UPDATE environments SET archived_at", func(t *testing.T, db *DB) error {
			env := newEnvironment(t, db)
			_, err := db.ArchiveEnvironment(ctx, env.ID)
			return err
		}},
		{"ArchiveSession", "UPDATE sessions SET archived_at", func(t *testing.T, db *DB) error {
			env := newEnvironment(t, db)
			sess, err := db.CreateSession(ctx, store.CreateSessionInput{EnvironmentID: env.ID, MemoryRoot: "/mnt/memory"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.ArchiveSession(ctx, sess.ID)
			return err
		}},
		{"PruneChanges", "DELETE FROM memory_changes", func(t *testing.T, db *DB) error {
			_, err := db.PruneChanges(ctx, time.Now().Add(time.Hour))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, fd := openFaulty(t)
			fd.failRowsAffectedOn(c.match, boom)
			err := c.run(t, db)
			if fd.injected() == 0 {
				t.Fatalf("no statement matched %q: this test no longer covers %s", c.match, c.name)
			}
			if !errors.Is(err, boom) {
				t.Fatalf("%s with a failed row count: %v, want the row-count error", c.name, err)
			}
		})
	}
}

func newEnvironment(t *testing.T, db *DB) *store.Environment {
	t.Helper()
	env, err := db.CreateEnvironment(context.Background(), store.CreateEnvironmentInput{Name: "env", KeyHash: []byte(t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	return env
}
