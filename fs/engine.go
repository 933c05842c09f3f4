package fs

import (
	"time"

	"github.com/memfs/memfs/internal/filestate"
)

// The interface between the tree and the sync engine (syncqueue), which
// implements Journal and Fetcher and gives the tree Files and Changes. fs
// imports nothing of the engine: it defines here what it needs.
//
// Local changes flow out through Journal: every close of a changed file,
// rename, truncate by path and removal is one Append, made before the
// operation returns. Remote state flows in through Load (the store's
// listing, at mount), Fill (a lazy file's content) and Apply (a replayed
// journal, a remote change). To the engine, a Tree is one implementation
// of its local side (syncqueue.Local; docs/architecture.md, "The local
// side").

// Journal records local changes durably. The tree calls it when a
// changed file is closed (the file's whole new content), renamed (every
// moved file at its new path, and the file it replaces as deleted),
// truncated by path, or removed: one call at a time, in the order the
// tree decided them, without the tree's lock (see Tree). Append records its states with
// one write: when it returns nil all of them survive the process dying,
// when it fails none was recorded. Sync returns once what was appended is
// on stable storage. The sync engine's journal (syncqueue/journal)
// implements it.
type Journal interface {
	Append(states ...FileState) error
	Sync() error
}

// SharingJournal is a Journal that lets the tree share the content it
// recorded (one copy of each file's bytes, tree_lazy.go): AppendShared is
// Append that also returns, per state, the journal's own read-only copy
// of its content (nil for a delete, or where it keeps none). The tree then
// drops its copy for the journal's, and copies again on the next change.
type SharingJournal interface {
	AppendShared(states ...FileState) ([][]byte, error)
}

// BaseJournal is a Journal that takes a change made against a base the
// caller names instead of the one it knows for the file: a plain
// directory's edit found at a start, made while no worker ran, against
// the content both sides last agreed on (which may no longer be the
// store's). A file with a pending change keeps that change's base.
type BaseJournal interface {
	AppendAgainst(baseSHA string, st FileState) error
}

// UnknownBase is the base of a local change whose base is not known (a
// directory's file found differing from the store with no record of what
// both last agreed on): no store content has it, so its upload is refused
// and the store's version wins, the local one going to the conflict log.
const UnknownBase = "0000000000000000000000000000000000000000000000000000000000000000"

// FileState is one file's state (internal/filestate), the one type that
// the tree, the engine and the journal pass to each other. The tree
// journals it without an Origin (the journal knows each file's base).
type FileState = filestate.State

// File is one memory as the tree loads it. A file loaded Lazy has only
// its Size: its content comes later from the Fetcher (tree_lazy.go).
type File struct {
	FileID  string // the memory id
	Path    string
	Content []byte // shared, not copied: the caller must not change it
	Mtime   time.Time
	Lazy    bool
	Size    int64  // with Lazy: the content's length in the store
	SHA     string // the content's sha256 in the store (a directory on disk tells its files by it)
}

// Change is a file's new state, applied to the tree by the sync engine
// (never through the VFS): a journal replayed at mount, or a remote
// change. Deleted removes the file; otherwise the file with FileID is
// placed at Path with Content, replacing whatever file was there. Origin,
// when set, is the file id of a file already in the tree (a memory loaded
// from the store) that this change continues: that file takes FileID.
// Content is kept, not copied, and must not change afterwards.
type Change = FileState

// Fetcher brings the content of lazy files into the tree.
type Fetcher interface {
	// Fetch returns once the file with fileID holds its content (through
	// Fill or Apply), or is gone, or with the error that kept it from
	// being fetched. It is called without the tree's lock.
	Fetch(fileID string) error
}
