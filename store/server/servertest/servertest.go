// Package servertest runs memfs serve's handler in-process on a fresh
// SQLite database, for the tests of the client, the CLI and the sync
// engine, which need a real server but not a process.
package servertest

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

// AdminKey is the admin key every test server accepts.
const AdminKey = "test-admin-key-0123456789"

// Server is a server on its own SQLite database.
type Server struct {
	*server.Server
	DB  *sqlstore.DB
	Dir string
}

// New builds a server on a fresh SQLite database in t.TempDir(). When the
// test ends, long polls are answered and the database is closed.
func New(t testing.TB) *Server {
	t.Helper()
	return NewWith(t, sqlstore.Options{})
}

// NewWith is New with database options (a memory cap, say); Log is set
// to a quiet logger.
func NewWith(t testing.TB, opts sqlstore.Options) *Server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	opts.Log = quiet
	db, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "memfs.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := server.EnsureAdminKey(ctx, db, AdminKey, dir); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Backend: db, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.BeginShutdown)
	return &Server{Server: srv, DB: db, Dir: dir}
}
