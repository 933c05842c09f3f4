package fs

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel keeps what it learnt of a mount for long (cacheTimeout for
// entries and attributes, FOPEN_KEEP_CACHE for pages across opens). These
// tests warm every cache first and check that each kind of change still
// shows: a remote change (Tree.Apply, as the sync engine makes it) through
// the notifier's invalidations, and a local one through the kernel's own
// bookkeeping. Without the invalidation the old state would show for five
// minutes, so each test would fail at its deadline.

// eventually polls cond until it holds or a deadline passes: an
// invalidation reaches the kernel from the notifier's goroutine, shortly
// after Apply returns.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after 5 s", what, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// contentIs is a condition: p reads as want and stat gives its size.
func contentIs(m *testMount, p, want string) func() (bool, string) {
	return func() (bool, string) {
		b, err := os.ReadFile(m.path(p))
		if err != nil {
			return false, err.Error()
		}
		var st unix.Stat_t
		if err := unix.Stat(m.path(p), &st); err != nil {
			return false, err.Error()
		}
		return string(b) == want && st.Size == int64(len(want)), "content " + string(b) + " size " + itoa(st.Size)
	}
}

// gone is a condition: stat p fails with ENOENT.
func gone(m *testMount, p string) func() (bool, string) {
	return func() (bool, string) {
		var st unix.Stat_t
		err := unix.Stat(m.path(p), &st)
		return errors.Is(err, syscall.ENOENT), "stat: " + errString(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}

// warm reads p twice and stats it: its entry, attributes and pages are
// then in the kernel's caches.
func warm(t *testing.T, m *testMount, p, want string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		if got := readMountFile(t, m.path(p)); got != want {
			t.Fatalf("%s reads %q, want %q", p, got, want)
		}
	}
	statT(t, m.path(p))
}

func TestMountCacheRemoteChangeVisible(t *testing.T) {
	m := mountTestTree(t, Options{}, loadedFiles()...)
	warm(t, m, "/a.md", "alpha\n")
	// An open reader sees it too: the pages it would read are dropped.
	f, err := os.Open(m.path("/a.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Same size: only dropped pages can show it (the size can't).
	if err := m.tr.Apply([]Change{{FileID: "mem_a", Path: "/a.md", Content: []byte("ALPHA\n")}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a remote change of the same size", contentIs(m, "/a.md", "ALPHA\n"))
	buf := make([]byte, 64)
	if k, err := f.ReadAt(buf, 0); string(buf[:k]) != "ALPHA\n" {
		t.Errorf("a handle opened before the change reads %q, %v", buf[:k], err)
	}

	// Longer, then shorter: the cached size must follow.
	for _, c := range []string{"alpha, now much longer\n", "a\n"} {
		if err := m.tr.Apply([]Change{{FileID: "mem_a", Path: "/a.md", Content: []byte(c)}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a remote change to "+itoa(int64(len(c)))+" bytes", contentIs(m, "/a.md", c))
	}
}

func TestMountCacheRemoteEntryChanges(t *testing.T) {
	m := mountTestTree(t, Options{}, loadedFiles()...)
	warm(t, m, "/d/b.md", "beta\n")
	warm(t, m, "/d/sub/c.md", "gamma\n")
	// A negative entry: the kernel remembers that /new.md doesn't exist.
	if _, err := os.Stat(m.path("/new.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat /new.md before it exists: %v", err)
	}

	if err := m.tr.Apply([]Change{
		{FileID: "mem_b", Path: "/d/b.md", Deleted: true},
		{FileID: "mem_c", Path: "/d/moved.md", Content: []byte("gamma moved\n")},
		{FileID: "mem_new", Path: "/new.md", Content: []byte("new\n")},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a remotely deleted file", gone(m, "/d/b.md"))
	eventually(t, "a remotely moved file's old name", gone(m, "/d/sub/c.md"))
	eventually(t, "a remotely moved file's new name", contentIs(m, "/d/moved.md", "gamma moved\n"))
	eventually(t, "a remotely created file over a negative entry", contentIs(m, "/new.md", "new\n"))
}

func TestMountCacheLocalChangeVisible(t *testing.T) {
	m := mountTestTree(t, Options{}, loadedFiles()...)
	warm(t, m, "/a.md", "alpha\n")

	// Written through a handle still open: a new open reads it at once.
	w, err := os.OpenFile(m.path("/a.md"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("ALPHA"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readMountFile(t, m.path("/a.md")); got != "ALPHA\n" {
		t.Errorf("a new open after a write through another handle reads %q", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// Another process truncates and rewrites it, and appends to it.
	m.mustSh(t, "printf 'by another process\n' > a.md")
	if got := readMountFile(t, m.path("/a.md")); got != "by another process\n" {
		t.Errorf("after another process rewrote it: %q", got)
	}
	m.mustSh(t, "printf 'more\n' >> a.md")
	if ok, got := contentIs(m, "/a.md", "by another process\nmore\n")(); !ok {
		t.Errorf("after another process appended: %s", got)
	}
	// And removes it: the entry this process cached goes with it.
	m.mustSh(t, "rm a.md")
	if ok, got := gone(m, "/a.md")(); !ok {
		t.Errorf("after another process removed it: %s", got)
	}
}
