package syncqueue

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/memfs/memfs/syncqueue/journal"
)

// Status names the true cause of a change the journal could not take:
// no space only for ENOSPC and EDQUOT, an I/O error with its errno for
// the rest, never a guess.
func TestJournalReason(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		reason  string
		noSpace bool
	}{
		{"a full state dir", fmt.Errorf("append to journal /s/journal: %w", syscall.ENOSPC), ReasonNoSpace, true},
		{"a quota", fmt.Errorf("append to journal /s/journal: %w", syscall.EDQUOT), ReasonNoSpace, true},
		{"a failed fdatasync", &journal.IOError{Op: "fdatasync", Path: "/s/journal", Err: syscall.EIO}, "I/O error on the journal (EIO)", false},
		{"a read-only remount", &journal.IOError{Op: "write", Path: "/s/journal", Err: syscall.EROFS}, "I/O error on the journal (EROFS)", false},
		{"a full disk under a fresh journal file", &journal.IOError{Op: "write", Path: "/s/journal.tmp", Err: syscall.ENOSPC}, ReasonNoSpace, true},
		{"a journal closing", fmt.Errorf("put /a.md: %w", journal.ErrClosed), ReasonJournal, false},
	} {
		reason, noSpace := journalReason(tc.err)
		if reason != tc.reason || noSpace != tc.noSpace {
			t.Errorf("%s (%v): reason %q, no space %v; want %q, %v", tc.name, tc.err, reason, noSpace, tc.reason, tc.noSpace)
		}
	}
	if r, _ := journalReason(&journalError{&journal.IOError{Op: "fdatasync", Err: syscall.EIO}}); r != "I/O error on the journal (EIO)" {
		t.Errorf("a wrapped journal error: %q", r)
	}
	if r, _ := journalReason(&journal.IOError{Op: "fdatasync", Err: errors.New("no errno here")}); r != "I/O error on the journal (no errno)" {
		t.Errorf("an I/O error without an errno: %q", r)
	}
}
