package fs

import (
	"errors"
	"syscall"
)

// Errors returned by Tree methods. toErrno maps each to its errno; it is
// the one place where the filesystem's failures become errnos.
var (
	ErrNotExist    = errors.New("no such file or directory")
	ErrExist       = errors.New("file exists")
	ErrNotDir      = errors.New("not a directory")
	ErrIsDir       = errors.New("is a directory")
	ErrNotEmpty    = errors.New("directory not empty")
	ErrReadOnly    = errors.New("read-only memory store")
	ErrNotPermit   = errors.New("operation not permitted")
	ErrTooLarge    = errors.New("file larger than a memory may be (102,400 bytes)")
	ErrInvalidName = errors.New("name can't be a memory path")
	ErrNameTooLong = errors.New("name or path too long, or too deep")
	ErrNoSpace     = errors.New("memory store is at its memory limit")
	ErrNotUTF8     = errors.New("content is not valid UTF-8; kept locally, not uploaded")
	ErrInvalidArg  = errors.New("invalid argument")
	ErrNotSupp     = errors.New("not supported")
)

// Skipped is why a local file is kept where it is and never uploaded (a
// symbolic link, a FIFO, a hard link, a name no memory can have, ...):
// memfs status lists it with Reason.
type Skipped struct{ Reason string }

func (s *Skipped) Error() string { return s.Reason }

var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	// First: it wraps the fetch's own error, whatever that wraps.
	{ErrUnfetched, syscall.EIO},
	{ErrNotExist, syscall.ENOENT},
	{ErrExist, syscall.EEXIST},
	{ErrNotDir, syscall.ENOTDIR},
	{ErrIsDir, syscall.EISDIR},
	{ErrNotEmpty, syscall.ENOTEMPTY},
	{ErrReadOnly, syscall.EROFS},
	{ErrNotPermit, syscall.EPERM},
	{ErrTooLarge, syscall.EFBIG},
	{ErrInvalidName, syscall.EINVAL},
	{ErrNameTooLong, syscall.ENAMETOOLONG},
	{ErrNoSpace, syscall.ENOSPC},
	{ErrNotUTF8, syscall.EILSEQ},
	{ErrInvalidArg, syscall.EINVAL},
	{ErrNotSupp, syscall.ENOTSUP},
}

// toErrno maps an error from the tree (or its journal) to an errno.
// Unknown errors are EIO: the journal could not record a change.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	for _, e := range errnoTable {
		if errors.Is(err, e.err) {
			return e.errno
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
