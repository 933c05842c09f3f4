package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// shouldCompactLocked reports whether rewriting the journal as one record per
// pending entry pays: the file is over max(CompactMinBytes, 2 × a compacted
// journal), or it holds records while nothing is pending.
//
// REQUIRES: j.mu held.
func (j *Journal) shouldCompactLocked() bool {
	if j.closed || j.err != nil {
		return false
	}
	if len(j.st.pending) == 0 {
		return j.size > headerLen
	}
	return j.size > max(j.opts.CompactMinBytes, 2*(headerLen+j.st.liveBytes))
}

// compact rewrites the journal as the header plus one record per pending
// entry, in two phases (see "Compaction" in the package doc). It is called
// only by the owner goroutine, or by Open before that starts, so two
// compactions never overlap. A failure before the rename leaves the old
// journal in use and removes journal.tmp.
func (j *Journal) compact(ctx context.Context) (err error) {
	// Phase 1, under the lock: snapshot. Records are immutable once
	// encoded, so the slices stay valid after the lock is released.
	j.mu.Lock()
	if !j.shouldCompactLocked() {
		j.mu.Unlock()
		return nil
	}
	var recs [][]byte
	for _, e := range j.st.sortedPending() {
		recs = append(recs, e.rec)
	}
	baseLSN, snapEnd, old := j.st.lastLSN, j.size, j.f
	j.mu.Unlock()

	// Phase 1, unlocked: write and fsync journal.tmp.
	tmpPath := j.path + ".tmp"
	tmp, err := os.OpenFile(tmpPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("compact %s: %w", j.path, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpPath)
		}
	}()
	w := bufio.NewWriterSize(tmp, 256<<10)
	size := int64(0)
	for _, b := range append([][]byte{encodeHeader(baseLSN)}, recs...) {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("compact %s: write %s: %w", j.path, tmpPath, err)
		}
		size += int64(len(b))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("compact %s: write %s: %w", j.path, tmpPath, err)
	}
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
	if j.closed || j.err != nil {
		return nil
	}
	if j.f != old {
		return errors.New("syncqueue: journal file replaced during compaction")
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
	if err := syncDir(j.dir); err != nil {
		return j.failLocked(fmt.Errorf("compact %s: fsync directory after rename: %w", j.path, err))
	}
	j.syncedLSN = j.st.lastLSN
	return nil
}

// writeFileAtomic makes path hold data durably or not at all: tmp → fsync →
// rename → fsync dir. It uses path+".tmp", which Open clears.
func writeFileAtomic(path string, data []byte) error {
	tmpPath := path + ".tmp"
	f, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmpPath, path)
	}
	if err != nil {
		os.Remove(tmpPath)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory, making renames and creations in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
