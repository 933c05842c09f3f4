package journal

import (
	"errors"
	"fmt"

	"github.com/memfs/memfs/internal/filestate"
)

// Change is one file's new local state, as the filesystem records it
// (internal/filestate: the same type as fs.FileState). Append reads its
// FileID, Path, Content (ignored when Deleted) and Deleted; Origin must be
// empty, since the journal knows each file's base.
type Change = filestate.State

// Append records changes of distinct files with one write(2): after it
// returns nil every change is in the journal; after an error none is (a
// rename that replaces a file is a delete and a put: never half of it).
// Each state is made against its file's known base: its pending entry's
// Origin/BaseSHA, else the base set by SetBase or a Confirm, else none (a
// create). A put with a new path is a rename. Content is copied.
//
// A delete of a file that derives from a memory becomes a pending delete
// of it; for a file never uploaded the pending entry is dropped (a file
// created and removed between two flushes never reaches the store) —
// unless its upload was already in flight, in which case the Confirm that
// follows turns into a pending delete of the memory the upload created.
//
// Before writing, Append checks that the journal's directory keeps room
// for one compaction of the pending state after the write (see "Space"
// in the package doc); when it would not, it compacts first if that
// frees room, and otherwise returns an error wrapping ErrNoSpace (and
// syscall.ENOSPC) without writing anything.
func (j *Journal) Append(changes ...Change) ([]uint64, error) {
	seen := make(map[string]bool, len(changes))
	for _, c := range changes {
		if c.FileID == "" {
			return nil, errors.New("journal: a change with an empty file id")
		}
		if c.Origin != "" {
			return nil, fmt.Errorf("journal: a change of %s names its origin, which is the journal's to know", c.FileID)
		}
		if seen[c.FileID] {
			return nil, fmt.Errorf("journal: file %s changed twice in one append", c.FileID)
		}
		seen[c.FileID] = true
		if !c.Deleted && len(c.Content) > j.opts.MaxContentBytes {
			return nil, fmt.Errorf("put %s: %w (%d bytes, limit %d)", c.Path, ErrTooLarge, len(c.Content), j.opts.MaxContentBytes)
		}
	}
	compacted := false
	for {
		j.mu.Lock()
		if err := j.writableLocked(); err != nil {
			j.mu.Unlock()
			return nil, err
		}
		recs := make([]*record, len(changes))
		for i, c := range changes {
			b := j.st.baseOf(c.FileID)
			r := &record{typ: recPut, fileID: c.FileID, origin: b.MemoryID, baseSHA: b.SHA, path: c.Path, content: c.Content}
			if c.Deleted {
				r.typ, r.content = recDelete, nil
			} else if r.content == nil {
				r.content = []byte{}
			}
			recs[i] = r
		}
		raws := j.encodeLocked(recs)
		err := j.roomLocked(raws, recs)
		if err == nil {
			err = j.writeLocked(raws, recs)
			j.mu.Unlock()
			if err != nil {
				return nil, err
			}
			lsns := make([]uint64, len(recs))
			for i, r := range recs {
				lsns[i] = r.lsn
			}
			return lsns, nil
		}
		j.noSpaceLocked(err)
		canShrink := j.size > j.emptyLen+j.st.liveBytes
		j.mu.Unlock()
		if compacted || !canShrink {
			return nil, err
		}
		// The file holds history the pending state no longer needs:
		// rewriting it may free enough room.
		compacted = true
		if cerr := j.compactNow(); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
	}
}

// Confirm records that the store holds fileID's state as of record lsn: as
// memoryID with content sha at path, or, for a delete, nothing (memoryID
// ""). If lsn is the file's pending entry, the entry is released and
// (memoryID, sha) becomes the file's base; if a newer entry is pending, it
// is rebased on (memoryID, sha) so its upload carries the right
// precondition. The sync engine also uses Confirm when the store wins a
// conflict: the local state as of lsn is settled, the store's is the base.
//
// It returns an error wrapping ErrNotPending, and records nothing, when no
// entry at or after lsn is pending, or the file's state as of lsn (or a
// later one) was confirmed already: a repeated or stale confirmation.
//
// A confirmation that can't be written (the disk is full) still takes
// effect in memory; see "Space" in the package doc.
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
		delete(j.st.tombs, fileID)
		if memoryID != "" {
			return j.bookkeepLocked(&record{typ: recDelete, fileID: fileID, origin: memoryID, baseSHA: sha, path: path})
		}
		return nil
	}
	if err := j.st.checkConfirm(fileID, lsn); err != nil {
		return fmt.Errorf("confirm %s: %w", path, err)
	}
	return j.bookkeepLocked(&record{typ: recConfirm, fileID: fileID, confirmed: lsn, memoryID: memoryID, sha: sha, path: path})
}

