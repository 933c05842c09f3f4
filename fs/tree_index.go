package fs

// The index by file id. The sync engine names files by their file id (a
// memory id, or the "local-…" id of a file created here), and every
// remote change it applies, every CommitFile before a merge, looks a
// file up by it. byID answers that in O(1) under t.mu, whatever the size
// of the tree.
//
// Invariant (between operations, with t.mu held): byID[id] == n exactly
// when n is a file linked into the tree (n.parent != nil), not the
// marker, with n.fileID == id != "". Every path that links a file with
// an id (Load, Create, Apply making a file), gives a linked file another
// id (Apply with Origin), or takes a file out of the tree (Unlink, a
// rename over it, Apply deleting or replacing it) goes through
// indexFile, setFileID or unindexFile. A rename, or Apply moving a file,
// keeps its id and so its entry. checkTree (testtree_test.go) verifies
// the invariant after every tree test.

// indexFile enters n, a file just linked with its file id, in byID.
//
// REQUIRES: t.mu held.
func (t *Tree) indexFile(n *node) {
	if n.fileID != "" {
		t.byID[n.fileID] = n
	}
}

// unindexFile takes n, a file leaving the tree, out of byID (and of the
// lazy files waiting for content).
//
// REQUIRES: t.mu held.
func (t *Tree) unindexFile(n *node) {
	if t.byID[n.fileID] == n {
		delete(t.byID, n.fileID)
	}
	t.forgetLazy(n)
}

// setFileID gives n, a linked file, the file id id, moving its entries in
// byID and, while it is lazy, in t.lazy.
//
// REQUIRES: t.mu held.
func (t *Tree) setFileID(n *node, id string) {
	lazy := n.lazy && t.lazy[n.fileID] == n
	t.unindexFile(n)
	n.fileID = id
	t.indexFile(n)
	if lazy {
		t.lazy[id] = n
	}
}

// byFileID finds the file linked into the tree with a file id; nil when
// there is none (or id is "").
//
// REQUIRES: t.mu held.
func (t *Tree) byFileID(id string) *node {
	if id == "" {
		return nil
	}
	return t.byID[id]
}
