package fs

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/store"
)

func TestCheckNameLimits(t *testing.T) {
	path19 := "/" + strings.TrimSuffix(strings.Repeat("d/", 19), "/")
	path20 := path19 + "/d"
	long1019 := strings.Repeat("/"+strings.Repeat("p", 255), 3) + "/" + strings.Repeat("p", 250)
	tests := []struct {
		name   string
		parent string
		child  string
		dir    bool
		want   error
	}{
		{"plain file", "/", "a.md", false, nil},
		{"name of 255 bytes", "/", strings.Repeat("n", 255), false, nil},
		{"name of 256 bytes", "/", strings.Repeat("n", 256), false, ErrNameTooLong},
		{"path of 1024 bytes", long1019, "pppp", false, nil},
		{"path of 1025 bytes", long1019, "ppppp", false, ErrNameTooLong},
		{"dir path of 1025 bytes", long1019, "ppppp", true, ErrNameTooLong},
		{"file at depth 20", path19, "f.md", false, nil},
		{"dir at depth 19", "/" + strings.TrimSuffix(strings.Repeat("d/", 18), "/"), "d", true, nil},
		{"dir at depth 20", path19, "d", true, ErrNameTooLong},
		{"file at depth 21", path20, "f.md", false, ErrNameTooLong},
		{"control char", "/", "a\x01b", false, ErrInvalidName},
		{"newline", "/", "a\nb", false, ErrInvalidName},
		{"line separator U+2028", "/", "a\u2028b", false, ErrInvalidName},
		{"paragraph separator U+2029", "/", "a\u2029b", false, ErrInvalidName},
		{"not NFC", "/", "e\u0301.md", false, ErrInvalidName},
		{"NFC é", "/", "\u00e9.md", false, nil},
		{"format char U+200B", "/", "a\u200bb", false, ErrInvalidName},
		{"invalid UTF-8", "/", "a\xffb", false, ErrInvalidName},
		{"dot", "/", ".", true, ErrInvalidName},
		{"dotdot", "/", "..", true, ErrInvalidName},
		{"empty", "/", "", false, ErrInvalidName},
		{"slash", "/", "a/b", false, ErrInvalidName},
		{"case kept", "/", "Notes.md", false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := checkName(tc.parent, tc.child, tc.dir)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("checkName(%q, %q, dir=%v) = %v, want %v", tc.parent, tc.child, tc.dir, err, tc.want)
			}
			if err == nil {
				if want := strings.TrimSuffix(tc.parent, "/") + "/" + tc.child; p != want {
					t.Errorf("path %q, want %q", p, want)
				}
				if len(p) > store.MaxPathBytes {
					t.Errorf("accepted a path of %d bytes", len(p))
				}
			}
		})
	}
}

