package journal

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is matched (errors.Is) by the *CorruptError Open returns when
	// the journal fails a check before its tail. The file has been moved aside.
	ErrCorrupt = errors.New("journal corrupt")

	// ErrUnsupportedVersion is returned by Open for a journal written by a
	// format version this code does not know. The file is left in place.
	ErrUnsupportedVersion = errors.New("unsupported journal version")

	// ErrLocked is matched by the error Open returns when another process (or
	// another Journal in this process) holds the directory's lock.
	ErrLocked = errors.New("journal directory locked")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("journal closed")

	// ErrNotPending is returned by Confirm when nothing pending for the file
	// matches: no pending entry, or one older than the confirmed LSN. A
	// repeated confirmation gets it too; it changes nothing.
	ErrNotPending = errors.New("no pending entry to confirm")

	// ErrTooLarge is returned by Put for content over Options.MaxContentBytes.
	ErrTooLarge = errors.New("content too large for the journal")
)

// CorruptError describes a journal that failed a check before its tail.
// errors.Is(err, ErrCorrupt) holds for it.
type CorruptError struct {
	Path    string // the journal as it was found
	MovedTo string // where it was moved aside ("" if the move failed)
	Offset  int64  // byte offset of the damaged header or record
	Reason  string // what check failed
}

func (e *CorruptError) Error() string {
	moved := "could not be moved aside"
	if e.MovedTo != "" {
		moved = "moved aside to " + e.MovedTo
	}
	return fmt.Sprintf("journal %s is corrupt at offset %d (%s); %s; its pending changes were not replayed",
		e.Path, e.Offset, e.Reason, moved)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
