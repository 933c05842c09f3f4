package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/store/storetest"
)

// TestMain fails the package if any goroutine (the PostgreSQL listener, a
// pool opener, a test's writer) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTimeout bounds Open (migrations included).
const openTimeout = 30 * time.Second

// open opens dsn and closes it when the test ends.
func open(t *testing.T, dsn string, opts sqlstore.Options) *sqlstore.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	db, err := sqlstore.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T, maxMemories int) store.Backend {
		db := open(t, sqltest.SQLite(t), sqlstore.Options{MaxMemoriesPerStore: maxMemories})
		if db.Dialect() != "sqlite" {
			t.Fatalf("dialect %q, want sqlite", db.Dialect())
		}
		return db
	})
}

func TestPostgres(t *testing.T) {
	sqltest.PostgresBaseURL(t) // skip (or fail in CI) before any subtest
	storetest.Run(t, func(t *testing.T, maxMemories int) store.Backend {
		db := open(t, sqltest.Postgres(t), sqlstore.Options{MaxMemoriesPerStore: maxMemories})
		if db.Dialect() != "postgres" {
			t.Fatalf("dialect %q, want postgres", db.Dialect())
		}
		return db
	})
}

// TestPostgresCrossProcessEvents: an event appended through one instance
// wakes a session stream's subscriber on another (LISTEN/NOTIFY), as does
// the archive's session.status_terminated, and appends racing through
// both instances are numbered 1, 2, 3, ... in commit order.
func TestPostgresCrossProcessEvents(t *testing.T) {
	url := sqltest.Postgres(t)
	a := open(t, url, sqlstore.Options{})
	b := open(t, url, sqlstore.Options{})
	ctx := t.Context()
	env, err := a.CreateEnvironment(ctx, store.CreateEnvironmentInput{Name: "e", KeyHash: []byte("k")})
	must(t, err)
	sess, err := a.CreateSession(ctx, store.CreateSessionInput{EnvironmentID: env.ID, MemoryRoot: "/mnt/memory"})
	must(t, err)
	use, err := store.ParseEvent(0, []byte(`{"type":"agent.tool_use","name":"bash","input":{"command":"ls"}}`))
	must(t, err)
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s through A did not wake B's subscriber within 10s", what)
		}
	}
	for round := range 3 {
		ch, release := b.SubscribeEvents(sess.ID)
		_, err := a.AppendEvents(ctx, sess.ID, []store.NewEvent{use})
		must(t, err)
		wait(ch, fmt.Sprintf("round %d: an append", round))
		release()
		tail, err := b.EventsAfter(ctx, sess.ID, int64(round), 10)
		if err != nil || tail.Head != int64(round+1) || len(tail.Events) != 1 {
			t.Fatalf("round %d: B reads %+v, %v; want head %d and its event", round, tail, err, round+1)
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		db := a
		if i%2 == 1 {
			db = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.AppendEvents(context.Background(), sess.ID, []store.NewEvent{use, use})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("appender %d: %v", i, err)
		}
	}
	tail, err := a.EventsAfter(ctx, sess.ID, 0, 100)
	must(t, err)
	if tail.Head != 19 || len(tail.Events) != 19 {
		t.Fatalf("after the race: head %d, %d events; want 19", tail.Head, len(tail.Events))
	}
	for i, e := range tail.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d; want the log numbered 1, 2, 3, ...", i, e.Seq)
		}
	}

	ch, release := b.SubscribeEvents(sess.ID)
	defer release()
	_, err = a.ArchiveSession(ctx, sess.ID)
	must(t, err)
	wait(ch, "archiving the session")
	tail, err = b.EventsAfter(ctx, sess.ID, 19, 10)
	if err != nil || !tail.Terminated || len(tail.Events) != 1 || tail.Events[0].Type != store.EventSessionStatusTerminated {
		t.Fatalf("B reads the archived session as %+v, %v; want terminated with its session.status_terminated", tail, err)
	}
}

