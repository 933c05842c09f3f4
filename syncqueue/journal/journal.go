package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sirupsen/logrus"
)

// journalFileName is the journal inside its directory.
const journalFileName = "journal"

// Journal is the durable journal of one mounted store. Create it with Open,
// release it with Close. Safe for concurrent use; see "Concurrency" in the
// package doc.
type Journal struct {
	dir, path string
	opts      Options
	log       logrus.FieldLogger
	lock      *dirLock

	// The owner goroutine (run): group commit, compaction, and on exit the
	// final fdatasync and release of the file and the lock.
	kick   chan struct{} // buffered(1): a record was written
	cancel context.CancelFunc
	done   chan struct{} // closed when the owner goroutine has exited

	// mu is the only mutex. Everything below is GUARDED_BY(mu).
	mu        sync.Mutex
	st        state
	f         *os.File // the journal, O_APPEND; replaced by compaction
	size      int64    // bytes of f
	syncedLSN uint64   // every record up to this LSN is on stable storage
	err       error    // sticky failure: the journal is fail-stop
	closed    bool     // Close was called
	closeErr  error    // result of the final sync/close, set before done closes

	compactFailing bool // only the owner goroutine (and Open) use it

	// testHookCompactPhase1, if set, runs between the two phases of a
	// compaction, without the lock. Tests only.
	testHookCompactPhase1 func()
}

