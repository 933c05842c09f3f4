package fs

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/store"
)

func TestTreeWriteCommitJournalsWholeContentOncePerClose(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	a, err := tr.Create(RootIno, "notes.md", 0o644, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Open(a.Ino, true, false); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		data string
		off  int64
	}{{"hello ", 0}, {"wide ", 6}, {"world", 11}} {
		if _, err := tr.Write(a.Ino, []byte(w.data), w.off); err != nil {
			t.Fatalf("write %q at %d: %v", w.data, w.off, err)
		}
	}
	wantOps(t, j) // nothing before close
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatalf("commit: %v", err)
	}
	id := treeFileID(t, tr, "/notes.md")
	if id == "" {
		t.Fatal("a created file has no file id")
	}
	wantOps(t, j, putOp(id, "/notes.md", "hello wide world"))

	// A second close with nothing changed journals nothing.
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j)

	// An overwrite in the middle journals the whole new content, same id.
	if _, err := tr.Write(a.Ino, []byte("WIDE"), 6); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, putOp(id, "/notes.md", "hello WIDE world"))
	tr.Release(a.Ino)

	// Truncation through setattr is a change too.
	sz := int64(5)
	if _, err := tr.SetAttr(a.Ino, SetAttrIn{Size: &sz}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, putOp(id, "/notes.md", "hello"))
	if got := treeRead(t, tr, a.Ino); got != "hello" {
		t.Errorf("content %q, want %q", got, "hello")
	}
}

func TestTreeCreatedNeverWrittenJournalsEmpty(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	a, err := tr.Create(RootIno, "empty.md", 0o644, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, putOp(treeFileID(t, tr, "/empty.md"), "/empty.md", ""))
}

func TestTreeFsyncSyncsJournal(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "a")
	id := treeFileID(t, tr, "/a.md")
	j.take()
	if _, err := tr.Write(ino, []byte("b"), 1); err != nil {
		t.Fatal(err)
	}
	if err := tr.Fsync(ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, putOp(id, "/a.md", "ab"), journalOp{Op: "sync"})

	j.setFailSync(errJournal)
	if err := tr.Fsync(ino); !errors.Is(err, errJournal) {
		t.Errorf("fsync with a failing journal: %v, want %v", err, errJournal)
	}
}

func TestTreeRenameFileJournalsNewPath(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "alpha")
	id := treeFileID(t, tr, "/a.md")
	dir := treeMkdirAll(t, tr, "/sub")
	j.take()

	if err := tr.Rename(RootIno, "a.md", dir, "b.md", 0); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, putOp(id, "/sub/b.md", "alpha"))
	wantTree(t, tr, map[string]string{"/sub/": "", "/sub/b.md": "alpha"})
	if got := inoOf(t, tr, "/sub/b.md"); got != ino {
		t.Errorf("inode after rename %d, want %d", got, ino)
	}
	if treeFileID(t, tr, "/sub/b.md") != id {
		t.Error("rename changed the file id")
	}
}

func TestTreeRenameOverExistingFile(t *testing.T) {
	tr, j := newTestTree(t, Options{MaxFiles: 2})
	treeWriteFile(t, tr, "/src.md", "new")
	treeWriteFile(t, tr, "/dst.md", "old")
	srcID, dstID := treeFileID(t, tr, "/src.md"), treeFileID(t, tr, "/dst.md")
	j.take()

	if err := tr.Rename(RootIno, "src.md", RootIno, "dst.md", 0); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, deleteOp(dstID, "/dst.md"), putOp(srcID, "/dst.md", "new"))
	wantTree(t, tr, map[string]string{"/dst.md": "new"})
	// The replaced file no longer counts against the cap.
	if s := tr.StatFS(); s.FilesFree != 1 {
		t.Errorf("files free %d after the replace, want 1", s.FilesFree)
	}
}

