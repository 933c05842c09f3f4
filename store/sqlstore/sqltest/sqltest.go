// Package sqltest gives tests a fresh database for package sqlstore: a
// SQLite file in a temporary directory, or a PostgreSQL database of its own
// on the server named by MEMFS_TEST_POSTGRES_URL.
//
// PostgreSQL tests skip when MEMFS_TEST_POSTGRES_URL is unset, except in CI
// (CI=true), where a missing database fails the test: CI must never pass
// by skipping them. test/run-tests.sh starts a throwaway cluster and sets
// the variable.
package sqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// PostgresURLEnv names the environment variable holding the URL of a
// PostgreSQL server (postgres://user@host:port/db?sslmode=disable) whose
// user may create and drop databases.
const PostgresURLEnv = "MEMFS_TEST_POSTGRES_URL"

// adminTimeout bounds CREATE/DROP DATABASE.
const adminTimeout = 30 * time.Second

// SQLite returns the path of a new SQLite database file (not yet created)
// in a directory removed when the test ends.
func SQLite(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "memfs.db")
}

// PostgresBaseURL returns MEMFS_TEST_POSTGRES_URL, skipping the test when
// it is unset (failing it when CI=true).
func PostgresBaseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresURLEnv)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(PostgresURLEnv + " must be set in CI")
		}
		t.Skip("PostgreSQL tests skipped: " + PostgresURLEnv + " is unset (bash test/run-tests.sh starts a throwaway cluster and sets it)")
	}
	return base
}

// Postgres creates a database of its own for this test on the server at
// MEMFS_TEST_POSTGRES_URL and returns its URL. The database is dropped
// (WITH (FORCE), so open connections don't block it) when the test ends;
// close what uses it in a t.Cleanup registered after this call, which runs
// first.
func Postgres(t testing.TB) string {
	t.Helper()
	base := PostgresBaseURL(t)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s=%q is not a postgres:// URL", PostgresURLEnv, base)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "memfs_t_" + hex.EncodeToString(b[:])
	admin(t, base, "CREATE DATABASE "+name)
	t.Cleanup(func() { admin(t, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

// admin runs one statement on the server's base database.
func admin(t testing.TB, base, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", PostgresURLEnv, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