func TestTreeNameLimits(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	long := strings.Repeat("p", 255)
	longDirs := treeMkdirAll(t, tr, "/"+long+"/"+long+"/"+long+"/"+long[:250]) // 1019 bytes
	deep19 := treeMkdirAll(t, tr, "/"+strings.TrimSuffix(strings.Repeat("d/", 19), "/"))
	j.take()
	tests := []struct {
		name   string
		parent uint64
		child  string
		dir    bool
		want   error
	}{
		{"create name >255 bytes", RootIno, strings.Repeat("n", 256), false, ErrNameTooLong},
		{"mkdir name >255 bytes", RootIno, strings.Repeat("n", 256), true, ErrNameTooLong},
		{"create path >1024 bytes", longDirs, "xxxxx", false, ErrNameTooLong},
		{"mkdir path >1024 bytes", longDirs, "xxxxx", true, ErrNameTooLong},
		{"mkdir at depth 20", deep19, "d20", true, ErrNameTooLong},
		{"create control char", RootIno, "a\tb.md", false, ErrInvalidName},
		{"create U+2028", RootIno, "a\u2028b.md", false, ErrInvalidName},
		{"create non-NFC", RootIno, "e\u0301.md", false, ErrInvalidName},
		{"create format char U+200B", RootIno, "a\u200b.md", false, ErrInvalidName},
		{"mkdir non-NFC", RootIno, "e\u0301", true, ErrInvalidName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := treeSnapshot(tr)
			var err error
			if tc.dir {
				_, err = tr.Mkdir(tc.parent, tc.child, 0o755, testOwner)
			} else {
				_, err = tr.Create(tc.parent, tc.child, 0o644, testOwner)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			wantTree(t, tr, before)
		})
	}
	// The limits are exact: the longest path and the deepest file work.
	a, err := tr.Create(longDirs, "xxxx", 0o644, testOwner)
	if err != nil {
		t.Fatalf("create of a 1024-byte path: %v", err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	a, err = tr.Create(deep19, "f.md", 0o644, testOwner)
	if err != nil {
		t.Fatalf("create at depth 20: %v", err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	for _, op := range j.take() {
		if err := store.ValidatePath(op.Path); err != nil {
			t.Errorf("an invalid path reached the journal: %v", err)
		}
	}
}

func TestTreeCaseSensitive(t *testing.T) {
	tr, _ := newTestTree(t, Options{})
	treeWriteFile(t, tr, "/Notes.md", "upper")
	treeWriteFile(t, tr, "/notes.md", "lower")
	wantTree(t, tr, map[string]string{"/Notes.md": "upper", "/notes.md": "lower"})
}

// The size limit behaves like a file-size limit: a write that starts at or
// past it fails with EFBIG and changes nothing; one that crosses it writes
// up to it and returns the short count; a warning names the file once.
func TestTreeWriteTooLarge(t *testing.T) {
	l, hook := logtest.NewNullLogger()
	tr, j := newTestTree(t, Options{Log: l})
	full := bytes.Repeat([]byte("x"), store.MaxContentBytes)
	ino := treeWriteFile(t, tr, "/full.md", string(full))
	j.take()
	refused := []struct {
		name string
		data []byte
		off  int64
	}{
		{"append one byte to a full file", []byte("y"), store.MaxContentBytes},
		{"far offset", []byte("y"), 1 << 20},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			before := treeSnapshot(tr)
			if n, err := tr.Write(ino, tc.data, tc.off); !errors.Is(err, ErrTooLarge) || n != 0 {
				t.Fatalf("write: %d, %v; want 0, %v", n, err, ErrTooLarge)
			}
			wantTree(t, tr, before)
			if err := tr.Commit(ino); err != nil {
				t.Fatal(err)
			}
			wantOps(t, j) // nothing changed, nothing to journal
		})
	}
	if n := len(hook.AllEntries()); n != 1 || !strings.Contains(hook.LastEntry().Message, "102,400") || hook.LastEntry().Data["path"] != "/full.md" {
		t.Fatalf("warnings: %d, last %v; want one naming /full.md and the limit", n, hook.LastEntry())
	}
	t.Run("negative offset", func(t *testing.T) {
		if n, err := tr.Write(ino, []byte("y"), -1); !errors.Is(err, ErrInvalidArg) || n != 0 {
			t.Fatalf("write: %d, %v; want 0, %v", n, err, ErrInvalidArg)
		}
	})
	t.Run("crossing the limit is a short write", func(t *testing.T) {
		small := treeWriteFile(t, tr, "/small.md", "small")
		j.take()
		if n, err := tr.Write(small, []byte("yy"), store.MaxContentBytes-1); err != nil || n != 1 {
			t.Fatalf("write straddling the limit: %d, %v; want 1, nil", n, err)
		}
		if n, err := tr.Write(small, bytes.Repeat([]byte("z"), store.MaxContentBytes+1), 0); err != nil || n != store.MaxContentBytes {
			t.Fatalf("one write too large: %d, %v; want %d, nil", n, err, store.MaxContentBytes)
		}
		if a, _ := tr.GetAttr(small); a.Size != store.MaxContentBytes {
			t.Fatalf("size after the short writes: %d", a.Size)
		}
		if err := tr.Commit(small); err != nil {
			t.Fatal(err)
		}
		wantOps(t, j, putOp(treeFileID(t, tr, "/small.md"), "/small.md", strings.Repeat("z", store.MaxContentBytes)))
		sz := int64(store.MaxContentBytes + 1)
		if _, err := tr.SetAttr(small, SetAttrIn{Size: &sz}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("truncate past the limit: %v, want %v", err, ErrTooLarge)
		}
	})
}

func TestTreeNoSpaceAtMaxFiles(t *testing.T) {
	tr, j := newTestTree(t, Options{MaxFiles: 3})
	for _, p := range []string{"/a.md", "/b.md", "/d/c.md"} {
		treeWriteFile(t, tr, p, p)
	}
	if s := tr.StatFS(); s.Files != 3 || s.FilesFree != 0 {
		t.Errorf("statfs files %d free %d, want 3 and 0 (the marker doesn't count)", s.Files, s.FilesFree)
	}
	j.take()
	if _, err := tr.Create(RootIno, "e.md", 0o644, testOwner); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("create at the cap: %v, want %v", err, ErrNoSpace)
	}
	// A directory takes no memory; renames and rewrites still work.
	if _, err := tr.Mkdir(RootIno, "dir", 0o755, testOwner); err != nil {
		t.Errorf("mkdir at the cap: %v", err)
	}
	if err := tr.Rename(RootIno, "a.md", RootIno, "b.md", 0); err != nil {
		t.Errorf("rename over a file at the cap: %v", err)
	}
	j.take()
	a, err := tr.Create(RootIno, "e.md", 0o644, testOwner)
	if err != nil {
		t.Fatalf("create after a file went: %v", err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Create(RootIno, "f.md", 0o644, testOwner); !errors.Is(err, ErrNoSpace) {
		t.Errorf("create at the cap again: %v, want %v", err, ErrNoSpace)
	}
}

func TestTreeStatFSCountsBytes(t *testing.T) {
	tr, _ := newTestTree(t, Options{MaxFiles: 10})
	s0 := tr.StatFS()
	if s0.Bytes != 10*store.MaxContentBytes || s0.BytesFree != s0.Bytes || s0.FilesFree != 10 {
		t.Fatalf("empty tree statfs %+v", s0)
	}
	ino := treeWriteFile(t, tr, "/a.md", strings.Repeat("a", 1000))
	if s := tr.StatFS(); s.BytesFree != s0.Bytes-1000 || s.FilesFree != 9 {
		t.Errorf("after a 1000-byte file: %+v", s)
	}
	sz := int64(10)
	if _, err := tr.SetAttr(ino, SetAttrIn{Size: &sz}); err != nil {
		t.Fatal(err)
	}
	if s := tr.StatFS(); s.BytesFree != s0.Bytes-10 {
		t.Errorf("after truncating to 10 bytes: %+v", s)
	}
}

func TestTreeMarkerFile(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	a, err := tr.Lookup(RootIno, MarkerName)
	if err != nil {
		t.Fatal(err)
	}
	want := "version 1\n" + testStoreID
	if got := treeRead(t, tr, a.Ino); got != want {
		t.Errorf("marker content %q, want %q", got, want)
	}
	if a.Size != int64(len(want)) || a.Dir || a.Mode != 0o444 {
		t.Errorf("marker attr %+v", a)
	}
	sz := int64(0)
	mode := uint32(0o644)
	treeWriteFile(t, tr, "/a.md", "a")
	j.take()
	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"open for write", func() error { return tr.Open(a.Ino, true, false) }, ErrNotPermit},
		{"open with O_TRUNC", func() error { return tr.Open(a.Ino, false, true) }, ErrNotPermit},
		{"write", func() error { _, err := tr.Write(a.Ino, []byte("x"), 0); return err }, ErrNotPermit},
		{"truncate", func() error { _, err := tr.SetAttr(a.Ino, SetAttrIn{Size: &sz}); return err }, ErrNotPermit},
		{"chmod", func() error { _, err := tr.SetAttr(a.Ino, SetAttrIn{Mode: &mode}); return err }, ErrNotPermit},
		{"unlink", func() error { return tr.Unlink(RootIno, MarkerName) }, ErrNotPermit},
		{"rename away", func() error { return tr.Rename(RootIno, MarkerName, RootIno, "m", 0) }, ErrNotPermit},
		{"rename over", func() error { return tr.Rename(RootIno, "a.md", RootIno, MarkerName, 0) }, ErrNotPermit},
		{"create over", func() error { _, err := tr.Create(RootIno, MarkerName, 0o644, testOwner); return err }, ErrExist},
		{"rmdir", func() error { return tr.Rmdir(RootIno, MarkerName) }, ErrNotDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
			if err := tr.Commit(a.Ino); err != nil {
				t.Errorf("close of the marker: %v", err)
			}
			wantOps(t, j)
			wantTree(t, tr, map[string]string{"/a.md": "a"})
		})
	}
	// Reading it is fine, and it is never journaled.
	if err := tr.Open(a.Ino, false, false); err != nil {
		t.Errorf("open the marker for reading: %v", err)
	}
	tr.Release(a.Ino)
	if s := tr.StatFS(); s.FilesFree != uint64(store.MaxMemoriesLimit-1) {
		t.Errorf("files free %d, want %d: the marker is not a memory", s.FilesFree, store.MaxMemoriesLimit-1)
	}
}

