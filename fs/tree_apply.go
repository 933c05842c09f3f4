package fs

import (
	"fmt"
	"strings"
	"time"
)

// Apply applies changes in order without journaling them. A change the
// tree can't hold (its path crosses a file, or is not a valid path) is
// returned in the error and skipped; the rest still apply.
func (t *Tree) Apply(changes []Change) error {
	t.lockJournal()
	defer t.unlockJournal()
	var bad []string
	for _, c := range changes {
		if err := t.applyOne(c); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", c.Path, err))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d change(s) could not be applied: %s", len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// applyOne applies one change: finds the file it is about, then deletes
// it, or makes the directories of its path, makes room at its name,
// places it there and gives it its content.
func (t *Tree) applyOne(c Change) error {
	cur := t.changedFile(c)
	if c.Deleted {
		t.applyDelete(cur)
		return nil
	}
	segs, err := changeSegments(c.Path)
	if err != nil {
		return err
	}
	now := time.Now()
	dir, err := t.applyParents(segs[:len(segs)-1], cur, now)
	if err != nil {
		return err
	}
	name := segs[len(segs)-1]
	if err := t.makeRoom(dir, name, c.Path, cur); err != nil {
		return err
	}
	cur = t.placeFile(dir, name, c, cur, now)
	if cur.lazy || string(cur.content) != string(c.Content) {
		t.invalidate(c.Path, true)
	}
	t.bytes += int64(len(c.Content)) - cur.size()
	t.unlazy(cur)
	cur.content, cur.shared = c.Content, true // one copy: the change's bytes, copied only when written (tree_lazy.go)
	cur.mtime, cur.ctime = now, now
	return nil
}

// changedFile is the file c is about (nil: none in the tree): the file
// with its id, or else the file it continues (Origin), which takes its id.
func (t *Tree) changedFile(c Change) *node {
	cur := t.byFileID(c.FileID)
	if cur == nil && c.Origin != "" && c.Origin != c.FileID {
		if cur = t.byFileID(c.Origin); cur != nil {
			t.setFileID(cur, c.FileID)
		}
	}
	return cur
}

// applyDelete removes cur (if any) and the directories it leaves empty.
func (t *Tree) applyDelete(cur *node) {
	if cur == nil {
		return
	}
	parent := cur.parent
	t.invalidate(cur.path(), false)
	t.detach(cur)
	t.pruneEmpty(parent)
}

// changeSegments checks every name of a change's path before the tree
// changes, so a change that fails leaves the tree as it was, and returns
// the names.
func changeSegments(path string) ([]string, error) {
	if path == "/"+MarkerName {
		return nil, ErrNotPermit
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	parent := "/"
	for i, s := range segs {
		p, err := checkName(parent, s, i < len(segs)-1)
		if err != nil {
			return nil, err
		}
		parent = p
	}
	return segs, nil
}

// applyParents walks the directories dirs from the root, making those
// missing, and returns the last. cur, the file the change moves (or nil),
// may stand on the way (see below); any other file there fails the change
// with ErrNotDir, before anything changed.
func (t *Tree) applyParents(dirs []string, cur *node, now time.Time) (*node, error) {
	dir := t.root
	for _, s := range dirs {
		ch, ok := dir.children[s]
		switch {
		case !ok:
			ch = t.newNode(dir, s, true, t.opts.Owner.dirMode(), now)
		case ch.dir:
		case ch == cur:
			// The file moves below its own old path (/d -> /d/a, as a
			// journal replayed over the store's listing has it): it
			// leaves that path first and a directory takes its name.
			// Nothing can be below a file, so the rest of the path is
			// new and the change can't fail from here on.
			t.invalidate(cur.path(), false)
			dir.unlink(s)
			cur.parent = nil
			ch = t.newNode(dir, s, true, t.opts.Owner.dirMode(), now)
		default:
			return nil, ErrNotDir
		}
		dir = ch
	}
	return dir, nil
}

// makeRoom frees name in dir for cur (nil: a new file) at path: another
// file there is replaced; a directory there holding only cur goes as cur
// takes its place (cur is then at name already); any other directory
// fails the change with ErrIsDir.
func (t *Tree) makeRoom(dir *node, name, path string, cur *node) error {
	old, ok := dir.children[name]
	if !ok || old == cur {
		return nil
	}
	switch {
	case !old.dir:
		t.invalidate(path, false)
		t.detach(old)
	case cur != nil && holdsOnly(old, cur):
		// The file moves onto the path of a directory that holds
		// nothing but it (/a/b/c -> /a/b): the directories go, as
		// they would once it left them.
		t.invalidate(cur.path(), false)
		d := cur.parent
		d.unlink(cur.name)
		for d != dir {
			up := d.parent
			t.invalidate(d.path(), false)
			t.detach(d)
			d = up
		}
		cur.parent, cur.name = dir, name
		dir.link(name, cur)
	default:
		return ErrIsDir
	}
	return nil
}

// placeFile puts cur at name in dir, where makeRoom made room, and
// returns it: a new file with c's id when cur is nil, else cur moved
// there (from its old directory, which goes if left empty).
func (t *Tree) placeFile(dir *node, name string, c Change, cur *node, now time.Time) *node {
	if cur == nil {
		cur = t.newNode(dir, name, false, t.opts.Owner.fileMode(), now)
		cur.fileID = c.FileID
		t.indexFile(cur)
		t.files++
		t.invalidate(c.Path, false)
		return cur
	}
	if cur.parent != dir || cur.name != name {
		from := cur.parent // nil when it already left (applyParents)
		if from != nil {
			t.invalidate(cur.path(), false)
			from.unlink(cur.name)
		}
		cur.parent, cur.name = dir, name
		dir.link(name, cur)
		t.invalidate(c.Path, false)
		t.pruneEmpty(from)
	}
	return cur
}

// holdsOnly reports whether the directory d holds nothing but n, through
// a chain of directories that each hold one entry.
func holdsOnly(d, n *node) bool {
	for d.dir && len(d.children) == 1 {
		for _, c := range d.children {
			d = c
		}
		if d == n {
			return true
		}
	}
	return false
}

// pruneEmpty removes d and then its parents while they are empty, after a
// change moved or deleted the file they held: the store has no
// directories, so nothing else keeps them.
func (t *Tree) pruneEmpty(d *node) {
	for d != nil && d != t.root && d.parent != nil && len(d.children) == 0 {
		up := d.parent
		t.invalidate(d.path(), false)
		t.detach(d)
		d = up
	}
}

// detach removes a file without journaling it.
func (t *Tree) detach(n *node) {
	if !n.dir {
		t.files--
		t.bytes -= n.size()
		t.unindexFile(n)
	}
	n.parent.unlink(n.name)
	n.parent = nil
	if n.opens == 0 {
		delete(t.byIno, n.ino)
	}
}

// FileCount is the number of files (memories) in the tree.
func (t *Tree) FileCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files
}

// At reports what is at a store path: a file (with its file id), a
// directory, or nothing.
func (t *Tree) At(path string) (fileID string, isDir, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.root
	for _, s := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if !n.dir {
			return "", false, false
		}
		c, found := n.children[s]
		if !found {
			return "", false, false
		}
		n = c
	}
	return n.fileID, n.dir, true
}
