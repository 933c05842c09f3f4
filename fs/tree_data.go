package fs

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// Open checks that ino may be opened and counts the open; every successful
// Open of a file is paired with a Release. forWrite (and trunc) opens are
// refused on a read-only or frozen tree and on the marker file; trunc
// empties the file. An open never waits for a lazy file's content: the
// kernel opens without O_TRUNC and truncates after (no atomic_o_trunc), so
// the bytes are fetched by the first write or truncation that needs them
// (tree_lazy.go).
func (t *Tree) Open(ino uint64, forWrite, trunc bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.get(ino)
	if err != nil {
		return err
	}
	if n.dir {
		if forWrite {
			return ErrIsDir
		}
		return nil
	}
	if forWrite || trunc {
		if n.marker {
			return ErrNotPermit
		}
		if err := t.writable(); err != nil {
			return err
		}
		if trunc && n.size() > 0 {
			t.setSize(n, 0)
		}
	}
	n.opens++
	return nil
}

// Release ends an open of ino (after its last flush). An unlinked file is
// forgotten when its last handle goes.
func (t *Tree) Release(ino uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.byIno[ino]
	if !ok || n.dir {
		return
	}
	n.opens--
	if n.opens <= 0 && n.parent == nil {
		delete(t.byIno, n.ino)
	}
}

// Read copies the file's bytes at off into dst, waiting for a lazy
// file's content.
func (t *Tree) Read(ino uint64, dst []byte, off int64) (c int, err error) {
	err = t.retry(func() error {
		c, err = t.read(ino, dst, off)
		return err
	})
	return c, err
}

func (t *Tree) read(ino uint64, dst []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.get(ino)
	if err != nil {
		return 0, err
	}
	if n.dir {
		return 0, ErrIsDir
	}
	if n.lazy {
		return 0, needBytes{[]string{n.fileID}}
	}
	if off >= int64(len(n.content)) {
		return 0, nil
	}
	return copy(dst, n.content[off:]), nil
}

// Write changes the file in memory; it reaches the journal at close
// (Commit). A memory holds at most 102,400 bytes, and the limit behaves
// like a file-size limit (RLIMIT_FSIZE) on any filesystem: a write that
// crosses it writes up to it and returns the short count, and a write that
// starts at or past it fails with ErrTooLarge (EFBIG) and changes nothing.
// However the kernel splits a write into requests, the file ends with the
// bytes up to the limit. Either way a warning names the file, once until
// it is back under the limit (cp of a larger file leaves it cut short).
// Writes through a handle opened before teardown still land.
func (t *Tree) Write(ino uint64, data []byte, off int64) (c int, err error) {
	err = t.retry(func() error {
		c, err = t.write(ino, data, off)
		return err
	})
	return c, err
}

func (t *Tree) write(ino uint64, data []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.get(ino)
	if err != nil {
		return 0, err
	}
	if n.marker {
		return 0, ErrNotPermit
	}
	if t.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if off < 0 {
		return 0, ErrInvalidArg
	}
	if n.lazy {
		// Even a write of the whole file: its size may change after.
		return 0, needBytes{[]string{n.fileID}}
	}
	if end := off + int64(len(data)); end > store.MaxContentBytes {
		t.warnTooLarge(n, end)
		if off >= store.MaxContentBytes {
			return 0, ErrTooLarge
		}
		data = data[:store.MaxContentBytes-off]
	}
	if end := off + int64(len(data)); end > int64(len(n.content)) {
		t.setSize(n, end)
	}
	if n.shared {
		n.content, n.shared = append(make([]byte, 0, len(n.content)+len(data)), n.content...), false
	}
	copy(n.content[off:], data)
	n.dirty = true
	n.edits++
	n.mtime = time.Now()
	n.ctime = n.mtime
	return len(data), nil
}

// warnTooLarge warns once that a file was asked to grow past a memory's
// size limit.
//
// REQUIRES: t.mu held.
func (t *Tree) warnTooLarge(n *node, size int64) {
	if n.tooLarge {
		return
	}
	n.tooLarge = true
	t.log.WithFields(logrus.Fields{"store": t.opts.StoreID, "path": n.path(), "size": size, "limit": store.MaxContentBytes}).
		Warn("a write or truncate past 102,400 bytes, the most a memory may hold, was refused: the file keeps at most its first 102,400 bytes")
}

