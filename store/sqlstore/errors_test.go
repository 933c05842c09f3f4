package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sirupsen/logrus"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// The classes mapErr sorts errors into.
const (
	classNil          = "nil"
	classContext      = "context error, passed through"
	classPathConflict = "path conflict"
	classUnavailable  = "unavailable"
	classInternal     = "internal"
)

// classOf says which class mapErr put err in.
func classOf(err error) string {
	var se *store.Error
	switch {
	case err == nil:
		return classNil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return classContext
	case errors.Is(err, store.ErrPathConflict):
		return classPathConflict
	case errors.Is(err, store.ErrUnavailable):
		return classUnavailable
	case errors.As(err, &se):
		return "store error: " + se.Kind.Error()
	}
	return classInternal
}

// checkMapErr checks mapErr's class for err, and that an error it does
// not pass through keeps the driver error reachable with errors.Is.
func checkMapErr(t *testing.T, err error, want string) {
	t.Helper()
	got := mapErr(err)
	if c := classOf(got); c != want {
		t.Fatalf("mapErr(%T %v) = %v: %s, want %s", err, err, got, c, want)
	}
	if want == classUnavailable || want == classInternal {
		if !errors.Is(got, err) {
			t.Errorf("mapErr(%v) = %v: the driver error is not wrapped", err, got)
		}
	}
	if want == classUnavailable {
		var se *store.Error
		if !errors.As(got, &se) || se.Message != unavailableClientReason {
			t.Errorf("mapErr(%v): client message %q, want %q (driver text stays in the log)", err, se.Message, unavailableClientReason)
		}
	}
}

func pgErr(code, constraint string) error {
	return &pgconn.PgError{Severity: "ERROR", Code: code, ConstraintName: constraint, Message: "server says " + code}
}

// TestMapErr classifies driver error values as the drivers build them.
func TestMapErr(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, classNil},
		{"a domain error passes", store.Errorf(store.ErrNotFound, "memory store x not found"), "store error: not found"},
		{"canceled", fmt.Errorf("query: %w", context.Canceled), classContext},
		{"deadline", context.DeadlineExceeded, classContext},

		{"pg admin_shutdown", pgErr("57P01", ""), classUnavailable},
		{"pg crash_shutdown", pgErr("57P02", ""), classUnavailable},
		{"pg cannot_connect_now", pgErr("57P03", ""), classUnavailable},
		{"pg connection_exception", pgErr("08000", ""), classUnavailable},
		{"pg connection_failure", pgErr("08006", ""), classUnavailable},
		{"pg sqlclient_unable_to_establish_sqlconnection", pgErr("08001", ""), classUnavailable},
		{"pg too_many_connections", pgErr("53300", ""), classUnavailable},
		{"pg out_of_memory", pgErr("53200", ""), classUnavailable},
		{"pg serialization_failure", pgErr("40001", ""), classUnavailable},
		{"pg deadlock_detected", pgErr("40P01", ""), classUnavailable},
		{"pg error wrapped", fmt.Errorf("scan: %w", pgErr("57P01", "")), classUnavailable},
		{"pg unique_violation of the memories path key", pgErr("23505", pgMemoriesPathKey), classPathConflict},
		{"pg unique_violation of another key", pgErr("23505", "api_keys_hash_key"), classInternal},
		{"pg unique_violation naming no constraint", pgErr("23505", ""), classInternal},
		{"pg foreign_key_violation", pgErr("23503", "memories_store_id_fkey"), classInternal},
		{"pg syntax_error", pgErr("42601", ""), classInternal},
		{"pg query_canceled by statement_timeout", pgErr("57014", ""), classInternal},
		{"pg error whose text says connection refused", &pgconn.PgError{Severity: "ERROR", Code: "P0001", Message: "connection refused"}, classInternal},

		{"database/sql bad connection", driver.ErrBadConn, classUnavailable},
		{"pgconn conn closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), classUnavailable},
		{"unexpected EOF", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), classUnavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, classUnavailable},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, classUnavailable},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, classUnavailable},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), classUnavailable},

		{"plain error", errors.New("boom"), classInternal},
		{"plain error saying database is locked", errors.New("database is locked (5) (SQLITE_BUSY)"), classInternal},
		{"plain error saying UNIQUE constraint failed", errors.New("UNIQUE constraint failed: memories.store_id, memories.path"), classInternal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkMapErr(t, c.err, c.want) })
	}
}

// TestMapErrConnectRefused classifies the error database/sql answers when
// PostgreSQL refuses the connection: a *pgconn.ConnectError.
func TestMapErrConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	db, err := sql.Open("pgx", "postgres://memfs@"+addr+"/memfs?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	err = db.QueryRowContext(context.Background(), "SELECT 1").Scan(&one)
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("querying a closed port: %T %v, want a *pgconn.ConnectError", err, err)
	}
	checkMapErr(t, err, classUnavailable)
}