// TestPostgresCrossProcess opens two DB instances on one database, as two
// memfs serve processes would: a commit through one wakes change-feed
// waiters on the other (LISTEN/NOTIFY), and writes through both are
// serialized by the database, not by either process.
func TestPostgresCrossProcess(t *testing.T) {
	url := sqltest.Postgres(t)
	a := open(t, url, sqlstore.Options{})
	b := open(t, url, sqlstore.Options{})
	ctx := t.Context()
	actor := store.APIActor("apikey_test")

	s, err := b.CreateStore(ctx, store.CreateStoreInput{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	p0, err := a.Changes(ctx, s.ID, 0, 0)
	must(t, err)
	h0 := p0.NextCursor
	for round := range 3 {
		ch, release := a.Subscribe(s.ID)
		if _, err := b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: fmt.Sprintf("/r%d", round), Content: "x", Actor: actor}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a write through B did not wake A's subscriber within 10s", round)
		}
		release()
		p, err := a.Changes(ctx, s.ID, 0, 0)
		if err != nil || p.NextCursor != h0+int64(round+1) {
			t.Fatalf("round %d: A sees head %d (%v), want %d", round, p.NextCursor, err, h0+int64(round+1))
		}
	}

	// Racing creates of one path through both instances: one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := make(chan struct{})
	for i := range errs {
		db := a
		if i%2 == 1 {
			db = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = db.CreateMemory(context.Background(), s.ID, store.CreateMemoryInput{Path: "/race", Content: fmt.Sprint(i), Actor: actor})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrPathConflict):
			t.Fatalf("creator %d: %v, want success or ErrPathConflict", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d creates of /race succeeded across two instances, want 1", won)
	}
	p, err := b.Changes(ctx, s.ID, h0+3, 10)
	if err != nil || len(p.Data) != 1 || p.Data[0].Seq != h0+4 {
		t.Fatalf("feed after the race = %+v, %v; want exactly seq %d", p, err, h0+4)
	}
}

// TestPostgresConcurrentMigrate starts several instances at once on a fresh
// database: the migration runs once and every instance opens.
func TestPostgresConcurrentMigrate(t *testing.T) {
	url := sqltest.Postgres(t)
	dbs := make([]*sqlstore.DB, 4)
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
			defer cancel()
			dbs[i], errs[i] = sqlstore.Open(ctx, url, sqlstore.Options{})
		}()
	}
	wg.Wait()
	for i, db := range dbs {
		if errs[i] != nil {
			t.Errorf("instance %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { db.Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	s, err := dbs[0].CreateStore(t.Context(), store.CreateStoreInput{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbs[3].GetStore(t.Context(), s.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteReopen checks that everything written survives Close and Open:
// stores, memories, versions, redactions, the feed head and pruning state,
// the memory count behind the cap, and keys.
func TestSQLiteReopen(t *testing.T) {
	path := sqltest.SQLite(t)
	ctx := t.Context()
	actor := store.SessionActor("sesn_reopen")

	db, err := sqlstore.Open(ctx, path, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := db.CreateStore(ctx, store.CreateStoreInput{Name: "kept", Description: "d", Metadata: map[string]string{"k": "v"}})
	must(t, err)
	p0, err := db.Changes(ctx, s.ID, 0, 0)
	must(t, err)
	h0 := p0.NextCursor
	arch, err := db.CreateStore(ctx, store.CreateStoreInput{Name: "archived"})
	must(t, err)
	_, err = db.ArchiveStore(ctx, arch.ID)
	must(t, err)
	m, err := db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/a/b", Content: "first", Actor: actor})
	must(t, err)
	m, err = db.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("second"), Actor: actor})
	must(t, err)
	gone, err := db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/gone", Content: "x", Actor: actor})
	must(t, err)
	must(t, db.DeleteMemory(ctx, s.ID, gone.ID, store.DeleteMemoryInput{Actor: actor}))
	vs, err := db.ListVersions(ctx, s.ID, store.ListVersionsOptions{MemoryID: m.ID})
	must(t, err)
	_, err = db.RedactVersion(ctx, s.ID, vs.Data[1].ID, actor)
	must(t, err)
	_, err = db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/c", Content: "c", Actor: actor})
	must(t, err)
	keyID, err := db.CreateAPIKey(ctx, store.KeyKindAdmin, []byte("hash"))
	must(t, err)
	_, err = db.PruneChanges(ctx, time.Now().Add(time.Hour)) // drops all 5 changes
	must(t, err)
	must(t, db.Close())

	// Reopen with a cap equal to the memories present.
	db2 := open(t, path, sqlstore.Options{MaxMemoriesPerStore: 2})
	got, err := db2.GetStore(ctx, s.ID)
	if err != nil || got.Name != "kept" || got.Description != "d" || got.Metadata["k"] != "v" {
		t.Fatalf("store after reopen = %+v, %v", got, err)
	}
	if a, err := db2.GetStore(ctx, arch.ID); err != nil || !a.Archived() {
		t.Fatalf("archived store after reopen = %+v, %v", a, err)
	}
	gm, err := db2.GetMemory(ctx, s.ID, m.ID)
	if err != nil || gm.Content == nil || *gm.Content != "second" || gm.MemoryVersionID != m.MemoryVersionID || gm.Path != "/a/b" {
		t.Fatalf("memory after reopen = %+v, %v", gm, err)
	}
	if _, err := db2.GetMemory(ctx, s.ID, gone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted memory after reopen: %v, want ErrNotFound", err)
	}
	all, err := db2.ListVersions(ctx, s.ID, store.ListVersionsOptions{})
	if err != nil || len(all.Data) != 5 {
		t.Fatalf("versions after reopen: %d, %v; want 5", len(all.Data), err)
	}
	red, err := db2.GetVersion(ctx, s.ID, vs.Data[1].ID)
	if err != nil || red.RedactedAt == nil || red.Content != nil || red.Path != nil {
		t.Fatalf("redacted version after reopen = %+v, %v", red, err)
	}
	p, err := db2.Changes(ctx, s.ID, 0, 0)
	if err != nil || p.NextCursor != h0+5 {
		t.Fatalf("feed head after reopen = %d, %v; want %d", p.NextCursor, err, h0+5)
	}
	if _, err := db2.Changes(ctx, s.ID, h0+2, 10); !errors.Is(err, store.ErrGone) {
		t.Fatalf("pruned cursor after reopen: %v, want ErrGone", err)
	}
	if k, err := db2.LookupAPIKey(ctx, []byte("hash")); err != nil || k.ID != keyID {
		t.Fatalf("key after reopen = %+v, %v", k, err)
	}
	// The memory count survived: at a cap of 2, a third memory is refused.
	if _, err := db2.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/d", Content: "", Actor: actor}); !errors.Is(err, store.ErrLimit) {
		t.Fatalf("create at the cap after reopen: %v, want ErrLimit", err)
	}
	// And the sequence continues where it stopped.
	if _, err := db2.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("third"), Actor: actor}); err != nil {
		t.Fatal(err)
	}
	p, err = db2.Changes(ctx, s.ID, h0+5, 10)
	if err != nil || len(p.Data) != 1 || p.Data[0].Seq != h0+6 {
		t.Fatalf("feed after reopen and a write = %+v, %v; want seq %d", p, err, h0+6)
	}
}

