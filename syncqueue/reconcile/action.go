package reconcile

// Kind is what an [Action] does.
type Kind int

const (
	// Skip: nothing to do.
	Skip Kind = iota
	// RoomSeen: a memory left the store, so creates waiting at the
	// memory cap may try again (docs/sync.md, "Why a change waits").
	RoomSeen
	// Fail: stop, settling nothing more: what was written to the memory's
	// local copy FileID through open handles could not be journaled
	// (Input.CommitFailed).
	Fail
	// Apply: the local file FileID takes the store's version, at Path.
	Apply
	// Remove: the local file FileID goes.
	Remove
	// Confirm: settle the entry (FileID, LSN) as memory MemoryID at SHA
	// and Path; MemoryID "" settles it as gone.
	Confirm
	// Rebase: the entry of FileID stays pending on memory MemoryID at SHA
	// ("" and "": no origin, it goes up as a create). If it fails, log
	// Reason (with Path); with StopOnFail nothing after it runs.
	Rebase
	// KeepConflict: the pending local version of FileID goes to the
	// conflict log, for Reason, before the file is replaced; if that
	// fails, stop.
	KeepConflict
	// SetBase: tell the journal that FileID's memory now holds the
	// remote state.
	SetBase
	// Agree: the remote state becomes the base, FileID its copy.
	Agree
	// Forget: the memory's base is forgotten.
	Forget
	// Seen: the sent write SHA of MemoryID came back: forget it.
	Seen
	// SeenCreate: the create sent at Path was answered: forget it.
	SeenCreate
	// Warn: log Reason as a warning, with Path.
	Warn
	// Commit: journal what was written to FileID, the file at the remote
	// path, through handles still open; if that fails, stop. Then decide
	// again with Occupant.Committed set and Occupant.Pending read anew
	// (the actions before Commit come again, and do nothing the second
	// time). It is always a decision's last action.
	Commit
)

// Action is one step of a merge. Which fields count depends on Kind.
type Action struct {
	Kind          Kind
	FileID        string
	LSN           uint64
	MemoryID, SHA string
	Path          string
	Reason        string
	StopOnFail    bool
}

// The texts of the warnings, errors and conflict reasons a merge logs.
const (
	WarnDirectory     = "the store has a memory where this mount has a directory; skipped until one of them moves"
	WarnRecreate      = "the memory was deleted in the store but changed here: it will be created again from the local file"
	WarnRestored      = "the memory changed in the store after it was deleted here: the store's version is restored"
	ErrRebaseChange   = "could not rebase a pending change in the journal"
	ErrRebaseDelete   = "could not rebase a pending delete in the journal"
	ErrRecreate       = "could not journal the re-creation of a memory deleted in the store"
	ConflictChanged   = "changed here and in the store"
	ConflictCreated   = "created here and in the store at the same path"
	ConflictDisplaced = "the store put another memory at this path"
)
