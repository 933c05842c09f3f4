package syncqueue

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// addConflict adds a conflict for path with content at time at (zero: now).
func addConflict(t *testing.T, l *ConflictLog, path string, content []byte, at time.Time) Conflict {
	t.Helper()
	c, err := l.Add(Conflict{StoreID: "memstore_1", Path: path, LocalSHA: "local-" + path, StoreSHA: "store-" + path,
		StoreMemoryID: "mem_1", Reason: "changed here and in the store", Time: at}, content)
	if err != nil {
		t.Fatalf("Add(%s): %v", path, err)
	}
	return c
}

// listedPaths is the paths of the listed conflicts, in List's order.
func listedPaths(t *testing.T, l *ConflictLog) []string {
	t.Helper()
	all, err := l.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []string
	for _, c := range all {
		out = append(out, c.Path)
	}
	return out
}

func TestConflictLogRoundTrip(t *testing.T) {
	state := t.TempDir()
	l := OpenConflictLog(state, ConflictRetention{})
	if got, err := l.List(); err != nil || len(got) != 0 {
		t.Fatalf("List of a state dir without conflicts = %v, %v; want none, no error", got, err)
	}
	// Bytes that are not UTF-8, a NUL, a CR and no final newline: kept exactly.
	content := []byte("mine\x00\xff\xfe\r\nlast line \xc3")
	in := Conflict{StoreID: "memstore_1", Path: "/notes/ä b.md", LocalSHA: "aaa", StoreSHA: "bbb", StoreMemoryID: "mem_9", Reason: "changed here and in the store"}
	before := time.Now().UTC()
	c, err := l.Add(in, content)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == "" || c.Size != len(content) || c.Time.Before(before.Add(-time.Second)) || c.Time.After(time.Now().Add(time.Second)) {
		t.Errorf("Add returned %+v: want an id, size %d, a time of now", c, len(content))
	}
	// An empty conflict (the local side was emptied) is a conflict too.
	empty := addConflict(t, l, "/empty.md", nil, time.Time{})

	all, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("List = %+v, want 2 conflicts", all)
	}
	got, gotContent, err := l.Get(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotContent, content) {
		t.Errorf("Get content = %q, want %q", gotContent, content)
	}
	want := in
	want.ID, want.Time, want.Size = c.ID, c.Time, len(content)
	if !got.Time.Equal(want.Time) {
		t.Errorf("Get time = %v, want %v", got.Time, want.Time)
	}
	got.Time = want.Time
	if got != want {
		t.Errorf("Get = %+v\nwant  %+v", got, want)
	}
	if i := slices.IndexFunc(all, func(x Conflict) bool { return x.ID == c.ID }); i < 0 || all[i].Path != in.Path || all[i].LocalSHA != "aaa" {
		t.Errorf("List = %+v, want it to hold %s", all, c.ID)
	}
	if _, b, err := l.Get(empty.ID); err != nil || len(b) != 0 {
		t.Errorf("Get(empty) = %q, %v; want no bytes", b, err)
	}

	// A second log over the same state dir (another process, memfs
	// conflicts) sees the same.
	other := OpenConflictLog(state, ConflictRetention{})
	if _, b, err := other.Get(c.ID); err != nil || !bytes.Equal(b, content) {
		t.Errorf("Get through another ConflictLog = %q, %v", b, err)
	}
	// Files are private: a conflict holds someone's content.
	fi, err := os.Stat(filepath.Join(ConflictDir(state), c.ID+".content"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("conflict content file: %v, %v; want mode 0600", fi, err)
	}
	if _, _, err := l.Get("20200101T000000000Z-00000000"); err == nil {
		t.Error("Get of an id that does not exist succeeded")
	}
}

func TestConflictIDsSortByTime(t *testing.T) {
	l := OpenConflictLog(t.TempDir(), ConflictRetention{})
	now := time.Now().UTC()
	// Added out of order, within one second and across days, hours and
	// milliseconds: ids and List order follow the times.
	times := map[string]time.Time{
		"/c.md": now.Add(-time.Millisecond),
		"/a.md": now.Add(-49 * time.Hour),
		"/d.md": now,
		"/b.md": now.Add(-2 * time.Hour),
		"/e.md": now.Add(-999 * time.Millisecond),
	}
	ids := map[string]string{}
	for _, p := range []string{"/d.md", "/b.md", "/e.md", "/a.md", "/c.md"} {
		ids[p] = addConflict(t, l, p, []byte(p), times[p]).ID
	}
	want := []string{"/a.md", "/b.md", "/e.md", "/c.md", "/d.md"}
	if got := listedPaths(t, l); !slices.Equal(got, want) {
		t.Errorf("List order = %v, want %v (by time)", got, want)
	}
	var sorted []string
	for _, p := range want {
		sorted = append(sorted, ids[p])
	}
	if !slices.IsSorted(sorted) {
		t.Errorf("ids in time order are not sorted: %v", sorted)
	}
	for _, id := range sorted {
		// Ids are file names and command-line arguments: no separators,
		// no dots, no spaces.
		if strings.ContainsAny(id, "/\\. \t") {
			t.Errorf("id %q holds a separator, a dot or a space", id)
		}
	}
}

