package syncqueue

import (
	"errors"
	"fmt"
	"syscall"

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
