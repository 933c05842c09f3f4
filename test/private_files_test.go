package test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// Private files (docs/formats.md; docs/operating.md, "memfs serve"): what memfs writes on disk (memories,
// keys, journals, conflicts, status sockets) is the user's private data,
// so no file it makes is open to group or others, whatever the umask and
// the directory around it.

// setUmask sets the process umask (inherited by the memfs processes the
// test starts) for the rest of the test. The umask is process-wide: a
// test that calls it must not be parallel (parallel tests wait until every
// sequential one has returned, so none runs meanwhile).
func setUmask(t *testing.T, m int) {
	t.Helper()
	old := syscall.Umask(m)
	t.Cleanup(func() { syscall.Umask(old) })
}

// openEntries walks root and lists every entry (root included) that group
// or others may access, with its mode, and every entry's name relative to
// root.
func openEntries(t *testing.T, root string) (open, all []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		all = append(all, rel)
		if fi.Mode().Perm()&0o077 != 0 {
			open = append(open, rel+" "+fi.Mode().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return open, all
}

// TestServeFilesPrivate: memfs serve with a data dir made 0755 beforehand,
// under umask 022, keeps the database, its WAL and shared-memory files and
// the generated admin key 0600, and warns once that the directory is open.
func TestServeFilesPrivate(t *testing.T) {
	setUmask(t, 0o022)
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startBare(t, dir)
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Options{BaseURL: srv.url, APIKey: strings.TrimSpace(string(key))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := cl.CreateStore(ctx, store.CreateStoreInput{Name: "private"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a.md", "/b.md"} {
		if _, err := cl.CreateMemory(ctx, st.ID, p, "private "+p); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want ...string) {
		t.Helper()
		open, all := openEntries(t, dir)
		t.Logf("%s: the data dir holds %v", when, all)
		for _, w := range want {
			if !slices.Contains(all, w) {
				t.Fatalf("%s: no %s in the data dir (%v): the check proves nothing", when, w, all)
			}
		}
		for _, e := range open {
			if e != ". drwxr-xr-x" { // the directory itself: the test made it so
				t.Errorf("%s: %s is open to other users", when, e)
			}
		}
	}
	check("while serving", "memfs.db", "memfs.db-wal", "memfs.db-shm", "admin.key")
	srv.stop(t)
	check("after a clean stop", "memfs.db", "admin.key")

	const warning = "the data directory is open to other users"
	if n := strings.Count(srv.out.String(), warning); n != 1 {
		t.Errorf("memfs serve warned %d times that %q, want once:\n%s", n, warning, srv.out)
	}
}

// TestStateDirPrivate: after a memfs mount session under umask 022 with a
// change uploaded and a conflict logged, nothing in its state dir (the
// journal, its lock, the conflict log, the status socket and their
// directories) is open to group or others: files 0600, directories 0700.
func TestStateDirPrivate(t *testing.T) {
	setUmask(t, 0o022)
	e := newMtEnv(t, map[string]string{"/c.md": "base\n"})
	m := e.mount()
	mtMustSh(t, m.Dir, "echo mine > c.md && echo new > n.md")
	c := e.memories()["/c.md"]
	theirs := "theirs\n"
	if _, err := e.cl.UpdateMemory(context.Background(), e.storeID, c.ID, store.UpdateMemoryInput{Content: &theirs}); err != nil {
		t.Fatal(err)
	}
	// The conflict comes from the change feed or from this pass's
	// precondition, whichever is first: the store wins either way.
	m.SyncNow(mtPassTimeout)
	m.WaitOutput(1, "conflict: the store's version won", mtPollTimeout)
	e.waitStore(map[string]string{"/c.md": "theirs\n", "/n.md": "new\n"})

	check := func(when string, want ...string) {
		t.Helper()
		open, all := openEntries(t, e.stateDir)
		t.Logf("%s: the state dir holds %v", when, all)
		for _, w := range want {
			if !slices.ContainsFunc(all, func(p string) bool { return p == w || strings.HasPrefix(p, w+"/") }) {
				t.Fatalf("%s: nothing at %s in the state dir (%v): the check proves nothing", when, w, all)
			}
		}
		for _, p := range open {
			t.Errorf("%s: %s is open to other users", when, p)
		}
	}
	check("while mounted", "stores/"+e.storeID, "conflicts", "run")
	mtStop(t, m)
	check("after the session", "stores/"+e.storeID, "conflicts")
	if sockets, _ := filepath.Glob(filepath.Join(e.stateDir, "run", "*.sock")); len(sockets) != 0 {
		t.Errorf("status sockets left after the session: %v", sockets)
	}
}