// Open opens the journal in dir, creating the directory (0700) and the
// journal if needed, and returns it replayed: Pending holds what the last
// owner left unconfirmed.
//
// It takes an exclusive flock on dir/lock (ErrLocked, naming the holder's
// pid, if another process or Journal holds it), removes a leftover
// journal.tmp, cuts a torn tail off with a warning, and compacts the journal
// if that pays. A journal failing a check before its tail is moved aside and
// Open returns a *CorruptError (errors.Is(err, ErrCorrupt)); the next Open
// starts an empty journal. Open starts the goroutine that Close stops.
func Open(dir string, opts Options) (*Journal, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	lk, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j := &Journal{
		dir:  dir,
		path: filepath.Join(dir, journalFileName),
		opts: opts,
		log:  opts.Log.WithField("journal", dir),
		lock: lk,
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	if err := j.load(); err != nil {
		if j.f != nil {
			j.f.Close()
		}
		lk.release()
		return nil, err
	}
	if err := j.compact(context.Background()); err != nil {
		j.log.WithError(err).Warn("could not compact the journal after replay; will retry")
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	go j.run(ctx)
	return j, nil
}

// load reads and replays the journal file, repairing a torn tail, and opens
// it for appending. Called by Open before any other goroutine can see j.
func (j *Journal) load() error {
	if err := removeLeftoverTmp(j.path+".tmp", j.log); err != nil {
		return err
	}
	b, err := os.ReadFile(j.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && allZero(b)):
		if err == nil {
			// No record is all zeros, so there is nothing to lose.
			j.log.WithField("bytes", len(b)).Warn("journal holds only zeros (created, then a crash before its header reached the disk); starting it anew")
		}
		b = encodeHeader(0)
		if err := writeFileAtomic(j.path, b); err != nil {
			return fmt.Errorf("create journal %s: %w", j.path, err)
		}
	case err != nil:
		return fmt.Errorf("read journal: %w", err)
	}

	st := newState()
	var prev uint64
	res, err := scan(b, func(r *record, raw []byte) error {
		if r.lsn <= prev {
			return fmt.Errorf("%v record lsn %d is not greater than the previous record's %d", r.typ, r.lsn, prev)
		}
		prev = r.lsn
		return st.apply(r, raw)
	})
	if d, ok := asDamage(err); ok {
		return moveAside(j.dir, j.path, d, j.log)
	}
	if err != nil {
		return fmt.Errorf("open journal %s: %w", j.path, err)
	}
	st.lastLSN = max(st.lastLSN, res.baseLSN)
	// Detach the pending entries from the file image so it can be freed.
	for _, e := range st.pending {
		e.rec = bytes.Clone(e.rec)
		if !e.Deleted {
			e.Content = putContent(e.rec, len(e.Content))
		}
	}

	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.f = f
	if res.torn != nil {
		if err := cutTornTail(f, j.path, int64(len(b)), res, j.log); err != nil {
			return err
		}
	} else if err := fdatasync(int(f.Fd())); err != nil {
		// What the last owner wrote may not have reached the disk yet;
		// build on it only once it has.
		return fmt.Errorf("open journal %s: fdatasync: %w", j.path, err)
	}
	j.st, j.size, j.syncedLSN = st, res.end, st.lastLSN
	if n := len(st.pending); n > 0 {
		j.log.WithFields(logrus.Fields{"pending": n, "records": res.records}).Info("replayed journal: changes not yet confirmed by the store")
	}
	return nil
}

// Put records the whole new content of a file (at close or fsync of a
// changed file) and returns the record's LSN. The state is made against
// the file's known base: its pending entry's Origin/BaseSHA, else the base
// set by SetBase or a Confirm, else none (a create). A rename is a Put with
// the new path. Put returns once the record is written (write(2)); see
// "Durability" in the package doc. content is copied.
func (j *Journal) Put(fileID, path string, content []byte) (uint64, error) {
	if fileID == "" {
		return 0, errors.New("syncqueue: Put with an empty file id")
	}
	if len(content) > j.opts.MaxContentBytes {
		return 0, fmt.Errorf("put %s: %w (%d bytes, limit %d)", path, ErrTooLarge, len(content), j.opts.MaxContentBytes)
	}
	if content == nil {
		content = []byte{}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	b := j.st.baseOf(fileID)
	return j.recordLocked(&record{typ: recPut, fileID: fileID, origin: b.MemoryID, baseSHA: b.SHA, path: path, content: content})
}

// Delete records that a file was removed and returns the record's LSN. For
// a file that derives from a memory the pending state becomes a delete of
// it; for a file never uploaded the pending entry is dropped (a file created
// and removed between two flushes never reaches the store) — unless its
// upload was already in flight, in which case the Confirm that follows
// turns into a pending delete of the memory the upload created.
func (j *Journal) Delete(fileID, path string) (uint64, error) {
	if fileID == "" {
		return 0, errors.New("syncqueue: Delete with an empty file id")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	b := j.st.baseOf(fileID)
	return j.recordLocked(&record{typ: recDelete, fileID: fileID, origin: b.MemoryID, baseSHA: b.SHA, path: path})
}

// Confirm records that the store holds fileID's state as of record lsn: as
// memoryID with content sha at path, or, for a delete, nothing (memoryID
// ""). If lsn is the file's pending entry, the entry is released and
// (memoryID, sha) becomes the file's base; if a newer entry is pending, it
// is rebased on (memoryID, sha) so its upload carries the right
// precondition. The flusher also uses Confirm when the store wins a
// conflict: the local state as of lsn is settled, the store's is the base.
//
// It returns an error wrapping ErrNotPending, and records nothing, when no
// entry at or after lsn is pending, or the file's state as of lsn (or a
// later one) was confirmed already: a repeated or stale confirmation.
func (j *Journal) Confirm(fileID string, lsn uint64, memoryID, sha, path string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usableLocked(); err != nil {
		return err
	}
	if t, ok := j.st.tombs[fileID]; ok && j.st.pending[fileID] == nil && lsn < t {
		// The file was created, handed to the flusher, and removed while
		// its create was in flight: the store now holds a memory of a
		// file that no longer exists here. Delete it in turn.
		if memoryID != "" {
			if _, err := j.recordLocked(&record{typ: recDelete, fileID: fileID, origin: memoryID, baseSHA: sha, path: path}); err != nil {
				return err
			}
		}
		delete(j.st.tombs, fileID)
		return nil
	}
	if err := j.st.checkConfirm(fileID, lsn); err != nil {
		return fmt.Errorf("confirm %s: %w", path, err)
	}
	_, err := j.recordLocked(&record{typ: recConfirm, fileID: fileID, confirmed: lsn, memoryID: memoryID, sha: sha, path: path})
	return err
}

// recordLocked assigns r the next LSN, writes it, and applies it.
//
// REQUIRES: j.mu held.
func (j *Journal) recordLocked(r *record) (uint64, error) {
	if err := j.usableLocked(); err != nil {
		return 0, err
	}
	r.lsn = j.st.lastLSN + 1
	raw := encodeRecord(r)
	if err := j.appendLocked(raw); err != nil {
		return 0, err
	}
	if err := j.st.apply(r, raw); err != nil {
		// The caller checked; a failure here is a bug, and the file now
		// holds a record replay would refuse.
		return 0, j.failLocked(fmt.Errorf("syncqueue: internal error applying %v lsn %d: %w", r.typ, r.lsn, err))
	}
	return r.lsn, nil
}

// appendLocked writes one framed record with one write(2). If the write
// fails, a partial record is cut off again; if even that fails, the journal
// goes fail-stop (the next record would follow garbage).
//
// REQUIRES: j.mu held.
func (j *Journal) appendLocked(raw []byte) error {
	if _, err := j.f.Write(raw); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			return j.failLocked(fmt.Errorf("append to journal %s failed (%v) and the partial record could not be removed: %w", j.path, err, terr))
		}
		return fmt.Errorf("append to journal %s: %w", j.path, err)
	}
	j.size += int64(len(raw))
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// usableLocked returns why the journal can't take a call, if it can't.
//
// REQUIRES: j.mu held.
func (j *Journal) usableLocked() error {
	if j.closed {
		return ErrClosed
	}
	return j.err
}

// failLocked makes the journal fail-stop with err, logs it once, and
// returns it.
//
// REQUIRES: j.mu held.
func (j *Journal) failLocked(err error) error {
	if j.err == nil {
		j.err = err
		j.log.WithError(err).Error("journal failed; refusing further changes (those already written are kept)")
	}
	return j.err
}

// SetBase tells the journal what the store holds for a file loaded from it:
// memory memoryID with content sha (memoryID "" forgets the file's base).
// Later Puts and Deletes of fileID are made against it. A pending entry
// keeps its own base — the one its local edit was made against — so the
// store-wins check of its upload is not lost. Bases are kept in memory only.
func (j *Journal) SetBase(fileID, memoryID, sha string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if memoryID == "" {
		delete(j.st.bases, fileID)
		return
	}
	// Keep the LSN of the last confirmation: it still tells a repeated
	// Confirm from a new one.
	j.st.bases[fileID] = knownBase{Base{MemoryID: memoryID, SHA: sha}, j.st.bases[fileID].lsn}
}

// Base returns the base the next state of fileID would be made against:
// its pending entry's, else the one set by SetBase or Confirm.
func (j *Journal) Base(fileID string) (Base, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := j.st.baseOf(fileID)
	return b, b.MemoryID != ""
}

// Pending returns a snapshot of the pending entries in LSN order. Entry
// Content is shared with the journal and must not be modified.
func (j *Journal) Pending() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	ents := j.st.sortedPending()
	out := make([]Entry, len(ents))
	for i, e := range ents {
		e.handedOut = true
		out[i] = e.Entry
	}
	return out
}

// Stats are figures about a journal, for status and metrics.
type Stats struct {
	Pending   int    // pending entries (deletes included)
	Deletes   int    // pending entries that are deletes
	FileBytes int64  // size of the journal file
	LastLSN   uint64 // LSN of the last record written
	SyncedLSN uint64 // every record up to this LSN is on stable storage
}

// Stats returns current figures.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := Stats{Pending: len(j.st.pending), FileBytes: j.size, LastLSN: j.st.lastLSN, SyncedLSN: j.syncedLSN}
	for _, e := range j.st.pending {
		if e.Deleted {
			s.Deletes++
		}
	}
	return s
}

// Rebase records that a file's pending change now applies on top of
// memory memoryID holding content sha (its upload's precondition), e.g.
// after our own earlier upload of the file was applied although its
// response was lost. With memoryID "" the memory is gone from the store
// and the pending state becomes a create of the file's content at its path
// (it is the only copy). It returns ErrNotPending when the file has no
// pending (non-delete) entry.
func (j *Journal) Rebase(fileID, memoryID, sha string) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usableLocked(); err != nil {
		return 0, err
	}
	e := j.st.pending[fileID]
	if e == nil || e.Deleted {
		return 0, fmt.Errorf("rebase %s: %w", fileID, ErrNotPending)
	}
	if memoryID == "" {
		sha = ""
	}
	delete(j.st.bases, fileID)
	return j.recordLocked(&record{typ: recPut, fileID: fileID, origin: memoryID, baseSHA: sha, path: e.Path, content: append([]byte(nil), e.Content...)})
}
