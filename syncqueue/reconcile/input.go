package reconcile

// State is one memory's path and content_sha256: what the store holds, or
// what the local copy last agreed with the store on (the base).
type State struct {
	Path, SHA string
}

// Entry is a local file's pending entry in the journal, reduced to what
// the decisions read: docs/sync.md, "Words", "Local entry".
type Entry struct {
	FileID string
	// LSN identifies the entry: a [Confirm] settles exactly it.
	LSN  uint64
	Path string
	// SHA is the content_sha256 of the entry's content ("" when Deleted).
	SHA     string
	Deleted bool
	// Origin is the memory the file derives from ("" for a file never
	// uploaded); BaseSHA is that memory's sha when last agreed.
	Origin, BaseSHA string
}

// What stands at a path in the local copy.
type What int

const (
	Nothing   What = iota // no node, or a node of no file
	Directory             // a directory
	File                  // a file, named by Occupant.FileID
)

// Occupant is what stands locally at the remote memory's path.
type Occupant struct {
	What   What
	FileID string
	// Found is the file's pending entry as found, nil if none.
	Found *Entry
	// Committed: what was written to the file through handles still open
	// has been journaled (a [Commit]), and Pending is its pending entry
	// since. Until then Pending is Found.
	Committed bool
	Pending   *Entry
}

// Input is everything one merge decides on, for one memory.
type Input struct {
	// MemoryID is the memory merged.
	MemoryID string
	// FileID is the local file bound to the memory (its copy), "" if none.
	FileID string
	// CommitFailed: writes to that file through a handle still open could
	// not be journaled.
	CommitFailed bool
	// Local is that file's pending entry, nil if none.
	Local *Entry
	// Base is what the local copy last agreed with the store on, nil if
	// nothing.
	Base *State
	// Remote is the memory as the store holds it now; nil when it is gone.
	Remote *State
	// Sent lists the shas of writes to the memory this mount sent and has
	// not yet seen come back.
	Sent []string
	// SentCreate is the sha of a create this mount sent to Remote.Path and
	// has not yet seen answered ("" if none).
	SentCreate string
	// At is what stands locally at Remote.Path.
	At Occupant
	// ReadOnly: the mount never uploads.
	ReadOnly bool
}

func (in *Input) gone() bool    { return in.Remote == nil }
func (in *Input) local() bool   { return in.FileID != "" }
func (in *Input) pending() bool { return in.Local != nil }

// ours reports whether the remote state is a write this mount sent.
func (in *Input) ours() bool {
	for _, s := range in.Sent {
		if s == in.Remote.SHA {
			return true
		}
	}
	return false
}

// agreed reports whether the remote state is exactly the base.
func (in *Input) agreed() bool {
	return in.Base != nil && *in.Base == *in.Remote
}

// ourCreate reports whether the remote state is the create this mount
// sent at its path.
func (in *Input) ourCreate() bool { return in.SentCreate == in.Remote.SHA }

// other reports whether a file other than the memory's copy stands at the
// remote path.
func (in *Input) other() bool { return in.At.What == File && in.At.FileID != in.FileID }

// sameAsRemote reports whether an entry holds the remote path and bytes.
func (in *Input) sameAsRemote(p *Entry) bool {
	return p.Path == in.Remote.Path && p.SHA == in.Remote.SHA
}

// localCreate reports whether p is a change of a file never uploaded.
func localCreate(p *Entry) bool { return p != nil && !p.Deleted && p.Origin == "" }
