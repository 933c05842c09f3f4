package journal

import (
	"bufio"
	"errors"
	"os"
	"syscall"

	"github.com/memfs/memfs/store/durable"
)

// After an I/O error on the journal file — a failed fdatasync above all —
// the state of the file's unsynced pages is unknown: the kernel may have
// dropped them, or marked them clean while the disk never got them, so a
// later fdatasync that succeeds proves nothing ("fsyncgate"). The journal
// then neither retries the same sync nor appends to that file, and never
// reads it back. Everything pending is in memory, so it recovers the way
// durable logs do: write it all into a fresh journal.tmp, fdatasync it,
// rename it over journal, fsync the directory, and go on with the new
// file. Until that works the journal is faulted (see "Faults" in the
// package doc).

// faultLocked puts the journal in the faulted state with err (an
// *IOError), logs it once per fault, and wakes the owner goroutine, which
// recovers. It returns err.
//
// REQUIRES: j.mu held.
func (j *Journal) faultLocked(err *IOError) error {
	if j.fault == nil {
		j.log.WithError(err).Error("I/O error on the journal: its file can't be trusted any more; writing everything pending from memory to a fresh journal file")
	}
	j.fault = err
	j.kickLocked()
	return err
}

// faulted reports whether the journal is faulted.
func (j *Journal) faulted() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fault != nil && !j.closed && j.err == nil
}

// recoverFault writes a fresh journal file if the journal is faulted. It
// returns nil when the journal is (now) sound, else the error that keeps
// it faulted.
func (j *Journal) recoverFault() error {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return ErrClosed
	}
	if j.err != nil {
		return j.err
	}
	return j.recoverFaultLocked()
}

// recoverFaultLocked is recoverFault with the locks held: a no-op when the journal
// is not faulted. It logs the first failure of a streak and its end.
//
// REQUIRES: j.compactMu and j.mu held.
func (j *Journal) recoverFaultLocked() error {
	if j.fault == nil {
		return nil
	}
	if err := j.rewriteLocked(); err != nil {
		j.fault = err
		if !j.recoverFailing {
			j.recoverFailing = true
			j.log.WithError(err).Error("could not write a fresh journal file: changes closed on the mount are refused with this error (they keep their new content and are journaled once it works; retried every second)")
		} else {
			j.log.WithError(err).Debug("could not write a fresh journal file, again")
		}
		return err
	}
	j.fault, j.recoverFailing = nil, false
	j.log.WithField("pending", len(j.st.pending)).Warn("journal recovered: a fresh journal file holds everything pending; changes are journaled again")
	return nil
}

// rewriteLocked writes the pending state, from memory, as a fresh journal
// (header plus one record per pending entry, as a compaction does) and
// switches to it. It never reads the old file.
//
// REQUIRES: j.compactMu and j.mu held.
func (j *Journal) rewriteLocked() *IOError {
	tmpPath := j.path + ".tmp"
	fail := func(op, path string, err error) *IOError {
		return &IOError{Op: op, Path: path, Err: err}
	}
	if j.testHookWrite != nil {
		if err := j.testHookWrite(nil); err != nil {
			return fail("write", tmpPath, err)
		}
	}
	recs := [][]byte{}
	for _, e := range j.st.sortedPending() {
		recs = append(recs, e.rec)
	}
	tmp, size, op, err := writeFresh(tmpPath, j.header(j.st.lastLSN), recs)
	if err != nil {
		return fail(op, tmpPath, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpPath)
		}
	}()
	if err := j.syncFile(tmp); err != nil {
		return fail("fdatasync", tmpPath, err)
	}
	if err := os.Rename(tmpPath, j.path); err != nil {
		return fail("rename", tmpPath, err)
	}
	// From here the name points at the new file: appends must go there.
	committed = true
	j.f.Close() // its error says nothing we can use: the file is gone
	j.f, j.size = tmp, size
	if err := durable.SyncDir(j.dir); err != nil {
		// The new file is synced, its name may not be: another fresh
		// file is written at the next attempt.
		return fail("fsync directory", j.dir, err)
	}
	j.syncedLSN = j.st.lastLSN
	j.unsaved = false
	return nil
}

// writeFresh creates path anew and writes to it a journal's header (with
// its CONTEXT record) and then recs, through one buffer: what a compaction and a
// recovery both start with. It returns the file, open for appends, and its
// size; on error, the step that failed ("create" or "write"), with the
// file closed and removed. The caller syncs it.
func writeFresh(path string, header []byte, recs [][]byte) (*os.File, int64, string, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, "create", err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	size := int64(0)
	for _, b := range append([][]byte{header}, recs...) {
		if _, err = w.Write(b); err != nil {
			break
		}
		size += int64(len(b))
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, 0, "write", err
	}
	return f, size, "", nil
}

// syncFile fdatasyncs f, through the test seam when one is set. Control
// holds a reference on the descriptor, so a file closed meanwhile (by a
// compaction or a recovery) makes it fail instead of syncing a reused fd.
//
// REQUIRES: j.mu held, or hook read under it (see Sync).
func (j *Journal) syncFile(f *os.File) error {
	return syncWith(f, j.testHookSync)
}

// syncWith fdatasyncs f; a non-nil hook runs first and may fail it.
func syncWith(f *os.File, hook func(*os.File) error) error {
	if hook != nil {
		if err := hook(f); err != nil {
			return err
		}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = fdatasync(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// writeFault reports whether a failed write(2) leaves the journal file in
// an unknown state: anything but a full disk or quota, whose partial
// record is simply cut off again.
func writeFault(err error) bool {
	return !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT)
}

// ioError wraps a failed operation on the journal file.
func (j *Journal) ioError(op string, err error) *IOError {
	return &IOError{Op: op, Path: j.path, Err: err}
}
