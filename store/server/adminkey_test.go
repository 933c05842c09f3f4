package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// TestEnsureAdminKeyFileNeverOverwrites: a key file is written once, for
// the database that has no admin key; after that it is reported only
// when its key opens the database, and never replaced.
func TestEnsureAdminKeyFileNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	open := func() *sqlstore.DB {
		db, err := sqlstore.Open(ctx, sqltest.SQLite(t), sqlstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	a := open()
	res, err := server.EnsureAdminKeyFile(ctx, a, "", keyFile)
	if err != nil || !res.Generated || res.KeyFile != keyFile {
		t.Fatalf("first EnsureAdminKeyFile: %+v, %v; want a key generated into %s", res, err, keyFile)
	}
	key, _ := os.ReadFile(keyFile)
	if res, err := server.EnsureAdminKeyFile(ctx, a, "", keyFile); err != nil || res.Generated || res.KeyFile != keyFile || res.NotThisDatabase != "" {
		t.Errorf("again on the same database: %+v, %v; want the file reported, nothing generated", res, err)
	}

	// Another database, with no admin key: refused, the file kept.
	b := open()
	if _, err := server.EnsureAdminKeyFile(ctx, b, "", keyFile); !errors.Is(err, server.ErrKeyFileNotThisDatabase) {
		t.Errorf("a database with no admin key and another's key file: %v, want ErrKeyFileNotThisDatabase", err)
	}
	// Another database with a key of its own: the file is not reported as its.
	if _, err := server.EnsureAdminKeyFile(ctx, b, "sk-memfs-admin-another-one-0123", ""); err != nil {
		t.Fatal(err)
	}
	if res, err := server.EnsureAdminKeyFile(ctx, b, "", keyFile); err != nil || res.KeyFile != "" || res.NotThisDatabase != keyFile {
		t.Errorf("a database with its own key and another's key file: %+v, %v; want NotThisDatabase", res, err)
	}
	if got, _ := os.ReadFile(keyFile); string(got) != string(key) {
		t.Errorf("the key file was rewritten")
	}
}
