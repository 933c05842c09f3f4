package fs

import (
	"errors"
	"syscall"
	"testing"
)

// Renames and truncates work on any content: only the upload of content
// that is not UTF-8 waits (issue: a rename of such a file failed with
// EILSEQ, and "mv -T src dst" lost dst).
func TestTreeNotUTF8RenamesAndTruncates(t *testing.T) {
	bad := "\xff not text"
	t.Run("rename", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/bin", bad)
		id := treeFileID(t, tr, "/bin")
		j.take()
		if err := tr.Rename(RootIno, "bin", RootIno, "moved", 0); err != nil {
			t.Fatalf("rename of a file that is not UTF-8: %v", err)
		}
		wantOps(t, j, putOp(id, "/moved", bad))
		wantTree(t, tr, map[string]string{"/moved": bad})
	})
	t.Run("rename over a file", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/dst", "precious\n")
		treeWriteFile(t, tr, "/src", bad)
		src, dst := treeFileID(t, tr, "/src"), treeFileID(t, tr, "/dst")
		j.take()
		if err := tr.Rename(RootIno, "src", RootIno, "dst", 0); err != nil {
			t.Fatalf("mv -T src dst: %v", err)
		}
		wantOps(t, j, deleteOp(dst, "/dst"), putOp(src, "/dst", bad))
		wantTree(t, tr, map[string]string{"/dst": bad})
	})
	t.Run("directory rename", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		treeWriteFile(t, tr, "/d/x", bad)
		treeWriteFile(t, tr, "/d/ok", "ok\n")
		j.take()
		if err := tr.Rename(RootIno, "d", RootIno, "e", 0); err != nil {
			t.Fatalf("mv d e: %v", err)
		}
		if n := len(j.take()); n != 2 {
			t.Fatalf("%d records for a rename of two files, want 2", n)
		}
		wantTree(t, tr, map[string]string{"/e/": "", "/e/x": bad, "/e/ok": "ok\n"})
	})
	t.Run("truncate by path", func(t *testing.T) {
		tr, j := newTestTree(t, Options{})
		ino := treeWriteFile(t, tr, "/bin", bad+bad)
		id := treeFileID(t, tr, "/bin")
		j.take()
		size := int64(len(bad))
		a, err := tr.SetAttr(ino, SetAttrIn{Size: &size, Journal: true})
		if err != nil || a.Size != size {
			t.Fatalf("truncate of a file that is not UTF-8: %+v, %v", a, err)
		}
		wantOps(t, j, putOp(id, "/bin", bad))
	})
}

// A close the journal can't take (a full state dir) fails with ENOSPC, but
// the file keeps its new content and is journaled once there is room.
func TestTreeCloseOnFullJournal(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "v1")
	id := treeFileID(t, tr, "/a.md")
	j.take()
	if _, err := tr.Write(ino, []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	full := syscall.ENOSPC
	j.setFailPut(func(string, string) error { return full })
	if err := tr.Commit(ino); toErrno(err) != syscall.ENOSPC {
		t.Fatalf("close with a full journal: %v, want ENOSPC", err)
	}
	if got := treeRead(t, tr, ino); got != "v2" {
		t.Fatalf("content after the failed close %q, want v2 (nothing lost)", got)
	}
	if u := tr.Unjournaled(); len(u) != 1 || !errors.Is(u["/a.md"], syscall.ENOSPC) {
		t.Fatalf("Unjournaled() = %v, want /a.md with ENOSPC", u)
	}
	if left, err := tr.RetryUnjournaled(); left != 1 || err == nil {
		t.Fatalf("retry while still full: %d left, %v", left, err)
	}
	wantOps(t, j)
	j.setFailPut(nil)
	if left, err := tr.RetryUnjournaled(); left != 0 || err != nil {
		t.Fatalf("retry once there is room: %d left, %v", left, err)
	}
	wantOps(t, j, putOp(id, "/a.md", "v2"))
	if u := tr.Unjournaled(); len(u) != 0 {
		t.Fatalf("Unjournaled() after the retry = %v", u)
	}
	// A file removed while unjournaled is simply forgotten.
	if _, err := tr.Write(ino, []byte("v3"), 0); err != nil {
		t.Fatal(err)
	}
	j.setFailPut(func(string, string) error { return full })
	tr.Commit(ino) // fails: the journal is full
	if err := tr.Unlink(RootIno, "a.md"); err != nil {
		t.Fatal(err)
	}
	if left, _ := tr.RetryUnjournaled(); left != 0 || len(tr.Unjournaled()) != 0 {
		t.Fatalf("an unlinked file is still to be journaled: %d", left)
	}
}

// A truncate by path the journal can't take changes nothing.
func TestTreeTruncateOnFullJournal(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "content")
	j.take()
	j.setFailPut(func(string, string) error { return syscall.ENOSPC })
	zero := int64(0)
	if _, err := tr.SetAttr(ino, SetAttrIn{Size: &zero, Journal: true}); toErrno(err) != syscall.ENOSPC {
		t.Fatalf("truncate with a full journal: %v, want ENOSPC", err)
	}
	wantTree(t, tr, map[string]string{"/a.md": "content"})
	if a, _ := tr.GetAttr(ino); a.Size != int64(len("content")) {
		t.Fatalf("size after the refused truncate: %d", a.Size)
	}
	if s := tr.StatFS(); s.BytesFree != s.Bytes-uint64(len("content")) {
		t.Fatalf("byte count after the refused truncate: %+v", s)
	}
}

// A truncate to the size a file already has changes nothing: not its
// content, not the journal, and it does not make the file a local change.
func TestTreeTruncateToTheSameSize(t *testing.T) {
	tr, j := newTestTree(t, Options{})
	ino := treeWriteFile(t, tr, "/a.md", "same")
	j.take()
	size := int64(len("same"))
	for _, journal := range []bool{true, false} {
		if _, err := tr.SetAttr(ino, SetAttrIn{Size: &size, Journal: journal}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.CommitFile(treeFileID(t, tr, "/a.md")); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j) // nothing to journal: nothing changed
}