func TestTreeReadOnlyRefusesEveryChange(t *testing.T) {
	tr, _ := newTestTree(t, Options{ReadOnly: true})
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	tr.Load([]File{
		{FileID: "mem_a", Path: "/a.md", Content: []byte("alpha"), Mtime: mtime},
		{FileID: "mem_b", Path: "/d/b.md", Content: []byte("beta"), Mtime: mtime},
	})
	mkdirEmpty := func() error { _, err := tr.Mkdir(RootIno, "x", 0o755, testOwner); return err }
	a := inoOf(t, tr, "/a.md")
	d := inoOf(t, tr, "/d")
	sz := int64(0)
	mode := uint32(0o600)
	now := time.Now()
	tests := []struct {
		name string
		op   func() error
	}{
		{"create", func() error { _, err := tr.Create(RootIno, "n.md", 0o644, testOwner); return err }},
		{"mkdir", mkdirEmpty},
		{"unlink", func() error { return tr.Unlink(RootIno, "a.md") }},
		{"rmdir", func() error { return tr.Rmdir(RootIno, "d") }},
		{"rename", func() error { return tr.Rename(RootIno, "a.md", RootIno, "z.md", 0) }},
		{"rename dir", func() error { return tr.Rename(RootIno, "d", RootIno, "e", 0) }},
		{"open for write", func() error { return tr.Open(a, true, false) }},
		{"open O_TRUNC", func() error { return tr.Open(a, false, true) }},
		{"write", func() error { _, err := tr.Write(a, []byte("x"), 0); return err }},
		{"truncate", func() error { _, err := tr.SetAttr(a, SetAttrIn{Size: &sz}); return err }},
		{"chmod", func() error { _, err := tr.SetAttr(a, SetAttrIn{Mode: &mode}); return err }},
		{"chmod dir", func() error { _, err := tr.SetAttr(d, SetAttrIn{Mode: &mode}); return err }},
		{"utimens", func() error { _, err := tr.SetAttr(a, SetAttrIn{Mtime: &now}); return err }},
		{"unlink marker", func() error { return tr.Unlink(RootIno, MarkerName) }},
	}
	want := map[string]string{"/a.md": "alpha", "/d/": "", "/d/b.md": "beta"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrReadOnly) {
				t.Errorf("%v, want %v", err, ErrReadOnly)
			}
			wantTree(t, tr, want)
		})
	}
	attr, err := tr.GetAttr(a)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Mode != 0o644 || !attr.Mtime.Equal(mtime) {
		t.Errorf("attr changed: mode %o mtime %v", attr.Mode, attr.Mtime)
	}
	// Reads, and the close and fsync of a reader, work.
	if err := tr.Open(a, false, false); err != nil {
		t.Fatal(err)
	}
	if got := treeRead(t, tr, a); got != "alpha" {
		t.Errorf("read %q", got)
	}
	if err := tr.Commit(a); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := tr.Fsync(a); err != nil {
		t.Errorf("fsync: %v", err)
	}
	tr.Release(a)
}

