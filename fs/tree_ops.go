package fs

import (
	"sort"
	"strings"

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
		return nil, err
	}
	if _, ok := d.children[name]; ok {
		return nil, ErrExist
	}
	return d, nil
}

// Create makes a new empty file; it reaches the journal when closed.
func (t *Tree) Create(parent uint64, name string, mode uint32) (Attr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.freeEntry(parent, name, false)
	if err != nil {
		return Attr{}, err
	}
	if t.files >= t.opts.MaxFiles {
		return Attr{}, ErrNoSpace
	}
	n := t.newNode(d, name, false, mode&0o7777, t.opts.Now())
	n.fileID, n.dirty = newFileID(), true
	t.files++
	return n.attr(), nil
}

// Mkdir makes a directory. It exists only locally until a file is in it.
func (t *Tree) Mkdir(parent uint64, name string, mode uint32) (Attr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.freeEntry(parent, name, true)
	if err != nil {
		return Attr{}, err
	}
	return t.newNode(d, name, true, mode&0o7777, t.opts.Now()).attr(), nil
}

// unlinkNode detaches n from its parent. A file's removal is journaled.
func (t *Tree) unlinkNode(n *node) error {
	if !n.dir {
		if err := t.opts.Journal.Delete(n.fileID, n.path()); err != nil {
			return err
		}
		t.files--
		t.bytes -= int64(len(n.content))
	}
	now := t.opts.Now()
	delete(n.parent.children, n.name)
	n.parent.mtime, n.parent.ctime = now, now
	n.parent = nil
	n.dirty = false
	if n.opens == 0 {
		delete(t.byIno, n.ino)
	}
	return nil
}

// Unlink removes a file.
func (t *Tree) Unlink(parent uint64, name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
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
	t.mu.Lock()
	defer t.mu.Unlock()
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

// Rename moves a file or directory. Every file that changes path is
// journaled at its new path; a replaced file is journaled as deleted (the
// flusher turns "delete X, create at X's path" into one update of X, so an
// editor's atomic save keeps the memory's id). RENAME_NOREPLACE is honoured;
// RENAME_EXCHANGE is refused with EINVAL.
func (t *Tree) Rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
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
		if err := t.unlinkNode(dst); err != nil {
			return err
		}
	}
	now := t.opts.Now()
	delete(od.children, oldName)
	od.mtime, od.ctime = now, now
	src.parent, src.name = nd, newName
	nd.children[newName] = src
	nd.mtime, nd.ctime, src.ctime = now, now, now
	if err := t.journalSubtree(src); err != nil {
		// The journal did not record the move: undo it, so that a failed
		// rename leaves src where the journal has it (a replaced dst stays
		// deleted: that is journaled). Files of a directory already
		// journaled at the new path are journaled back (best effort).
		delete(nd.children, newName)
		src.parent, src.name = od, oldName
		od.children[oldName] = src
		_ = t.journalSubtree(src)
		return err
	}
	return nil
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

// journalSubtree records the current path and content of every file at or
// below n (after a rename).
func (t *Tree) journalSubtree(n *node) error {
	if !n.dir {
		return t.commit(n, true)
	}
	for _, c := range n.children {
		if err := t.journalSubtree(c); err != nil {
			return err
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
