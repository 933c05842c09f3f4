package journal

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spaceSlack is room kept free beyond one compaction of the pending state:
// the confirmations that follow an upload (about 100 bytes each) and the
// file system's own rounding to pages.
const spaceSlack = 64 << 10

// ErrNoSpace is matched by the error Append returns when the journal's
// directory has no room for the change (and for one compaction after it).
// The error also matches syscall.ENOSPC, so the filesystem answers ENOSPC.
var ErrNoSpace = errors.New("no space left for the journal")

// noSpaceError is ErrNoSpace with the figures; it matches syscall.ENOSPC too.
type noSpaceError struct {
	dir         string
	need, avail int64
}

func (e *noSpaceError) Error() string {
	return fmt.Sprintf("%v in %s: the change and a compaction of what is pending need %d bytes, %d are free", ErrNoSpace, e.dir, e.need, e.avail)
}

// Is makes errors.Is(err, ErrNoSpace) true.
func (e *noSpaceError) Is(target error) bool { return target == ErrNoSpace }

// Unwrap is syscall.ENOSPC, so errors.Is and errors.As see the errno the
// filesystem answers with.
func (e *noSpaceError) Unwrap() error { return syscall.ENOSPC }

// roomLocked reports whether the directory has room for raws and, after
// them, for one compaction of the pending state (plus spaceSlack): the
// rule that keeps a full disk from wedging the journal, since the
// confirmations that shrink it and the compaction that frees its history
// both need room to be written.
//
// REQUIRES: j.mu held.
func (j *Journal) roomLocked(raws [][]byte, recs []*record) error {
	write := int64(0)
	live := j.st.liveBytes
	for i, r := range recs {
		write += int64(len(raws[i]))
		if old := j.st.pending[r.fileID]; old != nil {
			live -= int64(len(old.rec))
		}
		if r.typ == recPut || r.origin != "" {
			live += int64(len(raws[i]))
		}
	}
	avail, err := j.availBytes()
	if err != nil {
		return nil // can't tell: let the write itself decide
	}
	need := write + j.emptyLen + live + spaceSlack
	if avail < need {
		return &noSpaceError{dir: j.dir, need: need, avail: avail}
	}
	return nil
}

// availBytes is the space an unprivileged writer may still use in the
// journal's directory.
func (j *Journal) availBytes() (int64, error) {
	if j.testHookAvail != nil {
		return j.testHookAvail(), nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(j.dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// noSpaceLocked notes (and logs once per episode) that a write was
// refused or failed for want of space.
//
// REQUIRES: j.mu held.
func (j *Journal) noSpaceLocked(err error) {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return
	}
	// One error line per episode, and at most one a minute: while the
	// disk stays nearly full, refusals and successes alternate.
	if !j.noSpace && time.Since(j.noSpaceLogged) > noSpaceLogEvery {
		j.noSpaceLogged = time.Now()
		j.log.WithError(err).Error("the state dir is full: changes closed on the mount can't be journaled (close fails with ENOSPC, the file keeps its new content and is journaled once there is room); free space in the state dir")
	} else {
		j.log.WithError(err).Debug("the state dir is still full")
	}
	j.noSpace = true
}

// noSpaceLogEvery spaces the "state dir is full" errors.
const noSpaceLogEvery = time.Minute

// compactNow runs a compaction at once (Append, when the file's history
// takes the room a change needs), serialised with the owner goroutine's.
func (j *Journal) compactNow() error {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	return j.compactOnce(j.ctx, true)
}