// setSize grows (with zeros) or shrinks n's content. The same size is no
// change (POSIX: times are marked only when the size changes), and above
// all not a local edit: a truncate(2) to the current size must not make a
// synced file look changed here (a remote change would then be taken for
// a conflict).
func (t *Tree) setSize(n *node, size int64) {
	if size < store.MaxContentBytes {
		n.tooLarge = false
	}
	old := n.size()
	if size == old {
		return
	}
	if n.lazy {
		// Only a truncation to 0 reaches here: every other size change
		// fetches the bytes first (tree_lazy.go).
		t.unlazy(n)
		n.content = nil
	}
	if size <= int64(cap(n.content)) && !n.shared {
		n.content = n.content[:size]
		for i := old; i < size; i++ {
			n.content[i] = 0
		}
	} else {
		c := make([]byte, size, max(size, min(2*int64(cap(n.content)), store.MaxContentBytes)))
		copy(c, n.content)
		n.content, n.shared = c, false
	}
	if n.parent != nil {
		t.bytes += size - old
	}
	n.dirty = true
	n.edits++
	n.mtime = time.Now()
	n.ctime = n.mtime
}

// SetAttrIn is a setattr request; nil fields are left alone.
type SetAttrIn struct {
	Size         *int64
	Mode         *uint32
	UID, GID     *uint32
	Atime, Mtime *time.Time
	// Journal records a size change at once: it was made without a
	// writable handle (truncate(2) by path, open(O_RDONLY|O_TRUNC)), so
	// no writer's close will. If the journal can't take it, nothing
	// changes and SetAttr fails.
	Journal bool
}

// truncate sets n's size; with journal, the new content is journaled
// first, and n changes only once it is: on failure n is left exactly as
// it was.
//
// REQUIRES: t.mu held; t.jmu too with journal.
func (t *Tree) truncate(n *node, size int64, journal bool) error {
	if !journal || n.parent == nil || size == n.size() {
		t.setSize(n, size)
		return nil
	}
	// The content n will have, made aside (a lazy file is only ever
	// truncated to 0 here: its bytes are not needed).
	c := make([]byte, size)
	if !n.lazy {
		copy(c, n.content)
	}
	edits := n.edits
	if err := t.appendUnlocked(FileState{FileID: n.fileID, Path: n.path(), Content: c}); err != nil {
		return err
	}
	unchanged := n.edits == edits
	t.setSize(n, size)
	if unchanged {
		n.dirty = false // the whole content, an open writer's bytes too, is journaled
	}
	delete(t.unjournaled, n.ino)
	return nil
}

// SetAttr truncates and changes metadata. Mode, owner and times are kept
// locally and never synced. A truncation of a lazy file to any size but 0
// (or its own) waits for its content.
func (t *Tree) SetAttr(ino uint64, in SetAttrIn) (a Attr, err error) {
	err = t.retry(func() error {
		a, err = t.setAttr(ino, in)
		return err
	})
	return a, err
}

func (t *Tree) setAttr(ino uint64, in SetAttrIn) (Attr, error) {
	if in.Journal {
		t.lockJournal()
		defer t.unlockJournal()
	} else {
		t.mu.Lock()
		defer t.mu.Unlock()
	}
	n, err := t.get(ino)
	if err != nil {
		return Attr{}, err
	}
	if n.marker {
		return Attr{}, ErrNotPermit
	}
	if t.opts.ReadOnly {
		return Attr{}, ErrReadOnly
	}
	if in.Size != nil {
		if n.dir {
			return Attr{}, ErrIsDir
		}
		if *in.Size < 0 {
			return Attr{}, ErrInvalidArg
		}
		if *in.Size > store.MaxContentBytes {
			t.warnTooLarge(n, *in.Size)
			return Attr{}, ErrTooLarge
		}
		if t.frozen && *in.Size != n.size() {
			return Attr{}, ErrReadOnly
		}
		if n.lazy && *in.Size != 0 && *in.Size != n.size() {
			return Attr{}, needBytes{[]string{n.fileID}}
		}
		if err := t.truncate(n, *in.Size, in.Journal); err != nil {
			return Attr{}, err
		}
	}
	if in.Mode != nil {
		n.mode = *in.Mode & 0o7777
	}
	if in.UID != nil {
		n.uid = *in.UID
	}
	if in.GID != nil {
		n.gid = *in.GID
	}
	if in.Atime != nil {
		n.atime = *in.Atime
	}
	if in.Mtime != nil {
		n.mtime = *in.Mtime
	}
	n.ctime = time.Now()
	return n.attr(), nil
}

