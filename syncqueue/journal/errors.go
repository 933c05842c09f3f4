package journal

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
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

	// ErrTooLarge is returned by Append for content over Options.MaxContentBytes.
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

// IOError is an I/O error on the journal's files (EIO, EROFS, a failed
// fdatasync, ...; a full disk only where it hit a fresh journal file
// being written). While one is unrecovered the journal is faulted:
// Append and Sync return it (so the filesystem answers its
// errno), confirmations hold in memory. See "Faults" in the package doc.
type IOError struct {
	Op   string // what failed: "fdatasync", "write", "rename", ...
	Path string // the file (or directory) it failed on
	Err  error  // the error, wrapping the errno
}

func (e *IOError) Error() string {
	return fmt.Sprintf("I/O error on the journal (%s): %s %s: %v", e.ErrnoName(), e.Op, e.Path, e.Err)
}

// Unwrap is the underlying error, so errors.Is and errors.As see the errno.
func (e *IOError) Unwrap() error { return e.Err }

// ErrnoName is the name of the errno behind the error ("EIO"), or
// "no errno" when it carries none.
func (e *IOError) ErrnoName() string {
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	return "no errno"
}