// TestSQLiteFreshMigrates opens a file that doesn't exist, in a directory
// that doesn't exist: Open creates both and the schema, and a second Open
// of the migrated file doesn't migrate again.
func TestSQLiteFreshMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "dir", "memfs.db")
	db := open(t, path, sqlstore.Options{})
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Open did not create the database file: %v", err)
	}
	s, err := db.CreateStore(t.Context(), store.CreateStoreInput{Name: "fresh"})
	must(t, err)
	_, err = db.CreateMemory(t.Context(), s.ID, store.CreateMemoryInput{Path: "/a", Content: "", Actor: store.APIActor("k")})
	must(t, err)

	// Open a second handle while the first is open (a restart overlaps),
	// then look at schema_migrations directly.
	db2 := open(t, path, sqlstore.Options{})
	if _, err := db2.GetStore(t.Context(), s.ID); err != nil {
		t.Fatal(err)
	}
	raw := rawSQLite(t, path)
	var versions, maxVersion int
	must(t, raw.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&versions, &maxVersion))
	if versions != maxVersion || versions < 1 {
		t.Fatalf("schema_migrations has %d rows up to version %d; want each version once", versions, maxVersion)
	}
	var mode string
	must(t, raw.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
	if !strings.EqualFold(mode, "wal") {
		t.Fatalf("journal_mode %q, want wal", mode)
	}
}

// TestSQLiteNewerSchemaRefused: a database migrated by a newer memfs is not
// opened (and not damaged) by an older one.
func TestSQLiteNewerSchemaRefused(t *testing.T) {
	path := sqltest.SQLite(t)
	db, err := sqlstore.Open(t.Context(), path, sqlstore.Options{})
	must(t, err)
	must(t, db.Close())
	raw := rawSQLite(t, path)
	_, err = raw.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`)
	must(t, err)
	db, err = sqlstore.Open(t.Context(), path, sqlstore.Options{})
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a database with a newer schema")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open error %q does not say the schema is newer", err)
	}
}

func TestOpenBadOptions(t *testing.T) {
	_, err := sqlstore.Open(t.Context(), sqltest.SQLite(t), sqlstore.Options{SQLiteSynchronous: "OFF"})
	if err == nil {
		t.Fatal("Open accepted synchronous=OFF")
	}
}

// rawSQLite opens the file with the SQLite driver directly, closed at test end.
func rawSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	must(t, err)
	t.Cleanup(func() { raw.Close() })
	return raw
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSQLiteAgentsMigration: a database of migration 5 has sessions whose
// agent is null (or whatever a client echoed); migration 6 gives each the
// default agent's snapshot, so every session answers a full agent.
func TestSQLiteAgentsMigration(t *testing.T) {
	path := sqltest.SQLite(t)
	db, err := sqlstore.Open(t.Context(), path, sqlstore.Options{})
	must(t, err)
	env, err := db.CreateEnvironment(t.Context(), store.CreateEnvironmentInput{Name: "e", KeyHash: []byte("k")})
	must(t, err)
	sess, err := db.CreateSession(t.Context(), store.CreateSessionInput{EnvironmentID: env.ID, MemoryRoot: "/mnt/memory"})
	must(t, err)
	must(t, db.Close())
	// Back to migration 5: no agent tables, the session's agent as a
	// client once sent it.
	raw := rawSQLite(t, path)
	for _, q := range []string{`DROP TABLE agent_versions`, `DROP TABLE agents`, `UPDATE sessions SET agent = '"agent_echoed"'`,
		`DELETE FROM schema_migrations WHERE version = 6`} {
		_, err := raw.Exec(q)
		must(t, err)
	}
	db = open(t, path, sqlstore.Options{})
	got, err := db.GetSession(t.Context(), sess.ID)
	must(t, err)
	def, err := db.GetAgent(t.Context(), store.DefaultAgentID, 0)
	must(t, err)
	if string(got.Agent) != string(def.SessionView()) || def.Version != 1 {
		t.Fatalf("after migration 6 the session's agent is %s; want the default agent %s", got.Agent, def.SessionView())
	}
}