func TestTreeFreeze(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	h := treeWriteFile(t, tr, "/open.md", "before")
	treeWriteFile(t, tr, "/other.md", "other")
	treeMkdirAll(t, tr, "/d")
	id := treeFileID(t, tr, "/open.md")
	if err := tr.Open(h, true, false); err != nil {
		t.Fatal(err)
	}
	j.take()

	tr.Freeze()
	other := inoOf(t, tr, "/other.md")
	grow := int64(100)
	tests := []struct {
		name string
		op   func() error
	}{
		{"create", func() error { _, err := tr.Create(RootIno, "n.md", 0o644, testOwner); return err }},
		{"mkdir", func() error { _, err := tr.Mkdir(RootIno, "x", 0o755, testOwner); return err }},
		{"unlink", func() error { return tr.Unlink(RootIno, "other.md") }},
		{"rmdir", func() error { return tr.Rmdir(RootIno, "d") }},
		{"rename", func() error { return tr.Rename(RootIno, "other.md", RootIno, "z.md", 0) }},
		{"open for write", func() error { return tr.Open(other, true, false) }},
		{"open O_TRUNC", func() error { return tr.Open(other, false, true) }},
		{"truncate", func() error { _, err := tr.SetAttr(other, SetAttrIn{Size: &grow}); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrReadOnly) {
				t.Errorf("%v, want %v", err, ErrReadOnly)
			}
		})
	}
	wantOps(t, j)
	// The handle opened before teardown still writes, and its close is journaled.
	if _, err := tr.Write(h, []byte("AFTER!"), 0); err != nil {
		t.Fatalf("write through an open handle after Freeze: %v", err)
	}
	if err := tr.Commit(h); err != nil {
		t.Fatalf("close after Freeze: %v", err)
	}
	wantOps(t, j, putOp(id, "/open.md", "AFTER!"))
	tr.Release(h)
	// Reads keep working.
	if err := tr.Open(other, false, false); err != nil {
		t.Errorf("open for reading after Freeze: %v", err)
	}
	tr.Release(other)
	wantTree(t, tr, map[string]string{"/open.md": "AFTER!", "/other.md": "other", "/d/": ""})
}

