package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
	"modernc.org/sqlite"
)

// faultDriver is modernc.org/sqlite behind a database/sql driver that fails
// the statements containing a chosen text, once armed. It injects what a
// real SQLite file can't be made to do on cue: fail one particular
// statement in the middle of an operation, as a timeout, a PostgreSQL
// connection reset or SQLITE_BUSY would.
type faultDriver struct {
	inner sqlite.Driver

	mu     sync.Mutex
	match  string // GUARDED_BY(mu); "" = disarmed
	err    error  // GUARDED_BY(mu)
	result bool   // GUARDED_BY(mu); the statement runs, its RowsAffected fails
	hits   int    // GUARDED_BY(mu)
}

// faultDrivers numbers the registered drivers: sql.Register panics on a
// name it has seen.
var faultDrivers atomic.Int64

// openFaulty opens a fresh SQLite database through a new faultDriver and
// closes it when the test ends.
func openFaulty(t *testing.T) (*DB, *faultDriver) {
	t.Helper()
	fd := &faultDriver{}
	name := fmt.Sprintf("sqlite-fault-%d", faultDrivers.Add(1))
	sql.Register(name, fd)
	quiet := logrus.New()
	quiet.SetLevel(logrus.PanicLevel)
	db, err := openSQLite(context.Background(), name, filepath.Join(t.TempDir(), "memfs.db"), Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, fd
}

// failOn makes every later statement containing match fail with err.
func (d *faultDriver) failOn(match string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.match, d.err, d.result = match, err, false
}

// failRowsAffectedOn lets every later statement containing match run, but
// makes its result's RowsAffected fail with err.
func (d *faultDriver) failRowsAffectedOn(match string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.match, d.err, d.result = match, err, true
}

// injected says how many queries failed on cue so far.
func (d *faultDriver) injected() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hits
}

// check returns the error to fail query with (nil: none), and whether it
// is for the statement's result rather than the statement.
func (d *faultDriver) check(query string) (onResult bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.match == "" || !strings.Contains(query, d.match) {
		return false, nil
	}
	d.hits++
	return d.result, d.err
}

func (d *faultDriver) Open(name string) (driver.Conn, error) {
	c, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, d: d}, nil
}

// faultConn forwards to the SQLite connection, checking each statement
// first. It implements the optional interfaces database/sql uses, so the
// statements run exactly as they would without it.
type faultConn struct {
	driver.Conn
	d *faultDriver
}

var (
	_ driver.QueryerContext     = (*faultConn)(nil)
	_ driver.ExecerContext      = (*faultConn)(nil)
	_ driver.ConnPrepareContext = (*faultConn)(nil)
	_ driver.ConnBeginTx        = (*faultConn)(nil)
	_ driver.SessionResetter    = (*faultConn)(nil)
	_ driver.Validator          = (*faultConn)(nil)
)

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if onResult, err := c.d.check(query); err != nil && !onResult {
		return nil, err
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	onResult, err := c.d.check(query)
	if err != nil && !onResult {
		return nil, err
	}
	res, execErr := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if execErr != nil || err == nil {
		return res, execErr
	}
	return failedResult{res, err}, nil
}

// PrepareContext is not checked: database/sql prepares only for
// db.Prepare, which sqlstore doesn't use; statements arrive above.
func (c *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// failedResult is a statement's result whose row count can't be read.
type failedResult struct {
	driver.Result
	err error
}

func (r failedResult) RowsAffected() (int64, error) { return 0, r.err }

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *faultConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
