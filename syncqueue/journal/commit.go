package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Sync returns once every record written before the call is on stable
// storage (fdatasync): what an application's fsync waits for. It does not
// hold the journal's lock during the fdatasync, and costs nothing when the
// group commit already covered everything.
//
// A failed fdatasync faults the journal, and Sync recovers at once by
// writing everything pending into a fresh journal file (see recover.go):
// when that works the records are on stable storage after all and Sync
// returns nil; otherwise it returns the *IOError, and so does every
// change until a recovery works.
func (j *Journal) Sync() error {
	j.mu.Lock()
	if err := j.usableLocked(); err != nil {
		j.mu.Unlock()
		return err
	}
	if j.fault != nil {
		j.mu.Unlock()
		return j.recoverFault()
	}
	target, f, hook := j.st.lastLSN, j.f, j.testHookSync
	if j.syncedLSN >= target {
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()

	err := syncWith(f, hook)

	j.mu.Lock()
	if j.syncedLSN >= target {
		// A compaction or recovery (which sync the new file before its
		// rename) or another Sync covered it.
		j.mu.Unlock()
		return nil
	}
	if err != nil {
		if j.closed {
			j.mu.Unlock()
			return ErrClosed
		}
		if j.err != nil {
			defer j.mu.Unlock()
			return j.err
		}
		j.faultLocked(j.ioError("fdatasync", err))
		j.mu.Unlock()
		return j.recoverFault()
	}
	j.syncedLSN = target
	j.mu.Unlock()
	return nil
}

// compactRetry is how soon a failed compaction is tried again when the
// journal needs one to save its state or to give room back (a full disk),
// without waiting for the next write.
const compactRetry = time.Second

// run is the owner goroutine: after a write it waits GroupCommit, then
// fdatasyncs everything written so far and compacts if that pays; while
// compactions fail it retries every compactRetry. It exits when Close
// cancels ctx, after the final fdatasync and the release of the file and
// the lock.
func (j *Journal) run(ctx context.Context) {
	defer close(j.done)
	defer j.shutdown()
	retry := time.NewTimer(compactRetry)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			if j.tend(ctx) {
				retry.Reset(compactRetry)
			}
			continue
		case <-j.kick:
		}
		t := time.NewTimer(j.opts.GroupCommit)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// A failure faults the journal; Sync logs it and tries to
		// recover once, the retry timer every compactRetry after.
		_ = j.Sync()
		if j.faulted() || j.maybeCompact(ctx) {
			retry.Reset(compactRetry)
		}
	}
}

// tend is the owner goroutine's retry: it recovers a faulted journal,
// and otherwise compacts if that pays. It reports whether to try again.
func (j *Journal) tend(ctx context.Context) (retry bool) {
	if j.faulted() {
		return j.recoverFault() != nil && ctx.Err() == nil
	}
	return j.maybeCompact(ctx)
}

// maybeCompact compacts if that pays, logging a failing streak once and its
// end once rather than every attempt. It reports whether the compaction
// failed and must be retried.
func (j *Journal) maybeCompact(ctx context.Context) (retry bool) {
	err := j.compact(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil && !j.compactFailing:
		j.compactFailing = true
		j.log.WithError(err).Warn("journal compaction failed; the journal keeps growing until it works (retried every second)")
	case err != nil:
		j.log.WithError(err).Debug("journal compaction failed again")
	case j.compactFailing:
		j.compactFailing = false
		j.log.Info("journal compaction works again")
	}
	return err != nil && ctx.Err() == nil
}

// shutdown runs as the owner goroutine exits: final fdatasync (or, on a
// faulted journal, one last recovery), close the journal, release the
// lock. Its result is what Close returns.
func (j *Journal) shutdown() {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	if j.err == nil && j.fault == nil && j.syncedLSN < j.st.lastLSN {
		if err := j.syncFile(j.f); err != nil {
			j.faultLocked(j.ioError("fdatasync", err))
		} else {
			j.syncedLSN = j.st.lastLSN
		}
	}
	switch {
	case j.err != nil:
		errs = append(errs, j.err)
	case j.fault != nil:
		if err := j.recoverFaultLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := j.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		errs = append(errs, fmt.Errorf("close journal %s: %w", j.path, err))
	}
	if err := j.lock.release(); err != nil {
		errs = append(errs, err)
	}
	j.closeErr = errors.Join(errs...)
}

// Close stops the owner goroutine, fdatasyncs what is not yet on stable
// storage, closes the journal and releases the directory lock. Every other
// method returns ErrClosed once Close has begun. Close is idempotent: each
// call waits for the shutdown and returns its result. If ctx ends first,
// Close returns ctx's error and the goroutine finishes the shutdown by
// itself (a later Close can wait for it).
func (j *Journal) Close(ctx context.Context) error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.cancel()
	select {
	case <-j.done:
	case <-ctx.Done():
		return fmt.Errorf("close journal %s: %w", j.path, ctx.Err())
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closeErr
}
