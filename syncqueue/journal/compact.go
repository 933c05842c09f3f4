package journal

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/memfs/memfs/store/durable"
)

// shouldCompactLocked reports whether rewriting the journal as one record per
// pending entry pays: the file is over max(CompactMinBytes, 2 × a compacted
// journal), or it holds records while nothing is pending, or the state
// in memory holds bookkeeping that could not be written (unsaved).
//
// REQUIRES: j.mu held.
func (j *Journal) shouldCompactLocked() bool {
	if j.closed || j.err != nil || j.fault != nil {
		return false // a faulted journal is rewritten by its recovery
	}
	if j.unsaved {
		return true
	}
	if len(j.st.pending) == 0 {
		return j.size > j.emptyLen
	}
	return j.size > max(j.opts.CompactMinBytes, 2*(j.emptyLen+j.st.liveBytes))
}

// compact compacts if that pays. Compactions are serialised by compactMu
// (the owner goroutine's, Open's, and Append's when it needs room).
func (j *Journal) compact(ctx context.Context) error {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	return j.compactOnce(ctx, false)
}

// compactOnce rewrites the journal as the header plus one record per
// pending entry, in two phases (see "Compaction" in the package doc);
// with force, whenever that makes the file smaller. A failure before the
// rename leaves the old journal in use and removes journal.tmp. When
// nothing is pending and there is no room for journal.tmp, the journal
// is cut back to its header in place instead.
//
// REQUIRES: j.compactMu held.
func (j *Journal) compactOnce(ctx context.Context, force bool) (err error) {
	// Phase 1, under the lock: snapshot. Records are immutable once
	// encoded, so the slices stay valid after the lock is released.
	j.mu.Lock()
	if !j.shouldCompactLocked() && !(force && j.size > j.emptyLen+j.st.liveBytes && !j.closed && j.err == nil && j.fault == nil) {
		j.mu.Unlock()
		return nil
	}
	var recs [][]byte
	for _, e := range j.st.sortedPending() {
		recs = append(recs, e.rec)
	}
	baseLSN, snapEnd, old, snapUnwritten, hook := j.st.lastLSN, j.size, j.f, j.unwritten, j.testHookWrite
	j.mu.Unlock()
	if hook != nil {
		if err := hook(nil); err != nil {
			return j.truncateIfEmpty(fmt.Errorf("compact %s: %w", j.path, err))
		}
	}

	// Phase 1, unlocked: write and fsync journal.tmp.
	tmpPath := j.path + ".tmp"
	tmp, size, op, err := writeFresh(tmpPath, j.header(baseLSN), recs)
	if err != nil {
		if op == "create" {
			return j.truncateIfEmpty(fmt.Errorf("compact %s: %w", j.path, err))
		}
		return j.truncateIfEmpty(fmt.Errorf("compact %s: write %s: %w", j.path, tmpPath, err))
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpPath)
		}
	}()
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("compact %s: fsync %s: %w", j.path, tmpPath, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.testHookCompactPhase1 != nil {
		j.testHookCompactPhase1()
	}

	// Phase 2, locked: append what was written meanwhile, commit.
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || j.err != nil || j.fault != nil {
		// A fault meanwhile: the tail below would be read from a file
		// that can't be trusted; the recovery rewrites it all.
		return nil
	}
	if j.f != old {
		return errors.New("journal: file replaced during compaction")
	}
	if j.unwritten != snapUnwritten {
		// Bookkeeping taken in memory only during phase 1 is in no
		// record of journal.tmp: it needs another compaction.
		return errors.New("journal: state changed in memory during compaction; compacting again")
	}
	if tailLen := j.size - snapEnd; tailLen > 0 {
		tail := make([]byte, tailLen)
		if _, err := old.ReadAt(tail, snapEnd); err != nil {
			return fmt.Errorf("compact %s: read records appended meanwhile: %w", j.path, err)
		}
		if _, err := tmp.Write(tail); err != nil {
			return fmt.Errorf("compact %s: write %s: %w", j.path, tmpPath, err)
		}
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("compact %s: fsync %s: %w", j.path, tmpPath, err)
		}
		size += tailLen
	}
	if err := os.Rename(tmpPath, j.path); err != nil {
		return fmt.Errorf("compact %s: %w", j.path, err)
	}
	// From here the name points at the new file: appends must go there.
	committed = true
	j.f, j.size = tmp, size
	old.Close()
	if err := durable.SyncDir(j.dir); err != nil {
		// The new file is synced, its name may not be.
		j.faultLocked(&IOError{Op: "fsync directory after a compaction", Path: j.dir, Err: err})
		return j.recoverFaultLocked()
	}
	j.syncedLSN = j.st.lastLSN
	j.unsaved = false
	return nil
}

// truncateIfEmpty is compaction's way out of a full disk when nothing is
// pending: the journal is cut back to its header in place (ftruncate
// needs no room; a crash leaves the old records, whose replay re-uploads
// what the store already holds, which its preconditions recognise).
// Otherwise it returns err.
//
// REQUIRES: j.compactMu held.
func (j *Journal) truncateIfEmpty(err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || j.err != nil || j.fault != nil || len(j.st.pending) != 0 {
		return err
	}
	if terr := j.f.Truncate(j.emptyLen); terr != nil {
		return errors.Join(err, terr)
	}
	if serr := j.syncFile(j.f); serr != nil {
		j.faultLocked(j.ioError("fdatasync after cutting it to its header", serr))
		return j.recoverFaultLocked()
	}
	j.size, j.syncedLSN, j.unsaved = j.emptyLen, j.st.lastLSN, false
	return nil
}