func TestTreeRenameDirectoryJournalsEveryFileBelow(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	treeWriteFile(t, tr, "/d/x.md", "x")
	treeWriteFile(t, tr, "/d/sub/y.md", "y")
	treeWriteFile(t, tr, "/d/sub/deeper/z.md", "z")
	treeWriteFile(t, tr, "/other.md", "o")
	treeMkdirAll(t, tr, "/d/emptydir")
	ids := map[string]string{}
	for _, p := range []string{"/d/x.md", "/d/sub/y.md", "/d/sub/deeper/z.md"} {
		ids[p] = treeFileID(t, tr, p)
	}
	j.take()

	if err := tr.Rename(RootIno, "d", RootIno, "e", 0); err != nil {
		t.Fatal(err)
	}
	got := map[string]journalOp{}
	for _, op := range j.take() {
		got[op.Path] = op
	}
	want := map[string]journalOp{
		"/e/x.md":            putOp(ids["/d/x.md"], "/e/x.md", "x"),
		"/e/sub/y.md":        putOp(ids["/d/sub/y.md"], "/e/sub/y.md", "y"),
		"/e/sub/deeper/z.md": putOp(ids["/d/sub/deeper/z.md"], "/e/sub/deeper/z.md", "z"),
	}
	if len(got) != len(want) {
		t.Errorf("journal calls %v, want one put per file below %v", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("journal at %s: %v, want %v", p, got[p], w)
		}
	}
	wantTree(t, tr, map[string]string{"/e/": "", "/e/x.md": "x", "/e/sub/": "", "/e/sub/y.md": "y",
		"/e/sub/deeper/": "", "/e/sub/deeper/z.md": "z", "/e/emptydir/": "", "/other.md": "o"})
}

func TestTreeRenameRefusals(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		flags    uint32
		want     error
	}{
		{"noreplace over a file", "/a.md", "/b.md", RenameNoReplace, ErrExist},
		{"exchange", "/a.md", "/b.md", RenameExchange, ErrInvalidArg},
		{"unknown flag", "/a.md", "/c.md", 4, ErrInvalidArg},
		{"missing source", "/nope.md", "/c.md", 0, ErrNotExist},
		{"file over directory", "/a.md", "/d", 0, ErrIsDir},
		{"directory over file", "/d", "/a.md", 0, ErrNotDir},
		{"directory over non-empty directory", "/e", "/d", 0, ErrNotEmpty},
		{"directory into itself", "/d", "/d/in/d2", 0, ErrInvalidArg},
		{"invalid new name", "/a.md", "/e\u0301.md", 0, ErrInvalidName},
		{"marker", "/" + MarkerName, "/m", 0, ErrNotPermit},
		{"over marker", "/a.md", "/" + MarkerName, 0, ErrNotPermit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, j := newTestTree(t, Options{})
			treeWriteFile(t, tr, "/a.md", "a")
			treeWriteFile(t, tr, "/b.md", "b")
			treeWriteFile(t, tr, "/d/in/f.md", "f")
			treeMkdirAll(t, tr, "/e")
			before := treeSnapshot(tr)
			j.take()
			op, on := parentAndName(t, tr, tc.from)
			np, nn := parentAndName(t, tr, tc.to)
			if err := tr.Rename(op, on, np, nn, tc.flags); !errors.Is(err, tc.want) {
				t.Fatalf("rename %s → %s: %v, want %v", tc.from, tc.to, err, tc.want)
			}
			wantOps(t, j)
			wantTree(t, tr, before)
		})
	}
}

func TestTreeRenameOntoItselfIsANoOp(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	treeWriteFile(t, tr, "/a.md", "a")
	j.take()
	if err := tr.Rename(RootIno, "a.md", RootIno, "a.md", 0); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j)
	wantTree(t, tr, map[string]string{"/a.md": "a"})
}

func TestTreeRenameDirectoryKeepsLimits(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	// /d holds a file 3 levels below it; moving /d 18 levels down would put
	// that file 21 levels deep.
	treeWriteFile(t, tr, "/d/x/y.md", "y")
	deep := treeMkdirAll(t, tr, "/"+strings.Repeat("l/", 18))
	j.take()
	if err := tr.Rename(RootIno, "d", deep, "d", 0); !errors.Is(err, ErrNameTooLong) {
		t.Fatalf("rename too deep: %v, want %v", err, ErrNameTooLong)
	}
	wantOps(t, j)
	if _, err := tr.Lookup(RootIno, "d"); err != nil {
		t.Errorf("the directory moved although the rename failed: %v", err)
	}
}

