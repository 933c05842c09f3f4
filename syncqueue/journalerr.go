package syncqueue

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue/journal"
)

// ReasonJournalIO begins the reason of a change the journal could not
// take because of an I/O error on its file: status shows it with the
// errno, "I/O error on the journal (EIO)" (see JournalIOReason).
const ReasonJournalIO = "I/O error on the journal"

// ReasonJournal is the reason of a change the journal refused for a cause
// that is neither a full state dir nor an I/O error (it was closing, say);
// the change's error says which.
const ReasonJournal = "the journal could not record it"

// JournalIOReason is the reason status gives for an I/O error on the
// journal: ReasonJournalIO with the errno's name.
func JournalIOReason(err *journal.IOError) string {
	return fmt.Sprintf("%s (%s)", ReasonJournalIO, err.ErrnoName())
}

// journalReason names, truthfully, why the journal could not take a
// change: no space (ENOSPC, EDQUOT: noSpace is true), an I/O error with
// its errno, or ReasonJournal.
func journalReason(err error) (reason string, noSpace bool) {
	var ioe *journal.IOError
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ReasonNoSpace, true
	case errors.As(err, &ioe):
		return JournalIOReason(ioe), false
	default:
		return ReasonJournal, false
	}
}

// journalError marks an error of the journal met while settling a
// change the store answered: the store was reached, so it is no outage.
type journalError struct{ err error }

func (e *journalError) Error() string {
	return "record the store's answer in the journal: " + e.err.Error()
}
func (e *journalError) Unwrap() error { return e.err }

// OpNotUploaded is the Op status gives a file the local side keeps and
// never uploads (an *fs.Skipped of Local.Unjournaled: a symbolic link, a
// FIFO, a hard link, a name no memory can have, a file over a memory's
// size), with the Skipped's reason: no pass tries it, and it is not in
// the journal, so a mount's end neither leaves nor loses it.
const OpNotUploaded = "not uploaded"

// isSkipped reports whether err, of Local.Unjournaled, is a file never
// uploaded rather than a close the journal could not take.
func isSkipped(err error) bool {
	var s *fs.Skipped
	return errors.As(err, &s)
}

// unjournaledCloses is the part of Local.Unjournaled the journal could
// not take: what RetryUnjournaled can journal, and what the end of a
// mount loses; the files never uploaded are left out.
func unjournaledCloses(u map[string]error) map[string]error {
	out := make(map[string]error, len(u))
	for p, err := range u {
		if !isSkipped(err) {
			out[p] = err
		}
	}
	return out
}

// localPending is what status shows of one file of Local.Unjournaled:
// a file never uploaded (OpNotUploaded, with its reason), or a close the
// journal could not take ("unjournaled", with journalReason; noSpace
// when it was for want of room).
func localPending(p string, err error) (c PendingChange, noSpace bool) {
	var s *fs.Skipped
	if errors.As(err, &s) {
		return PendingChange{Path: p, Op: OpNotUploaded, Reason: s.Reason}, false
	}
	reason, noSpace := journalReason(err)
	return PendingChange{Path: p, Op: "unjournaled", Reason: reason, Error: err.Error()}, noSpace
}

// retryUnjournaled journals again the closes the journal could not
// take, when there are any: a file never uploaded is not retried (for a
// directory, a retry is a look at the whole folder).
func (e *Engine) retryUnjournaled() (left int, err error) {
	if len(unjournaledCloses(e.tree.Unjournaled())) == 0 {
		return 0, nil
	}
	return e.tree.RetryUnjournaled()
}
