package journal

import (
	"errors"
)

var (
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

// Damage describes a journal that Open found damaged before its tail and
// salvaged: every record whose checks passed, before and after the damage,
// was replayed; the bytes in Lost were not. The damaged file is kept, byte
// for byte, at KeptAt for a human (see "Damage" in the package doc).
type Damage struct {
	Path    string  // the journal as it was found
	KeptAt  string  // a copy of the damaged file ("" if it could not be written)
	Lost    []Range // the damaged byte ranges, skipped
	Reason  string  // the first check that failed
	Records int     // intact records replayed
	Size    int64   // the damaged file's size
}

// LostBytes is the total size of the lost ranges.
func (d Damage) LostBytes() int64 {
	var n int64
	for _, r := range d.Lost {
		n += r.To - r.From
	}
	return n
}

// DamagedPrefix begins the name of every copy of a damaged journal kept in
// a journal directory: journal.corrupt-<unix time>[-N].
const DamagedPrefix = journalFileName + ".corrupt-"
