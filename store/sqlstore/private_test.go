package sqlstore_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
)

// withUmask runs the rest of the test with the process umask set to m.
// The umask is process-wide: only a test that is not parallel may call it
// (parallel tests wait until every sequential one has returned).
func withUmask(t *testing.T, m int) {
	t.Helper()
	old := syscall.Umask(m)
	t.Cleanup(func() { syscall.Umask(old) })
}

// modes maps each file in dir to its permission bits.
func modes(t *testing.T, dir string) map[string]os.FileMode {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]os.FileMode{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.Mode().Perm()
	}
	return out
}

// TestSQLiteFilesPrivate: in a 0755 directory under umask 022, a new
// database and the -wal and -shm files SQLite makes as it is written are
// all 0600; a database an older memfs left 0644 (its WAL too) is made
// 0600 at open, with a warning.
func TestSQLiteFilesPrivate(t *testing.T) {
	withUmask(t, 0o022)
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "memfs.db")
	db := open(t, path, sqlstore.Options{})
	s, err := db.CreateStore(ctx, store.CreateStoreInput{Name: "private"})
	must(t, err)
	for _, p := range []string{"/a.md", "/b.md", "/c.md"} {
		_, err := db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: p, Content: "secret " + p, Actor: store.SessionActor("sesn_x")})
		must(t, err)
	}
	got := modes(t, dir)
	for _, name := range []string{"memfs.db", "memfs.db-wal", "memfs.db-shm"} {
		if _, ok := got[name]; !ok {
			t.Fatalf("no %s after writes (the check below would prove nothing): %v", name, got)
		}
	}
	for name, m := range got {
		if m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", name, m)
		}
	}
	must(t, db.Close())

	// A database made before: every file 0644 (a crash left its WAL).
	old := filepath.Join(t.TempDir(), "old.db")
	db2, err := sqlstore.Open(ctx, old, sqlstore.Options{})
	must(t, err)
	must(t, db2.Close())
	for _, p := range []string{old, old + "-wal"} {
		if err := os.WriteFile(p, nil, 0o600); p != old && err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log, hook := test.NewNullLogger()
	db3 := open(t, old, sqlstore.Options{Log: log})
	_, err = db3.CreateStore(ctx, store.CreateStoreInput{Name: "after"})
	must(t, err)
	for name, m := range modes(t, filepath.Dir(old)) {
		if m != 0o600 {
			t.Errorf("%s has mode %04o after the reopen, want 0600", name, m)
		}
	}
	warned := map[string]bool{}
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "open to other users") {
			warned[e.Data["file"].(string)] = true
		}
	}
	if !warned[old] || !warned[old+"-wal"] || len(warned) != 2 {
		t.Errorf("warnings for %v, want one for %s and one for its -wal", warned, old)
	}
}
