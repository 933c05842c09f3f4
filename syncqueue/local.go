package syncqueue

import "github.com/memfs/memfs/fs"

// Local is the local copy of the store, as the engine sees it: what the
// engine reads of it and does to it, and nothing of how it is shown. The
// FUSE tree (fs.Tree) is one; a plain directory on disk, watched, can be
// another, without a change to the rules of merge.go or flusher.go. The
// contract every implementation keeps is in docs/architecture.md ("The
// local side"); in short:
//
//   - every change made locally (a closed file, a rename, a removal) is
//     journaled through the fs.Journal it was built with before the
//     change is reported done, one Append per change, in the order they
//     were made;
//   - Apply makes each change whole or not at all, and never journals it
//     (it comes from the engine, which journals what it needs);
//   - a file with local writes not journaled yet is never replaced unseen:
//     CommitFile journals them first, or fails and the file stays.
//
// The engine calls these from its own goroutines, never holding a lock
// the implementation takes (see Engine).
type Local interface {
	LocalListing
	LocalPaths
	LocalChanges
	LocalContent
	LocalUnjournaled
	// Freeze starts the end of the mount: every new local change is
	// refused from now on (changes already under way still land and are
	// journaled). The final sync follows, and nothing else tells the
	// local side that the mount ends: one with goroutines of its own
	// makes its last look and stops them here.
	Freeze()
}

// LocalListing is how the local side gets the store's listing, once, at
// Open, before anything local can change.
type LocalListing interface {
	// Load puts the store's memories in place. Files loaded Lazy have
	// their size only; their content comes through LocalContent. One
	// that can't be shown (its path collides) is skipped with a warning.
	Load(files []fs.File)
}

// LocalPaths tells what stands where.
type LocalPaths interface {
	// At reports what is at a store path: a file (with its file id), a
	// directory, or nothing.
	At(path string) (fileID string, isDir, ok bool)
	// FileCount is the number of files (memories) held.
	FileCount() int
}

// LocalChanges is how remote changes reach the local side.
type LocalChanges interface {
	// Apply makes each change (a remote change, or a journal replayed at
	// Open): Deleted removes the file with FileID; otherwise that file
	// is placed at Path with Content, replacing whatever file was there,
	// and a change with an Origin continues the file loaded with that id.
	// A change that can't be made fails, and the others are still made.
	Apply(changes []fs.Change) error
	// CommitFile journals the file with fileID if it holds local writes
	// not journaled yet (a handle still open), so that a merge sees them
	// as a local change. An error means they could not be journaled: the
	// engine then leaves the file as it is.
	CommitFile(fileID string) error
}

// LocalContent is how the content of files loaded Lazy comes in.
type LocalContent interface {
	// Lazy returns the file ids of the files whose content is not in yet.
	Lazy() []string
	// LazyCount is how many files wait for their content.
	LazyCount() int
	// Fill gives a lazy file its content, as the store holds it at the
	// size it was loaded with; content is kept, not copied. A file no
	// longer lazy is left alone. It reports whether it took the content.
	Fill(fileID string, content []byte) bool
}

// LocalUnjournaled is what the local side holds that the journal could
// not take yet (a full disk when a file was closed).
type LocalUnjournaled interface {
	// Unjournaled lists those files by path, with why.
	Unjournaled() map[string]error
	// RetryUnjournaled journals them again and returns how many still
	// could not be, with the last error.
	RetryUnjournaled() (left int, err error)
}

// NewLocal builds the local side of a mount from the options the engine
// gives it: the store, read-only or not, the journal every local change
// goes through, the fetcher of lazy content, the owner and the clock.
type NewLocal func(fs.Options) (Local, error)

// newFUSETree is the default NewLocal: the tree the FUSE mount serves.
func newFUSETree(opts fs.Options) (Local, error) {
	t, err := fs.NewTree(opts)
	if err != nil {
		return nil, err // never a nil *fs.Tree in a non-nil Local
	}
	return t, nil
}

var _ Local = (*fs.Tree)(nil)
