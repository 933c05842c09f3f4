package fs

import (
	"errors"
)

// Lazy content (docs/operating.md, "Mounting a store"): a tree may be loaded from the store's listing
// alone — paths and sizes — so that it mounts before any content arrives.
// Such a file is "lazy": stat shows the store's size, and the content is
// brought by the Fetcher, in the background (the sync engine fills every
// file) or when an operation needs the bytes.
//
// What needs the bytes: read, write (an append included: the close
// journals the whole content), truncate to any size but 0, and rename
// (the journal records each moved file's whole content). What does not:
// stat, readdir, open (the kernel opens without O_TRUNC and truncates
// after, so an open can't know yet), O_TRUNC and truncate to 0 (the old
// bytes are dropped), unlink, and being the target a rename replaces. A
// lazy file is never dirty, so a close journals nothing for it. A local
// change is therefore always made on the file's real bytes: nothing
// wrong or empty is ever journaled or uploaded.
//
// An operation that needs the bytes of a lazy file gives up t.mu, asks
// the Fetcher for that one file, and starts over (the tree may have
// changed meanwhile): the caller waits for that file only. If the fetch
// fails, the operation fails with ErrUnfetched (EIO) and nothing changed.

// One copy of each file's bytes: the content a file gets from Load, Fill
// or Apply is kept as it is given — the fetched response's bytes, or the
// journal's own record of a replayed change — and marked shared: the tree
// never writes into it, but copies it on the file's first change (write,
// truncate) and changes the copy. The journal copies what it is given, so
// a change the tree journals is never changed under it either.

// ErrUnfetched: the content of a file is not fetched yet and the store
// did not answer for it (EIO). Nothing changed.
var ErrUnfetched = errors.New("the file's content is not fetched yet and the memory store did not answer")

// maxFetchRounds bounds how often one operation fetches and starts over
// (a file replaced while it was fetched, again and again).
const maxFetchRounds = 5

// needBytes is what an operation returns, with t.mu held and nothing
// changed, when files it works on are lazy.
type needBytes struct{ ids []string }

func (needBytes) Error() string { return "content not fetched yet" }

// lazyBelow returns needBytes for the lazy files at or below n, nil when
// there is none.
//
// REQUIRES: t.mu held.
func lazyBelow(n *node) error {
	var ids []string
	var walk func(*node)
	walk = func(n *node) {
		if n.lazy {
			ids = append(ids, n.fileID)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(n)
	if ids == nil {
		return nil
	}
	return needBytes{ids}
}

// retry runs op until it no longer needs bytes, fetching what it asked
// for between rounds.
func (t *Tree) retry(op func() error) error {
	for round := 0; ; round++ {
		err := op()
		var nb needBytes
		if !errors.As(err, &nb) {
			return err
		}
		if round == maxFetchRounds {
			return ErrUnfetched
		}
		for _, id := range nb.ids {
			if ferr := t.opts.Fetcher.Fetch(id); ferr != nil {
				return errors.Join(ErrUnfetched, ferr)
			}
		}
	}
}

// Fill gives a lazy file its content, as the store holds it at the size
// and sha it was loaded with (the caller checks). content is kept, not
// copied: the caller must not change it. A file that is no longer lazy
// (changed or replaced meanwhile) is left alone; Fill reports whether it
// took the content.
func (t *Tree) Fill(fileID string, content []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.lazy[fileID]
	if !ok || int64(len(content)) != n.lazySize {
		return false
	}
	t.unlazy(n)
	n.content, n.shared = content, true
	return true
}

// unlazy marks n as holding its content (set by the caller).
//
// REQUIRES: t.mu held.
func (t *Tree) unlazy(n *node) {
	if !n.lazy {
		return
	}
	n.lazy = false
	n.lazySize = 0
	t.forgetLazy(n)
}

// forgetLazy stops waiting for the content of n, which leaves the tree.
// It stays lazy: a handle still open on it reads EIO, never empty bytes.
//
// REQUIRES: t.mu held.
func (t *Tree) forgetLazy(n *node) {
	if t.lazy[n.fileID] == n {
		delete(t.lazy, n.fileID)
	}
}

// Lazy returns the file ids of the files whose content is not fetched yet.
func (t *Tree) Lazy() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.lazy))
	for id := range t.lazy {
		ids = append(ids, id)
	}
	return ids
}

// LazyCount is how many files wait for their content.
func (t *Tree) LazyCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.lazy)
}

// size is a file's length: its content's, or the store's while lazy.
func (n *node) size() int64 {
	if n.lazy {
		return n.lazySize
	}
	return int64(len(n.content))
}