func TestConflictIncompleteNotListed(t *testing.T) {
	state := t.TempDir()
	l := OpenConflictLog(state, ConflictRetention{})
	done := addConflict(t, l, "/done.md", []byte("x"), time.Time{})
	// A crash between the two writes leaves the content without its .json.
	dir := ConflictDir(state)
	if err := os.WriteFile(filepath.Join(dir, "20990101T000000000Z-deadbeef.content"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	// And a temporary file of the durable writer.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-something"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := l.List()
	if err != nil {
		t.Fatalf("List with an incomplete conflict: %v", err)
	}
	if len(all) != 1 || all[0].ID != done.ID {
		t.Errorf("List = %+v, want only %s", all, done.ID)
	}
	if _, _, err := l.Get("20990101T000000000Z-deadbeef"); err == nil {
		t.Error("Get of an incomplete conflict succeeded")
	}
}

func TestConflictRetention(t *testing.T) {
	day := 24 * time.Hour
	now := time.Now().UTC()

	t.Run("MaxAge", func(t *testing.T) {
		l := OpenConflictLog(t.TempDir(), ConflictRetention{MaxAge: 10 * day, MinAge: day, MaxCount: 100})
		addConflict(t, l, "/old.md", []byte("o"), now.Add(-5*day))
		addConflict(t, l, "/new.md", []byte("n"), now.Add(-2*day))
		if got := listedPaths(t, l); len(got) != 2 {
			t.Fatalf("before the age limit: %v, want both", got)
		}
		l.Prune(now.Add(6 * day)) // old is 11 days old, new 8
		if got := listedPaths(t, l); !slices.Equal(got, []string{"/new.md"}) {
			t.Errorf("after MaxAge: %v, want [/new.md]", got)
		}
		// Add prunes too: a conflict added already older than MaxAge goes.
		addConflict(t, l, "/ancient.md", []byte("a"), now.Add(-11*day))
		if got := listedPaths(t, l); !slices.Equal(got, []string{"/new.md"}) {
			t.Errorf("after adding an expired conflict: %v, want [/new.md]", got)
		}
		if left, _ := os.ReadDir(l.dir); len(left) != 2 {
			t.Errorf("the conflict dir holds %d files, want 2 (the .json and .content of /new.md): pruning left files behind", len(left))
		}
	})

	t.Run("MaxCount", func(t *testing.T) {
		l := OpenConflictLog(t.TempDir(), ConflictRetention{MaxAge: 365 * day, MinAge: day, MaxCount: 3})
		for i, p := range []string{"/1.md", "/2.md", "/3.md", "/4.md", "/5.md"} {
			addConflict(t, l, p, []byte(p), now.Add(-time.Duration(10-i)*day))
		}
		// Over MaxCount and old enough: the oldest go first.
		if got := listedPaths(t, l); !slices.Equal(got, []string{"/3.md", "/4.md", "/5.md"}) {
			t.Errorf("after 5 adds with MaxCount 3: %v, want the 3 newest", got)
		}
	})

	t.Run("MinAgeBeatsMaxCount", func(t *testing.T) {
		l := OpenConflictLog(t.TempDir(), ConflictRetention{MaxAge: 30 * day, MinAge: 7 * day, MaxCount: 2})
		addConflict(t, l, "/old.md", []byte("o"), now.Add(-8*day))
		var young []string
		for i := range 4 {
			p := "/young" + string(rune('a'+i)) + ".md"
			young = append(young, p)
			addConflict(t, l, p, []byte(p), now.Add(-time.Duration(4-i)*time.Hour))
		}
		// 5 conflicts, MaxCount 2: the old one goes, the 4 young ones stay
		// although that is still over the count.
		if got := listedPaths(t, l); !slices.Equal(got, young) {
			t.Errorf("with 4 conflicts younger than MinAge and MaxCount 2: %v, want %v", got, young)
		}
		// A week later they are old enough: down to the 2 newest.
		l.Prune(now.Add(7*day + time.Hour))
		if got := listedPaths(t, l); !slices.Equal(got, young[2:]) {
			t.Errorf("once old enough: %v, want %v", got, young[2:])
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		l := OpenConflictLog(t.TempDir(), ConflictRetention{})
		if l.ret.MaxAge != 30*day || l.ret.MaxCount != 1000 || l.ret.MinAge != 7*day {
			t.Errorf("default retention = %+v, want 30 days, 1,000, 7 days (as memfs conflicts --help says)", l.ret)
		}
	})
}

func TestConflictGetRefusesPathTraversal(t *testing.T) {
	state := t.TempDir()
	l := OpenConflictLog(state, ConflictRetention{})
	addConflict(t, l, "/a.md", []byte("a"), time.Time{})
	// A file outside the conflict dir that a traversal would reach.
	secret := Conflict{ID: "secret", Path: "/secret"}
	if err := os.WriteFile(filepath.Join(state, "secret.json"), []byte(`{"id":"secret","path":"/secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "secret.content"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		"", "../secret", "..", ".", "../../etc/passwd", "/etc/passwd", "a/../../secret",
		`..\secret`, ".hidden", "./x", "..%2fsecret/..",
	} {
		c, content, err := l.Get(id)
		if err == nil {
			t.Errorf("Get(%q) = %+v, %q; want an error", id, c, content)
		}
		if c.ID == secret.ID || bytes.Equal(content, []byte("secret")) {
			t.Errorf("Get(%q) read a file outside the conflict log", id)
		}
	}
}
