package fs

import (
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/memfs/memfs/store"
)

// Entry is one directory entry.
type Entry struct {
	Name string
	Attr Attr
}

// Lookup finds name in directory parent.
func (t *Tree) Lookup(parent uint64, name string) (Attr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.dirNode(parent)
	if err != nil {
		return Attr{}, err
	}
	if len(name) > MaxNameBytes {
		return Attr{}, ErrNameTooLong // not ENOENT: no such name can exist
	}
	c, ok := d.children[name]
	if !ok {
		return Attr{}, ErrNotExist
	}
	return c.attr(), nil
}

// GetAttr returns a node's attributes (also for an unlinked file still open).
func (t *Tree) GetAttr(ino uint64) (Attr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.get(ino)
	if err != nil {
		return Attr{}, err
	}
	return n.attr(), nil
}

// ReadDir lists a directory, sorted by name.
func (t *Tree) ReadDir(ino uint64) ([]Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.dirNode(ino)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(d.children))
	for name, c := range d.children {
		out = append(out, Entry{Name: name, Attr: c.attr()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// freeEntry checks that a new entry (a directory when dir) may be made as
// name in directory parent, and returns that directory.
//
// REQUIRES: t.mu held.
func (t *Tree) freeEntry(parent uint64, name string, dir bool) (*node, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	d, err := t.dirNode(parent)
	if err != nil {
		return nil, err
	}
	if _, err := checkName(d.path(), name, dir); err != nil {
		t.noteTooDeep(err)
		return nil, err
	}
	if _, ok := d.children[name]; ok {
		return nil, ErrExist
	}
	return d, nil
}

// noteTooDeep logs, once per mount at debug, that ENAMETOOLONG was given
// for depth, not length: the errno can't say it.
//
// REQUIRES: t.mu held.
func (t *Tree) noteTooDeep(err error) {
	if errors.Is(err, errTooDeep) && !t.tooDeepLogged {
		t.tooDeepLogged = true
		t.log.WithField("store", t.opts.StoreID).WithError(err).Debug("a name was refused with ENAMETOOLONG because its path would be too deep, not too long")
	}
}

// Create makes a new empty file; it reaches the journal when closed. It
// belongs to caller (the group of a setgid parent), with mode (the kernel
// has taken the caller's umask out of it already).
func (t *Tree) Create(parent uint64, name string, mode uint32, caller Owner) (Attr, error) {
	t.lockJournal()
	defer t.unlockJournal()
	d, err := t.freeEntry(parent, name, false)
	if err != nil {
		return Attr{}, err
	}
	if t.files >= t.opts.MaxFiles {
		return Attr{}, ErrNoSpace
	}
	n := t.newNode(d, name, false, 0, time.Now())
	n.uid, n.gid, n.mode = newEntryOwner(d, caller, mode, false)
	n.fileID, n.dirty = newFileID(), true
	t.indexFile(n)
	t.files++
	return n.attr(), nil
}

// Mkdir makes a directory, owned like Create's files (a setgid parent's
// setgid bit carries over). It exists only locally until a file is in it.
func (t *Tree) Mkdir(parent uint64, name string, mode uint32, caller Owner) (Attr, error) {
	t.lockJournal()
	defer t.unlockJournal()
	d, err := t.freeEntry(parent, name, true)
	if err != nil {
		return Attr{}, err
	}
	n := t.newNode(d, name, true, 0, time.Now())
	n.uid, n.gid, n.mode = newEntryOwner(d, caller, mode, true)
	return n.attr(), nil
}

// unlinkNode journals a file's removal, then detaches n from its parent.
//
// REQUIRES: t.jmu and t.mu held.
func (t *Tree) unlinkNode(n *node) error {
	if !n.dir {
		if err := t.appendUnlocked(FileState{FileID: n.fileID, Path: n.path(), Deleted: true}); err != nil {
			return err
		}
	}
	t.removeNode(n)
	return nil
}

// removeNode detaches n from its parent (its removal is journaled).
func (t *Tree) removeNode(n *node) {
	if !n.dir {
		t.files--
		t.bytes -= n.size()
		t.unindexFile(n)
		delete(t.unjournaled, n.ino)
	}
	now := time.Now()
	n.parent.unlink(n.name)
	n.parent.mtime, n.parent.ctime = now, now
	n.parent = nil
	n.dirty = false
	if n.opens == 0 {
		delete(t.byIno, n.ino)
	}
}

// Unlink removes a file.
func (t *Tree) Unlink(parent uint64, name string) error {
	t.lockJournal()
	defer t.unlockJournal()
	if err := t.writable(); err != nil {
		return err
	}
	d, err := t.dirNode(parent)
	if err != nil {
		return err
	}
	c, ok := d.children[name]
	switch {
	case !ok:
		return ErrNotExist
	case c.marker:
		return ErrNotPermit
	case c.dir:
		return ErrIsDir
	}
	return t.unlinkNode(c)
}

// Rmdir removes an empty directory.
func (t *Tree) Rmdir(parent uint64, name string) error {
	t.lockJournal()
	defer t.unlockJournal()
	if err := t.writable(); err != nil {
		return err
	}
	d, err := t.dirNode(parent)
	if err != nil {
		return err
	}
	c, ok := d.children[name]
	switch {
	case !ok:
		return ErrNotExist
	case !c.dir:
		return ErrNotDir
	case len(c.children) > 0:
		return ErrNotEmpty
	}
	return t.unlinkNode(c)
}

// Rename flags (renameat2).
const (
	RenameNoReplace = 1
	RenameExchange  = 2
)

// Rename moves a file or directory. It is journaled before the tree
// changes, with one append that holds the replaced file's delete and every
// moved file at its new path: the rename happens whole or not at all (a
// full state dir refuses it with nothing changed). The flusher turns
// "delete X, create at X's path" into one update of X, so an editor's
// atomic save keeps the memory's id. RENAME_NOREPLACE is honoured;
// RENAME_EXCHANGE is refused with EINVAL. The moved files' contents are
// fetched first when lazy (the replaced file's is not needed).
func (t *Tree) Rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) error {
	return t.retry(func() error { return t.rename(oldParent, oldName, newParent, newName, flags) })
}

func (t *Tree) rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) error {
	t.lockJournal()
	defer t.unlockJournal()
	if err := t.writable(); err != nil {
		return err
	}
	if flags&RenameExchange != 0 || flags&^uint32(RenameNoReplace|RenameExchange) != 0 {
		return ErrInvalidArg
	}
	od, err := t.dirNode(oldParent)
	if err != nil {
		return err
	}
	nd, err := t.dirNode(newParent)
	if err != nil {
		return err
	}
	src, ok := od.children[oldName]
	if !ok {
		return ErrNotExist
	}
	if src.marker {
		return ErrNotPermit
	}
	newPath, err := checkName(nd.path(), newName, src.dir)
	if err != nil {
		t.noteTooDeep(err)
		return err
	}
	if src.dir {
		// A directory can't move below itself, and its deepest file must
		// still fit the path limits at the new place.
		for a := nd; a != nil; a = a.parent {
			if a == src {
				return ErrInvalidArg
			}
		}
		if err := fitsBelow(src, newPath); err != nil {
			return err
		}
	}
	dst, exists := nd.children[newName]
	if exists {
		switch {
		case dst == src:
			return nil
		case dst.marker:
			return ErrNotPermit
		case flags&RenameNoReplace != 0:
			return ErrExist
		case src.dir && !dst.dir:
			return ErrNotDir
		case !src.dir && dst.dir:
			return ErrIsDir
		case dst.dir && len(dst.children) > 0:
			return ErrNotEmpty
		}
	}
	if err := lazyBelow(src); err != nil {
		return err
	}
	var states []FileState
	if exists && !dst.dir {
		states = append(states, FileState{FileID: dst.fileID, Path: newPath, Deleted: true})
	}
	var moved []movedFile
	states, moved = movedStates(src, newPath, states, nil)
	if len(states) > 0 {
		err := t.appendUnlocked(states...)
		t.journaledMoved(moved, err == nil)
		if err != nil {
			return err
		}
	}
	if exists {
		t.removeNode(dst)
	}
	now := time.Now()
	od.unlink(oldName)
	od.mtime, od.ctime = now, now
	src.parent, src.name = nd, newName
	nd.link(newName, src)
	nd.mtime, nd.ctime, src.ctime = now, now, now
	return nil
}

// movedFile is a file a rename journals, as it was when its state was
// taken: its edits and whether its content was shared then.
type movedFile struct {
	n      *node
	edits  uint64
	shared bool
}

// movedStates appends the state of every file at or below n as it will be
// once n's path is p, and the file to moved. Each file's content is marked
// shared from here until journaledMoved: the journal reads it without
// t.mu, and a write meanwhile must copy it, not write into it.
//
// REQUIRES: t.mu held.
func movedStates(n *node, p string, acc []FileState, moved []movedFile) ([]FileState, []movedFile) {
	if !n.dir {
		moved = append(moved, movedFile{n: n, edits: n.edits, shared: n.shared})
		n.shared = true
		return append(acc, FileState{FileID: n.fileID, Path: p, Content: n.content}), moved
	}
	for name, c := range n.children {
		acc, moved = movedStates(c, p+"/"+name, acc, moved)
	}
	return acc, moved
}

// journaledMoved settles the moved files once their states were written
// (ok) or refused. A file whose content did not change meanwhile gets its
// sharing back and, when ok, is no longer dirty: the journal holds its
// content. When ok, no file's earlier failed close is pending any more
// (RetryUnjournaled): the rename journaled content at least as new.
//
// REQUIRES: t.jmu and t.mu held.
func (t *Tree) journaledMoved(moved []movedFile, ok bool) {
	for _, m := range moved {
		if m.n.edits == m.edits {
			m.n.shared = m.shared
			if ok {
				m.n.dirty = false
			}
		}
		if ok {
			delete(t.unjournaled, m.n.ino)
		}
	}
}

// fitsBelow checks that every path under dir stays within the limits when
// dir's path becomes p.
func fitsBelow(dir *node, p string) error {
	for name, c := range dir.children {
		cp := p + "/" + name
		if len(cp) > store.MaxPathBytes || strings.Count(cp, "/") > store.MaxPathSegments ||
			(c.dir && strings.Count(cp, "/") >= store.MaxPathSegments) {
			return ErrNameTooLong
		}
		if c.dir {
			if err := fitsBelow(c, cp); err != nil {
				return err
			}
		}
	}
	return nil
}

// StatFS describes the store's capacity: files against the memory cap,
// bytes against cap × the largest memory.
type StatFS struct {
	Files, FilesFree uint64
	Bytes, BytesFree uint64
}

// StatFS returns the capacity figures.
func (t *Tree) StatFS() StatFS {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := uint64(t.opts.MaxFiles) * store.MaxContentBytes
	used := uint64(t.bytes)
	return StatFS{Files: uint64(t.opts.MaxFiles), FilesFree: uint64(max(t.opts.MaxFiles-t.files, 0)),
		Bytes: total, BytesFree: total - min(used, total)}
}