// Rebase records that a file's pending change now applies on top of
// memory memoryID holding content sha (its upload's precondition), e.g.
// after our own earlier upload of the file was applied although its
// response was lost. With memoryID "" the memory is gone from the store:
// a pending put becomes a create of the file's content at its path (it is
// the only copy), a pending delete has nothing left to do. It returns
// ErrNotPending when the file has nothing pending. Like Confirm, it takes
// effect in memory even when the disk is full.
func (j *Journal) Rebase(fileID, memoryID, sha string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usableLocked(); err != nil {
		return err
	}
	e := j.st.pending[fileID]
	if e == nil {
		return fmt.Errorf("rebase %s: %w", fileID, ErrNotPending)
	}
	if memoryID == "" {
		sha = ""
	}
	delete(j.st.bases, fileID)
	r := &record{typ: recPut, fileID: fileID, origin: memoryID, baseSHA: sha, path: e.Path, content: e.Content}
	if e.Deleted {
		r.typ, r.content = recDelete, nil
	}
	return j.bookkeepLocked(r)
}

// encodeLocked assigns recs the next LSNs and encodes them.
//
// REQUIRES: j.mu held.
func (j *Journal) encodeLocked(recs []*record) [][]byte {
	raws := make([][]byte, len(recs))
	for i, r := range recs {
		r.lsn = j.st.lastLSN + 1 + uint64(i)
		raws[i] = encodeRecord(r, j.seal)
	}
	return raws
}

// writeLocked appends the encoded records with one write(2) and applies
// them. On a failed write nothing is applied (and the file is as before).
//
// REQUIRES: j.mu held.
func (j *Journal) writeLocked(raws [][]byte, recs []*record) error {
	if err := j.appendLocked(raws); err != nil {
		return err
	}
	j.noSpace = false
	return j.applyLocked(raws, recs)
}

// applyLocked applies written (or, for bookkeeping, unwritten) records.
//
// REQUIRES: j.mu held.
func (j *Journal) applyLocked(raws [][]byte, recs []*record) error {
	for i, r := range recs {
		if err := j.st.apply(r, raws[i]); err != nil {
			// The caller checked; a failure here is a bug, and the file
			// now holds a record replay would refuse.
			return j.failLocked(fmt.Errorf("journal: internal error applying %v lsn %d: %w", r.typ, r.lsn, err))
		}
	}
	return nil
}

// bookkeepLocked records one record of the sync engine's own bookkeeping
// (a confirmation, a rebase, the delete of a memory nobody has): records
// that lose no local content if they are lost, because the flusher's
// preconditions recognise an upload the store already holds. If the write
// fails (a full disk) the record still takes effect in memory, and the
// state is marked unsaved: the owner goroutine compacts (which writes the
// state as it is now) until that works.
//
// REQUIRES: j.mu held.
func (j *Journal) bookkeepLocked(r *record) error {
	recs := []*record{r}
	raws := j.encodeLocked(recs)
	if j.fault != nil {
		// The file can't be trusted: the recovery writes the state.
		j.unsaved = true
		j.unwritten++
		return j.applyLocked(raws, recs)
	}
	if err := j.appendLocked(raws); err != nil {
		if j.fault == nil {
			j.noSpaceLocked(err)
			if !j.unsaved {
				j.log.WithError(err).Warn("journal: could not record a confirmation from the store; it holds in memory and the journal is rewritten once there is room")
			}
		}
		j.unsaved = true
		j.unwritten++
		j.kickLocked()
	}
	return j.applyLocked(raws, recs)
}

// appendLocked writes framed records with one write(2). If the write
// fails for want of space, a partial write is cut off again; any other
// failure, or a failure to cut it off, faults the journal (the file's
// state is unknown: see recover.go) and returns the *IOError.
//
// REQUIRES: j.mu held.
func (j *Journal) appendLocked(raws [][]byte) error {
	buf := raws[0]
	if len(raws) > 1 {
		n := 0
		for _, r := range raws {
			n += len(r)
		}
		buf = make([]byte, 0, n)
		for _, r := range raws {
			buf = append(buf, r...)
		}
	}
	var err error
	if j.testHookWrite != nil {
		err = j.testHookWrite(buf) // fails the write before it writes
	}
	if err == nil {
		_, err = j.f.Write(buf)
	}
	if err != nil {
		if writeFault(err) {
			return j.faultLocked(j.ioError("write", err))
		}
		if terr := j.f.Truncate(j.size); terr != nil {
			return j.faultLocked(j.ioError("truncate a partial record", terr))
		}
		return fmt.Errorf("append to journal %s: %w", j.path, err)
	}
	j.size += int64(len(buf))
	j.kickLocked()
	return nil
}

// kickLocked wakes the owner goroutine (group commit, compaction).
//
// REQUIRES: j.mu held.
func (j *Journal) kickLocked() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}
