package fs

import (
	"errors"
	"testing"
	"time"
)

// gatedJournal is a recJournal whose next Append, once armed, stops
// inside the write until released: a journal write(2) that takes long.
type gatedJournal struct {
	*recJournal
	entered chan struct{} // receives when an armed Append starts
	release chan error    // the armed Append returns this (nil: it writes)
	armed   chan struct{} // holds one token per Append to stop
}

func newGatedJournal() *gatedJournal {
	return &gatedJournal{recJournal: &recJournal{}, entered: make(chan struct{}), release: make(chan error), armed: make(chan struct{}, 1)}
}

func (g *gatedJournal) Append(states ...FileState) error {
	select {
	case <-g.armed:
		g.entered <- struct{}{}
		if err := <-g.release; err != nil {
			return err
		}
	default:
	}
	return g.recJournal.Append(states...)
}

// stopNext makes the next Append stop until release.
func (g *gatedJournal) stopNext() { g.armed <- struct{}{} }

// within fails t unless f returns within a deadline: f must not wait
// for the journal write g holds stopped. On failure g's write is let go,
// so that the test ends.
func within(t *testing.T, g *gatedJournal, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		go func() { g.release <- nil }()
		<-done
		t.Fatalf("%s waited for the journal write of another operation", what)
	}
}

// background runs f and returns its error on the channel.
func background(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// While a close's record is being written, the tree's lock is free:
// lookups, getattr, reads and writes through an open handle go on. A
// write that lands meanwhile keeps the file dirty, so the next close
// journals it; the close itself returns only once its record is written.
func TestTreeCloseJournalsWithoutTheLock(t *testing.T) {
	g := newGatedJournal()
	tr, _ := newTestTree(t, Options{Journal: g})
	ino := treeWriteFile(t, tr, "/a.md", "one")
	id := treeFileID(t, tr, "/a.md")
	g.take()
	if err := tr.Open(ino, true, false); err != nil {
		t.Fatal(err)
	}
	defer tr.Release(ino)
	if _, err := tr.Write(ino, []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	g.stopNext()
	closed := background(func() error { return tr.Commit(ino) })
	<-g.entered
	within(t, g, "lookup, getattr, read and write", func() {
		if _, err := tr.Lookup(RootIno, "a.md"); err != nil {
			t.Errorf("lookup: %v", err)
		}
		if _, err := tr.GetAttr(ino); err != nil {
			t.Errorf("getattr: %v", err)
		}
		if got := treeRead(t, tr, ino); got != "two" {
			t.Errorf("read %q during the close, want %q", got, "two")
		}
		if _, err := tr.Write(ino, []byte("3"), 3); err != nil {
			t.Errorf("write: %v", err)
		}
	})
	select {
	case err := <-closed:
		t.Fatalf("the close returned (%v) before its record was written", err)
	default:
	}
	g.release <- nil
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	wantOps(t, g.recJournal, putOp(id, "/a.md", "two"))
	if err := tr.Commit(ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, g.recJournal, putOp(id, "/a.md", "two3")) // written during the close: still dirty
	if err := tr.Commit(ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, g.recJournal)
}

// An unlink or rename changes the tree only once its record is written,
// and not at all when the journal refuses it; meanwhile the tree's lock
// is free, while another change that journals waits its turn, so records
// reach the journal in the order of the operations.
func TestTreeUnlinkRenameJournalWithoutTheLock(t *testing.T) {
	g := newGatedJournal()
	tr, _ := newTestTree(t, Options{Journal: g})
	ino := treeWriteFile(t, tr, "/a.md", "one")
	treeWriteFile(t, tr, "/b.md", "bee")
	id, idB := treeFileID(t, tr, "/a.md"), treeFileID(t, tr, "/b.md")
	g.take()

	// A rename the journal refuses leaves the tree as it was.
	g.stopNext()
	renamed := background(func() error { return tr.Rename(RootIno, "a.md", RootIno, "c.md", 0) })
	<-g.entered
	within(t, g, "lookup", func() {
		if _, err := tr.Lookup(RootIno, "a.md"); err != nil {
			t.Errorf("lookup of the file being renamed: %v", err)
		}
	})
	g.release <- errJournal
	if err := <-renamed; !errors.Is(err, errJournal) {
		t.Fatalf("rename with a refusing journal: %v, want %v", err, errJournal)
	}
	wantTree(t, tr, map[string]string{"/a.md": "one", "/b.md": "bee"})

	// A rename in progress: the file is still at its old name, a write
	// to it lands, and an unlink of another file waits for the rename's
	// record before journaling its own.
	if err := tr.Open(ino, true, false); err != nil {
		t.Fatal(err)
	}
	defer tr.Release(ino)
	g.stopNext()
	renamed = background(func() error { return tr.Rename(RootIno, "a.md", RootIno, "c.md", 0) })
	<-g.entered
	within(t, g, "lookup and write", func() {
		if _, err := tr.Lookup(RootIno, "a.md"); err != nil {
			t.Errorf("lookup of the file being renamed: %v", err)
		}
		if _, err := tr.Write(ino, []byte("ONE"), 0); err != nil {
			t.Errorf("write: %v", err)
		}
	})
	unlinked := background(func() error { return tr.Unlink(RootIno, "b.md") })
	g.release <- nil
	if err := <-renamed; err != nil {
		t.Fatalf("rename: %v", err)
	}
	if err := <-unlinked; err != nil {
		t.Fatalf("unlink: %v", err)
	}
	wantOps(t, g.recJournal, putOp(id, "/c.md", "one"), deleteOp(idB, "/b.md"))
	wantTree(t, tr, map[string]string{"/c.md": "ONE"})
	if err := tr.Commit(ino); err != nil {
		t.Fatal(err)
	}
	wantOps(t, g.recJournal, putOp(id, "/c.md", "ONE")) // written during the rename: still dirty
}