func TestTreeUnlinkRmdir(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	treeWriteFile(t, tr, "/d/f.md", "f")
	treeMkdirAll(t, tr, "/empty")
	id := treeFileID(t, tr, "/d/f.md")
	d := inoOf(t, tr, "/d")
	j.take()

	if err := tr.Rmdir(RootIno, "d"); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("rmdir of a non-empty directory: %v, want %v", err, ErrNotEmpty)
	}
	if err := tr.Unlink(RootIno, "d"); !errors.Is(err, ErrIsDir) {
		t.Errorf("unlink of a directory: %v, want %v", err, ErrIsDir)
	}
	if err := tr.Rmdir(d, "f.md"); !errors.Is(err, ErrNotDir) {
		t.Errorf("rmdir of a file: %v, want %v", err, ErrNotDir)
	}
	if err := tr.Unlink(d, "nope.md"); !errors.Is(err, ErrNotExist) {
		t.Errorf("unlink of a missing file: %v, want %v", err, ErrNotExist)
	}
	wantOps(t, j)

	if err := tr.Unlink(d, "f.md"); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j, deleteOp(id, "/d/f.md"))
	if err := tr.Rmdir(RootIno, "d"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Rmdir(RootIno, "empty"); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j) // directories are not in the store
	wantTree(t, tr, nil)
}

func TestTreeUnlinkedOpenFileKeepsWorking(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "alive")
	if err := tr.Open(ino, true, false); err != nil {
		t.Fatal(err)
	}
	if err := tr.Unlink(RootIno, "a.md"); err != nil {
		t.Fatal(err)
	}
	j.take()
	a, err := tr.GetAttr(ino)
	if err != nil {
		t.Fatalf("getattr of an open unlinked file: %v", err)
	}
	if a.Size != 5 || a.Nlink != 0 {
		t.Errorf("unlinked file: size %d nlink %d, want 5 and 0", a.Size, a.Nlink)
	}
	if _, err := tr.Write(ino, []byte("!"), 5); err != nil {
		t.Errorf("write to an open unlinked file: %v", err)
	}
	if got := treeRead(t, tr, ino); got != "alive!" {
		t.Errorf("read %q, want %q", got, "alive!")
	}
	if err := tr.Commit(ino); err != nil {
		t.Errorf("close of an unlinked file: %v", err)
	}
	wantOps(t, j) // an unlinked file is gone from the store
	tr.Release(ino)
	if _, err := tr.GetAttr(ino); !errors.Is(err, ErrNotExist) {
		t.Errorf("getattr after the last release: %v, want %v", err, ErrNotExist)
	}
}

func TestTreeApply(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	tr.Load([]File{
		{FileID: "m1", Path: "/a.md", Content: []byte("one")},
		{FileID: "m2", Path: "/d/b.md", Content: []byte("two")},
		{FileID: "m3", Path: "/d/c.md", Content: []byte("three")},
		{FileID: "m4", Path: "/gone.md", Content: []byte("four")},
	})
	ino1 := inoOf(t, tr, "/a.md")
	err := tr.Apply([]Change{
		{FileID: "m5", Path: "/new/e.md", Content: []byte("five")},     // put: a new file and its directory
		{FileID: "m1", Path: "/moved/a.md", Content: []byte("one v2")}, // move by FileID, new content
		{FileID: "m6", Path: "/d/b.md", Content: []byte("six")},        // replaces m2
		{FileID: "m4", Deleted: true},                                  // delete
		{FileID: "m9", Deleted: true},                                  // delete of an unknown file: nothing
		{FileID: "m3", Path: "/d/c.md", Content: []byte("three v2")},   // update in place
	})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	wantOps(t, j) // replay is not journaled again
	wantTree(t, tr, map[string]string{
		"/new/": "", "/new/e.md": "five",
		"/moved/": "", "/moved/a.md": "one v2",
		"/d/": "", "/d/b.md": "six", "/d/c.md": "three v2",
	})
	if got := inoOf(t, tr, "/moved/a.md"); got != ino1 {
		t.Errorf("a moved file got inode %d, want %d (kept)", got, ino1)
	}
	if treeFileID(t, tr, "/d/b.md") != "m6" || treeFileID(t, tr, "/moved/a.md") != "m1" {
		t.Error("file ids not as applied")
	}
	if s := tr.StatFS(); s.FilesFree != uint64(store.MaxMemoriesLimit-4) {
		t.Errorf("files free %d, want %d", s.FilesFree, store.MaxMemoriesLimit-4)
	}
}