// Commit journals a changed file's whole content (at close/flush). If the
// journal can't take it (a full state dir, an I/O error on the journal),
// the file keeps its new content, still dirty, and is journaled by
// RetryUnjournaled once it can; the error (ENOSPC, EIO, ...) tells the
// closer. Content that can't be
// uploaded (not UTF-8) is journaled like any other and Commit returns
// ErrNotUTF8: nothing is lost, the upload waits until it is valid.
func (t *Tree) Commit(ino uint64) error {
	t.lockJournal()
	defer t.unlockJournal()
	n, err := t.get(ino)
	if err != nil {
		return nil // unlinked meanwhile: nothing to keep
	}
	if err := t.commit(n); err != nil {
		return err
	}
	if n.dir || n.marker || n.parent == nil {
		return nil
	}
	return t.checkUTF8(n, n.path())
}

// CommitFile journals the file with fileID if its content changed since it
// was last journaled — writes through a handle still open. The sync engine
// calls it before merging a remote change into the file, so that those
// writes count as a local change (the store wins and they go to the
// conflict log) instead of being replaced unseen. If they can't be
// journaled it returns the error, and the engine must leave the file as
// it is.
func (t *Tree) CommitFile(fileID string) error {
	t.lockJournal()
	defer t.unlockJournal()
	if t.opts.ReadOnly {
		return nil
	}
	n := t.byFileID(fileID)
	if n == nil {
		return nil
	}
	return t.commit(n)
}

// commit journals n if it changed. A failure keeps n dirty and remembers
// it for RetryUnjournaled. The journal writes with t.mu given up (see
// Tree): n's content is marked shared meanwhile, so a write through an
// open handle copies it instead of changing the bytes being journaled,
// and a file written again meanwhile stays dirty, for its next close.
//
// REQUIRES: t.jmu and t.mu held.
func (t *Tree) commit(n *node) error {
	if n.dir || n.marker || n.parent == nil || !n.dirty {
		return nil
	}
	st := FileState{FileID: n.fileID, Path: n.path(), Content: n.content}
	edits, shared := n.edits, n.shared
	n.shared = true
	var kept [][]byte
	var err error
	if sj, ok := t.opts.Journal.(SharingJournal); ok {
		kept, err = t.appendSharedUnlocked(sj, st)
	} else {
		err = t.appendUnlocked(st)
	}
	unchanged := n.edits == edits
	if unchanged {
		n.shared = shared
	}
	if err != nil {
		t.unjournaled[n.ino] = err
		return err
	}
	delete(t.unjournaled, n.ino) // what the failed close had is journaled now
	if !unchanged {
		return nil
	}
	n.dirty = false
	if len(kept) == 1 && kept[0] != nil && len(kept[0]) == len(n.content) {
		n.content, n.shared = kept[0], true // the journal's copy; ours is garbage now
	}
	return nil
}

// Unjournaled lists the files whose close could not be journaled and
// that hold content the journal does not have yet, with why.
func (t *Tree) Unjournaled() map[string]error {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]error{}
	for ino, err := range t.unjournaled {
		if n, ok := t.byIno[ino]; ok && n.parent != nil && n.dirty {
			out[n.path()] = err
		}
	}
	return out
}

// RetryUnjournaled journals the files whose close could not be journaled,
// and returns how many still could not be (with the last error). The
// sync engine calls it every second while any is left, and before every
// pass.
func (t *Tree) RetryUnjournaled() (left int, err error) {
	t.lockJournal()
	defer t.unlockJournal()
	for ino := range t.unjournaled {
		n, ok := t.byIno[ino]
		if !ok || n.parent == nil || !n.dirty {
			delete(t.unjournaled, ino) // gone, or journaled by a later close
			continue
		}
		if cerr := t.commit(n); cerr != nil {
			left, err = left+1, cerr
		}
	}
	return left, err
}

// Fsync commits the file and waits for the journal to reach stable storage.
func (t *Tree) Fsync(ino uint64) error {
	err := t.Commit(ino)
	if err != nil && err != ErrNotUTF8 {
		return err
	}
	if t.opts.ReadOnly {
		return err
	}
	if serr := t.opts.Journal.Sync(); serr != nil {
		return serr
	}
	return err
}