func TestTreeInvalidUTF8(t *testing.T) {
	l, hook := logtest.NewNullLogger()
	tr, j := newTestTree(t, Options{Log: l})
	a, err := tr.Create(RootIno, "bin.md", 0o644, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	id := treeFileID(t, tr, "/bin.md")
	bad := "ok \xff\xfe bytes"
	if _, err := tr.Write(a.Ino, []byte(bad), 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(a.Ino); !errors.Is(err, ErrNotUTF8) {
		t.Fatalf("close of invalid UTF-8: %v, want %v", err, ErrNotUTF8)
	}
	wantOps(t, j, putOp(id, "/bin.md", bad)) // kept: nothing is lost
	if got := treeRead(t, tr, a.Ino); got != bad {
		t.Errorf("content %q, want %q", got, bad)
	}
	if len(hook.Entries) != 1 || hook.LastEntry().Level != logrus.WarnLevel || hook.LastEntry().Data["path"] != "/bin.md" {
		t.Errorf("want one warning naming /bin.md, got %v", hook.AllEntries())
	}
	// Still invalid after another write: still an error, warned only once.
	if _, err := tr.Write(a.Ino, []byte("\xff"), 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(a.Ino); !errors.Is(err, ErrNotUTF8) {
		t.Errorf("second close: %v, want %v", err, ErrNotUTF8)
	}
	if len(hook.Entries) != 1 {
		t.Errorf("%d warnings, want 1", len(hook.Entries))
	}
	j.take()
	// Made valid, it closes cleanly.
	sz := int64(2)
	if _, err := tr.SetAttr(a.Ino, SetAttrIn{Size: &sz}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Write(a.Ino, []byte("ok"), 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Errorf("close of valid content: %v", err)
	}
	wantOps(t, j, putOp(id, "/bin.md", "ok"))
}

func TestTreeJournalFailure(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		ino := treeWriteFile(t, tr, "/a.md", "v1")
		id := treeFileID(t, tr, "/a.md")
		j.take()
		if _, err := tr.Write(ino, []byte("v2"), 0); err != nil {
			t.Fatal(err)
		}
		j.setFailPut(func(string, string) error { return errJournal })
		err := tr.Commit(ino)
		if !errors.Is(err, errJournal) || toErrno(err) != toErrno(errJournal) {
			t.Fatalf("close with a failing journal: %v, want %v", err, errJournal)
		}
		if got := treeRead(t, tr, ino); got != "v2" {
			t.Errorf("content after a failed close %q, want %q (nothing lost)", got, "v2")
		}
		// The change is still pending: the next close journals it.
		j.setFailPut(nil)
		if err := tr.Commit(ino); err != nil {
			t.Fatal(err)
		}
		wantOps(t, j, putOp(id, "/a.md", "v2"))
	})
	t.Run("unlink", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/a.md", "a")
		j.take()
		free := tr.StatFS().FilesFree
		j.setFailDelete(errJournal)
		if err := tr.Unlink(RootIno, "a.md"); !errors.Is(err, errJournal) {
			t.Fatalf("unlink: %v, want %v", err, errJournal)
		}
		wantTree(t, tr, map[string]string{"/a.md": "a"})
		if tr.StatFS().FilesFree != free {
			t.Error("a failed unlink changed the file count")
		}
	})
	t.Run("rename over a file, delete fails", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/a.md", "a")
		treeWriteFile(t, tr, "/b.md", "b")
		j.take()
		j.setFailDelete(errJournal)
		if err := tr.Rename(RootIno, "a.md", RootIno, "b.md", 0); !errors.Is(err, errJournal) {
			t.Fatalf("rename: %v, want %v", err, errJournal)
		}
		wantOps(t, j)
		wantTree(t, tr, map[string]string{"/a.md": "a", "/b.md": "b"})
	})
	t.Run("rename, put fails", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/a.md", "a")
		j.take()
		j.setFailPut(func(string, string) error { return errJournal })
		if err := tr.Rename(RootIno, "a.md", RootIno, "b.md", 0); !errors.Is(err, errJournal) {
			t.Fatalf("rename: %v, want %v", err, errJournal)
		}
		// The journal still has the file at /a.md, and so does the tree.
		wantOps(t, j)
		wantTree(t, tr, map[string]string{"/a.md": "a"})
	})
	t.Run("directory rename, second put fails", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/d/x.md", "x")
		treeWriteFile(t, tr, "/d/y.md", "y")
		ids := map[string]string{"x.md": treeFileID(t, tr, "/d/x.md"), "y.md": treeFileID(t, tr, "/d/y.md")}
		j.take()
		puts := 0
		j.setFailPut(func(string, string) error {
			puts++
			if puts == 2 {
				return errJournal
			}
			return nil
		})
		if err := tr.Rename(RootIno, "d", RootIno, "e", 0); !errors.Is(err, errJournal) {
			t.Fatalf("rename: %v, want %v", err, errJournal)
		}
		wantTree(t, tr, map[string]string{"/d/": "", "/d/x.md": "x", "/d/y.md": "y"})
		// Whatever reached the journal, the last record of each file is
		// where the tree has it.
		last := map[string]string{}
		for _, op := range j.take() {
			last[op.FileID] = op.Path
		}
		for name, id := range ids {
			if p, ok := last[id]; ok && p != "/d/"+name {
				t.Errorf("journal ends with %s at %s, the tree has it at /d/%s", id, p, name)
			}
		}
	})
}
