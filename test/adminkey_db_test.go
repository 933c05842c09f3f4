package test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// generatedKeyRe finds the key file memfs serve says it generated.
var generatedKeyRe = regexp.MustCompile(`generated an admin key for (\S+); it is in (\S+) `)

// readKey reads a key file as a user would, with $(cat FILE).
func readKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func mustOpen(t *testing.T, url, key, what string) {
	t.Helper()
	if _, err := newServeAPI(url, key).call(context.Background(), "GET", "/v1/memory_stores", nil, nil); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestServeAdminKeyPerDatabase (docs/operating.md, "memfs serve", Admin
// key): a data dir that holds
// admin.key for its own database, served with --db OTHER, keeps that key:
// OTHER's generated key goes to a file named after OTHER, and both
// databases open with their own keys afterwards.
func TestServeAdminKeyPerDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startBare(t, dir)
	k1 := readKey(t, filepath.Join(dir, "admin.key"))
	mustOpen(t, first.url, k1, "the first database's generated key")
	first.stop(t)

	other := filepath.Join(t.TempDir(), "other.db")
	second := startBare(t, dir, "--db", other)
	m := generatedKeyRe.FindStringSubmatch(second.out.String())
	if m == nil {
		t.Fatalf("memfs serve --db %s did not say where it put its generated key:\n%s", other, second.out)
	}
	if m[1] != other || filepath.Dir(m[2]) != dir || !regexp.MustCompile(`^admin-other-[0-9a-f]{8}\.key$`).MatchString(filepath.Base(m[2])) {
		t.Errorf("generated the key of %s into %s; want %s/admin-other-HASH.key", m[1], m[2], dir)
	}
	if got := readKey(t, filepath.Join(dir, "admin.key")); got != k1 {
		t.Fatalf("memfs serve --db %s overwrote %s/admin.key", other, dir)
	}
	k2 := readKey(t, m[2])
	mustOpen(t, second.url, k2, "the second database's generated key")
	second.stop(t)

	again := startBare(t, dir)
	mustOpen(t, again.url, k1, "the first database's key after the second database was served")
	if !strings.Contains(again.out.String(), "the admin key is in "+filepath.Join(dir, "admin.key")) {
		t.Errorf("memfs serve does not say where its key is:\n%s", again.out)
	}
	again.stop(t)
	otherAgain := startBare(t, dir, "--db", other)
	mustOpen(t, otherAgain.url, k2, "the second database's key on its second start")
	if !strings.Contains(otherAgain.out.String(), "the admin key is in "+m[2]) {
		t.Errorf("memfs serve --db %s does not say where its key is:\n%s", other, otherAgain.out)
	}
	otherAgain.stop(t)
}

// TestServeAdminKeyFileNeverOverwritten: a key file that exists next to a
// database with no admin key (another database's, moved here) is not
// overwritten: memfs serve exits 1 saying which file, that it is not
// this database's, and how to proceed; the key still opens its own
// database.
func TestServeAdminKeyFileNeverOverwritten(t *testing.T) {
	t.Parallel()
	first := t.TempDir()
	srv := startBare(t, first)
	key := readKey(t, filepath.Join(first, "admin.key"))
	srv.stop(t)

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "admin.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MEMFS_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("memfs serve did not exit within a minute:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d (%v), want 1:\n%s", code, err, out.String())
	}
	for _, want := range []string{keyFile + " holds an admin key, but not one of the database " + filepath.Join(dir, "memfs.db"),
		"never overwrites", "--admin-key-file " + keyFile, "move " + keyFile + " away"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not say %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), key) {
		t.Errorf("the output shows the key:\n%s", out.String())
	}
	if got := readKey(t, keyFile); got != key {
		t.Fatalf("%s was overwritten", keyFile)
	}
	// What the message says to do works: the key opens this database too.
	withKey := startBare(t, dir, "--admin-key-file", keyFile)
	mustOpen(t, withKey.url, key, "the key given with --admin-key-file as the message says")
	withKey.stop(t)
	back := startBare(t, first)
	mustOpen(t, back.url, key, "the key in its own database")
	back.stop(t)
}

// TestServeAdminKeyPostgres: the same on PostgreSQL: a data dir whose
// admin.key opens its SQLite database, served with --db postgres://…,
// keeps admin.key; the PostgreSQL database's key goes to
// admin-postgres-<database>-<hash>.key, and no message shows the URL's
// password.
func TestServeAdminKeyPostgres(t *testing.T) {
	t.Parallel()
	dsn := sqltest.Postgres(t)
	dir := t.TempDir()
	first := startBare(t, dir)
	k1 := readKey(t, filepath.Join(dir, "admin.key"))
	first.stop(t)

	pg := startBare(t, dir, "--db", dsn)
	m := generatedKeyRe.FindStringSubmatch(pg.out.String())
	if m == nil {
		t.Fatalf("memfs serve --db postgres://… did not say where it put its generated key:\n%s", pg.out)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if filepath.Dir(m[2]) != dir || !regexp.MustCompile(`^admin-postgres-`+regexp.QuoteMeta(db)+`-[0-9a-f]{8}\.key$`).MatchString(filepath.Base(m[2])) {
		t.Errorf("generated the key into %s; want %s/admin-postgres-%s-HASH.key", m[2], dir, db)
	}
	if pw, ok := u.User.Password(); ok && strings.Contains(pg.out.String(), pw) {
		t.Errorf("the output shows the database password:\n%s", pg.out)
	}
	if got := readKey(t, filepath.Join(dir, "admin.key")); got != k1 {
		t.Fatalf("memfs serve --db postgres://… overwrote %s/admin.key", dir)
	}
	mustOpen(t, pg.url, readKey(t, m[2]), "the PostgreSQL database's generated key")
	pg.stop(t)
}