func TestTreeApplySkipsBadChanges(t *testing.T) {
	tr, _ := newTestTree(t, Options{})
	tr.Load([]File{{FileID: "m1", Path: "/a.md", Content: []byte("one")}})
	err := tr.Apply([]Change{
		{FileID: "m2", Path: "/a.md/x.md", Content: []byte("under a file")},
		{FileID: "m3", Path: "/" + MarkerName, Content: []byte("marker")},
		{FileID: "m4", Path: "/ok.md", Content: []byte("ok")},
		{FileID: "m5", Path: "/e\u0301.md", Content: []byte("not NFC")},
	})
	if err == nil {
		t.Fatal("apply of impossible changes: no error")
	}
	for _, p := range []string{"/a.md/x.md", "/" + MarkerName, "/e\u0301.md"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q doesn't name %s", err, p)
		}
	}
	wantTree(t, tr, map[string]string{"/a.md": "one", "/ok.md": "ok"})
}

// A file moved below its own old path (/d -> /d/a, as a journal replayed
// over a listing that still has /d shows it) leaves /d for a directory
// and keeps its inode; a change that can't be applied changes nothing.
func TestTreeApplyMoveBelowItself(t *testing.T) {
	tr, _ := newTestTree(t, Options{})
	tr.Load([]File{
		{FileID: "m1", Path: "/d", Content: []byte("one")},
		{FileID: "m2", Path: "/e", Content: []byte("two")},
	})
	ino := inoOf(t, tr, "/d")
	if err := tr.Apply([]Change{{FileID: "m1", Path: "/d/x/a", Content: []byte("one v2")}}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	wantTree(t, tr, map[string]string{"/d/": "", "/d/x/": "", "/d/x/a": "one v2", "/e": "two"})
	if got := inoOf(t, tr, "/d/x/a"); got != ino {
		t.Errorf("the moved file got inode %d, want %d (kept)", got, ino)
	}
	long := "/e/" + strings.Repeat("n", MaxNameBytes+1)
	err := tr.Apply([]Change{
		{FileID: "m2", Path: long, Content: []byte("two v2")},
		{FileID: "m3", Path: "/new/" + strings.Repeat("n", MaxNameBytes+1), Content: []byte("three")},
	})
	if err == nil {
		t.Fatal("apply of over-long names: no error")
	}
	wantTree(t, tr, map[string]string{"/d/": "", "/d/x/": "", "/d/x/a": "one v2", "/e": "two"})
}

func TestTreeLoad(t *testing.T) {
	l, hook := logtest.NewNullLogger()
	tr, j := newTestTree(t, Options{Log: l})
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 600, time.UTC)
	tr.Load([]File{
		{FileID: "m1", Path: "/a/b.md", Content: []byte("b"), Mtime: mtime},
		{FileID: "m2", Path: "/" + MarkerName, Content: []byte("impostor")},
		{FileID: "m3", Path: "/x", Content: []byte("file x")},
		{FileID: "m4", Path: "/x/y.md", Content: []byte("below a file")},
		{FileID: "m5", Path: "/a/c.md", Content: []byte("c")},
		{FileID: "m6", Path: "/a/c.md", Content: []byte("c")}, // the same path again: one is skipped
		{FileID: "m7", Path: "/bad\x01.md", Content: []byte("invalid path")},
	})
	wantOps(t, j)
	wantTree(t, tr, map[string]string{"/a/": "", "/a/b.md": "b", "/a/c.md": "c", "/x": "file x"})
	a, err := tr.GetAttr(inoOf(t, tr, "/a/b.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Mtime.Equal(mtime) || a.Size != 1 || a.Mode != 0o644 {
		t.Errorf("loaded attr %+v, want mtime %v size 1 mode 644", a, mtime)
	}
	warned := map[string]bool{}
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned[e.Data["path"].(string)] = true
		}
	}
	for _, p := range []string{"/" + MarkerName, "/x/y.md", "/a/c.md", "/bad\x01.md"} {
		if !warned[p] {
			t.Errorf("no warning for skipped %q (warnings: %v)", p, warned)
		}
	}
	if got := treeRead(t, tr, inoOf(t, tr, "/"+MarkerName)); got != "version 1\n"+testStoreID {
		t.Errorf("marker content %q after loading an impostor", got)
	}
	if s := tr.StatFS(); s.FilesFree != uint64(store.MaxMemoriesLimit-3) {
		t.Errorf("files free %d, want %d", s.FilesFree, store.MaxMemoriesLimit-3)
	}
}

