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
func (j *Journal) Sync() error {
	j.mu.Lock()
	if err := j.usableLocked(); err != nil {
		j.mu.Unlock()
		return err
	}
	target, f := j.st.lastLSN, j.f
	if j.syncedLSN >= target {
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()

	// Control holds a reference on the descriptor, so a compaction that
	// closes f meanwhile can't make us fdatasync a reused fd; it makes
	// Control fail instead.
	var serr error
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { serr = fdatasync(int(fd)) })
	}
	if err == nil {
		err = serr
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if j.syncedLSN >= target {
		// A compaction (which fsyncs the new file before its rename) or
		// another Sync covered it.
		return nil
	}
	if err != nil {
		if j.closed {
			return ErrClosed
		}
		if j.err != nil {
			return j.err
		}
		return j.failLocked(fmt.Errorf("fdatasync journal %s: %w", j.path, err))
	}
	j.syncedLSN = target
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
			if j.maybeCompact(ctx) {
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
		// A failure is logged and made sticky by Sync itself.
		_ = j.Sync()
		if j.maybeCompact(ctx) {
			retry.Reset(compactRetry)
		}
	}
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

// shutdown runs as the owner goroutine exits: final fdatasync, close the
// journal, release the lock. Its result is what Close returns.
func (j *Journal) shutdown() {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	if j.err != nil {
		errs = append(errs, j.err)
	} else if j.syncedLSN < j.st.lastLSN {
		if err := fdatasync(int(j.f.Fd())); err != nil {
			errs = append(errs, fmt.Errorf("fdatasync journal %s: %w", j.path, err))
		} else {
			j.syncedLSN = j.st.lastLSN
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
