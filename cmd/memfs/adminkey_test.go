package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAdminKeyFileName: the data dir's own database keeps admin.key;
// every other database has a key file of its own, named after it, the
// same however the --db names it, with no secret of the URL in it.
func TestAdminKeyFileName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, dsn := range []string{"", filepath.Join(dir, "memfs.db"), "file:" + filepath.Join(dir, "memfs.db"), "sqlite://" + dir + "/./memfs.db"} {
		if p, _ := adminKeyFile(dir, dsn); p != filepath.Join(dir, "admin.key") {
			t.Errorf("adminKeyFile(%q) = %s, want %s/admin.key", dsn, p, dir)
		}
	}
	names := map[string]string{}
	for _, c := range []struct{ dsn, re string }{
		{"/srv/a/other.db", `^admin-other-[0-9a-f]{8}\.key$`},
		{"/srv/b/other.db", `^admin-other-[0-9a-f]{8}\.key$`},
		{"postgres://memfs:s3cret@db.example:5432/memfs?sslmode=disable", `^admin-postgres-memfs-[0-9a-f]{8}\.key$`},
		{"postgres://db.example:5432/other", `^admin-postgres-other-[0-9a-f]{8}\.key$`},
		{"postgres://db.example:5432/we%20ird%2F", `^admin-postgres-we_ird_-[0-9a-f]{8}\.key$`},
	} {
		p, name := adminKeyFile(dir, c.dsn)
		if filepath.Dir(p) != dir || !regexp.MustCompile(c.re).MatchString(filepath.Base(p)) {
			t.Errorf("adminKeyFile(%q) = %s, want %s/%s", c.dsn, p, dir, c.re)
		}
		if strings.Contains(p+name, "s3cret") {
			t.Errorf("adminKeyFile(%q) = %s, %s: shows the password", c.dsn, p, name)
		}
		if prev, ok := names[p]; ok {
			t.Errorf("%s and %s share the key file %s", prev, c.dsn, p)
		}
		names[p] = c.dsn
	}
	// The same database written another way has the same file.
	a, _ := adminKeyFile(dir, "postgres://memfs:s3cret@db.example:5432/memfs?sslmode=disable")
	b, _ := adminKeyFile(dir, "postgresql://other-user@db.example/memfs")
	if a != b {
		t.Errorf("one PostgreSQL database, two key files: %s and %s", a, b)
	}
}
