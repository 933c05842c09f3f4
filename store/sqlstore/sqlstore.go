package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/sirupsen/logrus"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/memfs/memfs/store"
)

// Options configure a DB. The zero value is usable: defaults are noted.
type Options struct {
	// MaxMemoriesPerStore caps the memories of one store (default 10,000).
	MaxMemoriesPerStore int
	// SQLiteSynchronous is the SQLite synchronous pragma: "FULL" (default)
	// or "NORMAL".
	SQLiteSynchronous string
	// Log receives background errors (the PostgreSQL listener). Default: logrus's standard logger.
	Log logrus.FieldLogger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.MaxMemoriesPerStore <= 0 {
		o.MaxMemoriesPerStore = store.DefaultMaxMemories
	}
	if o.SQLiteSynchronous == "" {
		o.SQLiteSynchronous = "FULL"
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// DB is a store.Backend on SQLite or PostgreSQL.
type DB struct {
	sql  *sql.DB
	d    *dialect
	opts Options
	hub  hub
	// queue wakes blocked work polls, one per enqueue (queuewake.go).
	queue queueWaiters
	// writeMu serializes write transactions on SQLite (one writer).
	writeMu sync.Mutex

	listener *pgListener // PostgreSQL only
	// creates groups concurrent creates per store, changes concurrent
	// updates and deletes (memories.go, pgcreate.go; doc.go, "Grouped
	// writes").
	creates groups[*store.Memory]
	changes groups[*store.Memory]
}

var _ store.Backend = (*DB)(nil)

// Open opens the database named by dsn (see ParseTarget): a postgres://
// or postgresql:// URL selects PostgreSQL; a path, file:PATH or
// sqlite:PATH a SQLite file; any other scheme is an error wrapping
// ErrUnsupportedDSN, and nothing is created. A fresh database migrates
// itself.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	t, err := ParseTarget(dsn)
	if err != nil {
		return nil, err
	}
	if t.Postgres {
		return OpenPostgres(ctx, t.DSN, opts)
	}
	return OpenSQLite(ctx, t.Path, opts)
}

// OpenSQLite opens (creating if needed) a SQLite database file. The
// database and its -wal and -shm files are mode 0600 (see makePrivate).
func OpenSQLite(ctx context.Context, path string, opts Options) (*DB, error) {
	return openSQLite(ctx, "sqlite", path, opts)
}

// openSQLite is OpenSQLite through the named database/sql driver: "sqlite"
// (modernc.org/sqlite), or in tests a wrapper of it that fails chosen
// queries, to inject faults a real SQLite file can't be made to produce on cue.
func openSQLite(ctx context.Context, driverName, path string, opts Options) (*DB, error) {
	opts.setDefaults()
	sync := strings.ToUpper(opts.SQLiteSynchronous)
	if sync != "FULL" && sync != "NORMAL" {
		return nil, fmt.Errorf("sqlite synchronous must be FULL or NORMAL, not %q", opts.SQLiteSynchronous)
	}
	path = strings.TrimPrefix(path, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	if err := makePrivate(path, opts.Log); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Set("_txlock", "immediate")
	sqldb, err := sql.Open(driverName, "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqldb.SetMaxOpenConns(8)
	sqldb.SetMaxIdleConns(8)
	db := &DB{sql: sqldb, opts: opts, d: &dialect{name: "sqlite", migrations: sqliteMigrations()}}
	db.creates.run = db.runWritesTx
	db.changes.run = db.runWritesTx
	if err := db.migrate(ctx); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// OpenPostgres connects to PostgreSQL and starts the LISTEN goroutine
// that wakes change-feed waiters on commits made by other processes.
func OpenPostgres(ctx context.Context, dsn string, opts Options) (*DB, error) {
	opts.setDefaults()
	sqldb, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(32)
	if err := sqldb.PingContext(ctx); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	db := &DB{sql: sqldb, opts: opts, d: &dialect{
		name: "postgres", forUpdate: " FOR UPDATE", numbered: true,
		notify:     "SELECT pg_notify('" + notifyChannel + "', ?)",
		migrations: postgresMigrations(),
		bytea:      true,
	}}
	db.creates.run = db.runCreates
	db.changes.run = db.runWritesTx
	if err := db.migrate(ctx); err != nil {
		sqldb.Close()
		return nil, err
	}
	db.listener, err = startListener(ctx, dsn, waiters{feed: &db.hub, queue: &db.queue}, opts.Log)
	if err != nil {
		sqldb.Close()
		return nil, err
	}
	return db, nil
}

// Dialect names the database: "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.d.name }

// Close stops the listener and closes the database.
func (db *DB) Close() error {
	if db.listener != nil {
		db.listener.close()
	}
	return db.sql.Close()
}

func (db *DB) now() int64 { return db.opts.Now().UnixMicro() }

// lockedStore is the store row as seen by a write transaction holding its lock.
type lockedStore struct {
	archived    bool
	lastSeq     int64
	memoryCount int64
}

// writeTx runs fn in a write transaction. With storeID set, the store's
// row is locked first and passed to fn (ErrNotFound when it doesn't
// exist). After a successful commit the store's change-feed waiters wake.
func (db *DB) writeTx(ctx context.Context, storeID string, fn func(tx *sql.Tx, st *lockedStore) error) error {
	if db.d.name == "sqlite" {
		db.writeMu.Lock()
		defer db.writeMu.Unlock()
	}
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback()
	var st *lockedStore
	if storeID != "" {
		st = &lockedStore{}
		var archived sql.NullInt64
		err := tx.QueryRowContext(ctx, db.d.q(`SELECT archived_at, last_seq, memory_count FROM memory_stores WHERE id = ?`+db.d.forUpdate), storeID).
			Scan(&archived, &st.lastSeq, &st.memoryCount)
		if errors.Is(err, sql.ErrNoRows) {
			return store.Errorf(store.ErrNotFound, "memory store %s not found", storeID)
		}
		if err != nil {
			return mapErr(err)
		}
		st.archived = archived.Valid
	}
	startSeq := int64(0)
	if st != nil {
		startSeq = st.lastSeq
	}
	if err := fn(tx, st); err != nil {
		return err
	}
	if st != nil && st.lastSeq != startSeq {
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE memory_stores SET last_seq = ?, memory_count = ? WHERE id = ?`), st.lastSeq, st.memoryCount, storeID); err != nil {
			return mapErr(err)
		}
		if db.d.notify != "" {
			if _, err := tx.ExecContext(ctx, db.d.q(db.d.notify), storeID); err != nil {
				return mapErr(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return mapErr(err)
	}
	if st != nil && st.lastSeq != startSeq {
		db.hub.notify(storeID)
	}
	return nil
}

// micros converts a stored timestamp to time.Time (UTC).
func micros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullMicros(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := micros(n.Int64)
	return &t
}