// TestMapErrSQLite classifies errors of a real SQLite database.
func TestMapErrSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memfs.db")
	quiet := logrus.New()
	quiet.SetLevel(logrus.PanicLevel)
	db, err := OpenSQLite(ctx, path, Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db.sql, `INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) VALUES ('s', 'n', '', '{}', 0, 0)`)
	insertMemory := `INSERT INTO memories (id, store_id, path, content, sha, size, version_id, created_at, updated_at) VALUES (?, 's', ?, '', '', 0, 'v', 0, 0)`
	mustExec(t, db.sql, insertMemory, "m1", "/a")
	mustExec(t, db.sql, `INSERT INTO api_keys (id, kind, hash, created_at) VALUES ('k1', 'admin', x'01', 0)`)

	t.Run("unique violation of the memories path key", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, insertMemory, "m2", "/a")
		wantSQLiteCode(t, err, sqlite3.SQLITE_CONSTRAINT_UNIQUE)
		checkMapErr(t, err, classPathConflict)
	})
	t.Run("primary key violation of memories", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, insertMemory, "m1", "/b")
		wantSQLiteCode(t, err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
		checkMapErr(t, err, classInternal)
	})
	t.Run("unique violation of another key", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, `INSERT INTO api_keys (id, kind, hash, created_at) VALUES ('k2', 'admin', x'01', 0)`)
		wantSQLiteCode(t, err, sqlite3.SQLITE_CONSTRAINT_UNIQUE)
		checkMapErr(t, err, classInternal)
	})
	t.Run("no such table", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, `SELECT * FROM no_such_table`)
		wantSQLiteCode(t, err, sqlite3.SQLITE_ERROR)
		checkMapErr(t, err, classInternal)
	})

	// Two more connections to the file that never wait for a lock.
	raw := func(txlock string) *sql.DB {
		r, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock="+txlock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	t.Run("SQLITE_BUSY: another connection holds the write lock", func(t *testing.T) {
		holder, err := raw("immediate").BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		_, err = raw("immediate").BeginTx(ctx, nil)
		wantSQLiteCode(t, err, sqlite3.SQLITE_BUSY)
		checkMapErr(t, err, classUnavailable)
	})
	t.Run("SQLITE_BUSY_SNAPSHOT: a read snapshot went stale before its write", func(t *testing.T) {
		reader, err := raw("deferred").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		mustExecConn(t, reader, `BEGIN`)
		defer reader.ExecContext(ctx, `ROLLBACK`)
		var n int
		if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM memories`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db.sql, insertMemory, "m3", "/c") // commits after the reader's snapshot
		_, err = reader.ExecContext(ctx, insertMemory, "m4", "/d")
		wantSQLiteCode(t, err, sqlite3.SQLITE_BUSY_SNAPSHOT)
		checkMapErr(t, err, classUnavailable)
	})
}

// TestMapErrPostgres classifies errors of a real PostgreSQL server,
// checking the path key's name against the schema as migrated.
func TestMapErrPostgres(t *testing.T) {
	dsn := sqltest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := logrus.New()
	quiet.SetLevel(logrus.PanicLevel)
	db, err := OpenPostgres(ctx, dsn, Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // before sqltest drops the database
	mustExec(t, db.sql, `INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) VALUES ('s', 'n', '', '{}', 0, 0)`)
	insertMemory := `INSERT INTO memories (id, store_id, path, content, sha, size, version_id, created_at, updated_at) VALUES ($1, 's', $2, '', '', 0, 'v', 0, 0)`
	mustExec(t, db.sql, insertMemory, "m1", "/a")
	mustExec(t, db.sql, `INSERT INTO api_keys (id, kind, hash, created_at) VALUES ('k1', 'admin', '\x01', 0)`)

	t.Run("unique violation of the memories path key", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, insertMemory, "m2", "/a")
		checkMapErr(t, err, classPathConflict)
	})
	t.Run("primary key violation of memories", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, insertMemory, "m1", "/b")
		checkMapErr(t, err, classInternal)
	})
	t.Run("unique violation of another key", func(t *testing.T) {
		_, err := db.sql.ExecContext(ctx, `INSERT INTO api_keys (id, kind, hash, created_at) VALUES ('k2', 'admin', '\x01', 0)`)
		checkMapErr(t, err, classInternal)
	})
	t.Run("the server terminates the connection", func(t *testing.T) {
		conn, err := db.sql.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var pid int
		if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if err := db.sql.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
		}
		var one int
		err = conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
		if err == nil {
			t.Fatal("a query on a terminated connection succeeded")
		}
		checkMapErr(t, err, classUnavailable)
	})
}

func wantSQLiteCode(t *testing.T, err error, code int) {
	t.Helper()
	var le *sqlite.Error
	if !errors.As(err, &le) || le.Code() != code {
		t.Fatalf("got %T %v, want a *sqlite.Error with code %d", err, err, code)
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func mustExecConn(t *testing.T, c *sql.Conn, q string, args ...any) {
	t.Helper()
	if _, err := c.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
