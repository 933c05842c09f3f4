// Package filestate holds the one type for one file's state that the
// filesystem (fs), the sync engine (syncqueue) and its journal
// (syncqueue/journal) pass to each other: the tree journals it on a close,
// the journal keeps it pending, and the engine applies it to the tree. It
// is a package of its own so that each of them can name the type without
// importing another: fs must not import the engine, and the journal must
// not import the FUSE code.
package filestate

// State is one file's whole state at a moment: where it is and what it
// holds, or that it is gone. Content is shared, never copied, by whoever
// passes a State on: neither side may change it afterwards.
type State struct {
	// FileID is the file's stable local id: a memory id ("mem_...") for a
	// file loaded from the store, "local-..." for one created locally.
	FileID string
	// Origin is the memory this state derives from, or "" for a file
	// created locally and never uploaded. The journal sets it on its
	// pending entries (it is the precondition target of the upload), and
	// callers of the journal's Append leave it empty (the journal knows
	// each file's base). Applied to a tree, a state with an Origin
	// continues the file loaded with that id, which takes FileID.
	Origin string
	// Path is the file's store path ("/a/b.md"); for a delete, where the
	// file was, when known.
	Path string
	// Content is the file's whole content; nil when Deleted.
	Content []byte
	// Deleted records that the file was removed.
	Deleted bool
}