func TestTreeInodesStable(t *testing.T) {
	tr, _ := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "a")
	d := treeMkdirAll(t, tr, "/d")
	for i := 0; i < 3; i++ {
		if got := inoOf(t, tr, "/a.md"); got != ino {
			t.Fatalf("lookup %d: ino %d, want %d", i, got, ino)
		}
	}
	if err := tr.Rename(RootIno, "a.md", d, "b.md", 0); err != nil {
		t.Fatal(err)
	}
	if got := inoOf(t, tr, "/d/b.md"); got != ino {
		t.Errorf("after rename: ino %d, want %d", got, ino)
	}
	// A new file never reuses a number.
	if other := treeWriteFile(t, tr, "/a.md", "again"); other == ino {
		t.Errorf("a new file reused inode %d", ino)
	}
}

func TestTreeSetAttrKeepsMetadataLocally(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "a")
	j.take()
	mode := uint32(0o600 | 0o170000) // type bits are dropped
	uid, gid := uint32(1000), uint32(1001)
	mt := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	a, err := tr.SetAttr(ino, SetAttrIn{Mode: &mode, UID: &uid, GID: &gid, Mtime: &mt, Atime: &mt})
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != 0o600 || a.UID != uid || a.GID != gid || !a.Mtime.Equal(mt) || !a.Atime.Equal(mt) {
		t.Errorf("attr %+v", a)
	}
	if err := tr.Commit(ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j) // metadata is never synced
}

func TestOptionsValidate(t *testing.T) {
	if _, err := NewTree(Options{StoreID: "s"}); err == nil {
		t.Error("a writable tree without a journal was accepted")
	}
	tr, err := NewTree(Options{StoreID: "s", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := tr.StatFS(); s.Files != store.MaxMemoriesLimit {
		t.Errorf("default MaxFiles %d, want %d", s.Files, store.MaxMemoriesLimit)
	}
}

// In a testing/synctest bubble time moves only by time.Sleep, so "the
// write time" is exact.
func TestTreeWriteUpdatesMtime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, _ := newTestTree(t, Options{})
		loadedAt := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		tr.Load([]File{{FileID: "m1", Path: "/a.md", Content: []byte("a"), Mtime: loadedAt}})
		ino := inoOf(t, tr, "/a.md")
		if a, _ := tr.GetAttr(ino); !a.Mtime.Equal(loadedAt) {
			t.Fatalf("loaded mtime %v, want %v", a.Mtime, loadedAt)
		}
		time.Sleep(time.Hour)
		if _, err := tr.Write(ino, []byte("b"), 1); err != nil {
			t.Fatal(err)
		}
		if a, _ := tr.GetAttr(ino); !a.Mtime.Equal(time.Now()) || !a.Ctime.Equal(time.Now()) {
			t.Errorf("after a local write: mtime %v ctime %v, want the write time %v", a.Mtime, a.Ctime, time.Now())
		}
		// A read changes nothing.
		time.Sleep(time.Hour)
		treeRead(t, tr, ino)
		if a, _ := tr.GetAttr(ino); a.Mtime.Equal(time.Now()) {
			t.Error("a read changed the mtime")
		}
	})
}
