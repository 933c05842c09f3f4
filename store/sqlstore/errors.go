package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/memfs/memfs/store"
)

// Driver errors are classified here, once, by the drivers' own codes
// (PostgreSQL SQLSTATE, SQLite extended result codes) and Go's error
// types, never by matching message text: messages change between driver
// and server versions and are localized by PostgreSQL.
//
// Two classes matter to callers:
//
//   - store.ErrUnavailable (HTTP 503 with retry-after): the database can't
//     be reached or can't serve now, and the same request may succeed in a
//     moment (a lost connection, a server restarting, a lock held too
//     long, a serialization failure whose transaction was rolled back).
//   - store.ErrPathConflict (HTTP 409): a write raced another to the same
//     path and lost on the memories (store_id, path) unique constraint.
//
// Everything else is a bug or a broken database (HTTP 500): wrapped with
// "database:" so it is logged with its cause.

// pgMemoriesPathKey is the name PostgreSQL gives the UNIQUE (store_id,
// path) table constraint of memories in schemaV1 (<table>_<columns>_key;
// the constraint is not named explicitly). A unique violation of any other
// constraint is not a path conflict.
const pgMemoriesPathKey = "memories_store_id_path_key"

// sqliteMemoriesPathKey is how SQLite names the same constraint in a
// violation's message ("UNIQUE constraint failed: memories.store_id,
// memories.path"): SQLite reports no constraint name, only its columns.
const sqliteMemoriesPathKey = "memories.store_id, memories.path"

// PostgreSQL SQLSTATE codes and classes (Appendix A of its manual).
const (
	pgClassConnection      = "08" // connection_exception and its subclasses
	pgClassResources       = "53" // insufficient_resources: too_many_connections, out_of_memory, disk_full
	pgAdminShutdown        = "57P01"
	pgCrashShutdown        = "57P02"
	pgCannotConnectNow     = "57P03" // starting up, shutting down, in recovery
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgUniqueViolation      = "23505"
)

// sqlitePrimaryCode masks an extended result code down to its primary
// code (SQLITE_BUSY_SNAPSHOT to SQLITE_BUSY).
const sqlitePrimaryCode = 0xff

// unavailableClientReason is all a client is told of an unavailable
// database: the driver's text names hosts, users and databases.
const unavailableClientReason = "the database is unavailable; retry shortly"

// mapErr turns a driver error into a domain error where a caller may act:
// store.ErrUnavailable or store.ErrPathConflict (see above). A *store.Error
// and a context error pass through unchanged; anything else is wrapped as
// an internal database error. The driver error stays wrapped under an
// ErrUnavailable, for the server's log and errors.Is/As; the client is
// told only that the database is unavailable.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var se *store.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isPathKeyViolation(err) {
		return &store.Error{Kind: store.ErrPathConflict, Message: "the path is taken (concurrent write)"}
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %w", &store.Error{Kind: store.ErrUnavailable, Message: unavailableClientReason}, err)
	}
	return fmt.Errorf("database: %w", err)
}

// isPathKeyViolation reports a unique violation of the memories
// (store_id, path) constraint: on PostgreSQL by SQLSTATE and constraint
// name; on SQLite by extended result code and then the column list of the
// message, the only place SQLite names the constraint.
func isPathKeyViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == pgUniqueViolation && pe.ConstraintName == pgMemoriesPathKey
	}
	var le *sqlite.Error
	if errors.As(err, &le) {
		code := le.Code()
		if code != sqlite3.SQLITE_CONSTRAINT_UNIQUE && code != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			return false
		}
		return sqliteConstraintColumns(le.Error()) == sqliteMemoriesPathKey
	}
	return false
}

// sqliteConstraintColumns returns the column list of a SQLite
// UNIQUE/PRIMARY KEY violation message, as modernc.org/sqlite formats it:
// "constraint failed: UNIQUE constraint failed: t.a, t.b (2067)" gives
// "t.a, t.b" ("" for any other message).
func sqliteConstraintColumns(msg string) string {
	const marker = " constraint failed: "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return ""
	}
	cols := msg[i+len(marker):]
	if j := strings.LastIndex(cols, " ("); j >= 0 {
		cols = cols[:j]
	}
	return cols
}

// isUnavailable reports an error after which the database may serve the
// same request in a moment.
func isUnavailable(err error) bool {
	// Any failure to connect, whatever the cause (refused, DNS, TLS, the
	// server starting up, authentication after a credential rotation):
	// the database can't be reached now. Checked before *PgError, which a
	// ConnectError may wrap.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgUnavailable(pe.Code)
	}
	var le *sqlite.Error
	if errors.As(err, &le) {
		switch le.Code() & sqlitePrimaryCode { // SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED_SHAREDCACHE, ...
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
		return false
	}
	// A connection that died under a statement, or was found dead.
	if pgconn.SafeToRetry(err) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// pgUnavailable reports a SQLSTATE after which a retry may succeed: the
// connection or server went away, the server lacks resources, or the
// transaction was rolled back by a serialization failure or a deadlock.
func pgUnavailable(code string) bool {
	switch code {
	case pgAdminShutdown, pgCrashShutdown, pgCannotConnectNow, pgSerializationFailure, pgDeadlockDetected:
		return true
	}
	return strings.HasPrefix(code, pgClassConnection) || strings.HasPrefix(code, pgClassResources)
}
