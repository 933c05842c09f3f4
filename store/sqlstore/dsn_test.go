package sqlstore_test

import (
	"errors"
	"testing"

	"github.com/memfs/memfs/store/sqlstore"
)

// TestParseTarget: only a path, file: or sqlite: is a SQLite file and
// only postgres:// or postgresql:// is PostgreSQL; any other scheme, or a
// prefix that names no file, is ErrUnsupportedDSN (never a SQLite file
// called "mysql:/x").
func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		dsn      string
		postgres bool
		path     string // "" with !postgres: refused
	}{
		{dsn: "/var/lib/memfs/memfs.db", path: "/var/lib/memfs/memfs.db"},
		{dsn: "memfs.db", path: "memfs.db"},
		{dsn: "./mysql://x", path: "./mysql://x"},
		{dsn: "file:/srv/m.db?mode=rwc", path: "/srv/m.db"},
		{dsn: "file:///srv/m.db", path: "/srv/m.db"},
		{dsn: "file://localhost/srv/m.db", path: "/srv/m.db"},
		{dsn: "sqlite:/srv/m.db", path: "/srv/m.db"},
		{dsn: "SQLite:rel.db", path: "rel.db"},
		{dsn: "sqlite:///srv/m.db", path: "/srv/m.db"},
		{dsn: "postgres://u:p@h/db", postgres: true},
		{dsn: "postgresql://h:5432/db?sslmode=disable", postgres: true},
		{dsn: "mysql://x"},
		{dsn: "mysql:/x"},
		{dsn: "postgres:db"},
		{dsn: "http://h/x"},
		{dsn: "file:"},
		{dsn: "sqlite:?mode=memory"},
	} {
		got, err := sqlstore.ParseTarget(c.dsn)
		switch {
		case c.postgres:
			if err != nil || !got.Postgres || got.DSN != c.dsn {
				t.Errorf("ParseTarget(%q) = %+v, %v; want PostgreSQL", c.dsn, got, err)
			}
		case c.path != "":
			if err != nil || got.Postgres || got.Path != c.path {
				t.Errorf("ParseTarget(%q) = %+v, %v; want SQLite %q", c.dsn, got, err, c.path)
			}
		default:
			if !errors.Is(err, sqlstore.ErrUnsupportedDSN) {
				t.Errorf("ParseTarget(%q) = %+v, %v; want ErrUnsupportedDSN", c.dsn, got, err)
			}
		}
	}
}

// TestTargetName: a database's name holds no secret and is the same for
// the same database written differently.
func TestTargetName(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:secret@db.example:5433/memfs?sslmode=disable": "postgres://db.example:5433/memfs",
		"postgresql://db.example/memfs":                             "postgres://db.example:5432/memfs",
		"/srv/m.db":                                                 "/srv/m.db",
		"sqlite:///srv/./m.db":                                      "/srv/m.db",
	} {
		tg, err := sqlstore.ParseTarget(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.Name(); got != want {
			t.Errorf("ParseTarget(%q).Name() = %q, want %q", dsn, got, want)
		}
	}
}
