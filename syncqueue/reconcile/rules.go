package reconcile

// Rule is one row of the rule table: when When holds, Do gives the
// actions. A rule marked Then is a step that comes first: its actions are
// taken and the rules below it are checked on; any other rule ends the
// decision.
type Rule struct {
	// ID is the row of docs/sync.md ("R5").
	ID string
	// Note says what the rule is, in a few words.
	Note string
	When func(in *Input) bool
	Do   func(in *Input) []Action
	Then bool
}

// Decide merges one remote state (in.Remote, or gone) into the local copy
// by [Rules]: it returns the actions in the order they must run.
func Decide(in Input) []Action {
	acts, _ := Evaluate(Rules, in)
	return acts
}

// DecideFeed decides from the change feed alone (in.Remote with the
// feed's path and sha, nothing fetched, nothing journaled first) whether a
// memory can be settled without fetching it, by [FeedRules]. It returns
// nil when it can't: the memory is then fetched and merged by [Decide].
func DecideFeed(in Input) []Action {
	acts, _ := Evaluate(FeedRules, in)
	return acts
}

// Evaluate runs a rule table over in, first match, and returns the
// actions and the IDs of the rules that gave them.
func Evaluate(rules []Rule, in Input) (acts []Action, ids []string) {
	for _, r := range rules {
		if !r.When(&in) {
			continue
		}
		acts = append(acts, r.Do(&in)...)
		ids = append(ids, r.ID)
		if !r.Then {
			break
		}
	}
	return acts, ids
}

// Rules is the rule table of docs/sync.md, R1–R18, in the order it is
// checked.
var Rules = []Rule{
	{ID: "R24", Note: "a memory gone is a sign of room at the cap", Then: true,
		When: func(in *Input) bool { return in.gone() },
		Do:   func(in *Input) []Action { return []Action{{Kind: RoomSeen}} }},
	{ID: "R18", Note: "the copy has open writes the journal can't take: wait",
		When: func(in *Input) bool { return in.local() && in.CommitFailed },
		Do:   func(in *Input) []Action { return []Action{{Kind: Fail, FileID: in.FileID}} }},

	// A memory gone from the store.
	{ID: "R1", Note: "no local copy: nothing",
		When: func(in *Input) bool { return in.gone() && !in.local() },
		Do:   func(in *Input) []Action { return []Action{{Kind: Skip}} }},
	{ID: "R2", Note: "nothing pending (or read-only): remove the local file",
		When: func(in *Input) bool { return in.gone() && (!in.pending() || in.ReadOnly) },
		Do: func(in *Input) []Action {
			return []Action{forget(in), {Kind: Remove, FileID: in.FileID}}
		}},
	{ID: "R3", Note: "deleted on both sides: settle the delete",
		When: func(in *Input) bool { return in.gone() && in.Local.Deleted },
		Do: func(in *Input) []Action {
			return []Action{forget(in), settleGone(in.Local)}
		}},
	{ID: "R4", Note: "changed here: it goes up as a create",
		When: func(in *Input) bool { return in.gone() },
		Do: func(in *Input) []Action {
			return []Action{forget(in),
				{Kind: Rebase, FileID: in.FileID, Path: in.Local.Path, Reason: ErrRecreate, StopOnFail: true},
				{Kind: Warn, Path: in.Local.Path, Reason: WarnRecreate}}
		}},

	// A memory new to this mount.
	{ID: "R8", Note: "the create sent at its path is answered", Then: true,
		When: func(in *Input) bool { return !in.local() },
		Do: func(in *Input) []Action {
			return []Action{{Kind: SeenCreate, Path: in.Remote.Path}}
		}},
	{ID: "R6", Note: "a directory at its path: skip",
		When: func(in *Input) bool { return !in.local() && in.At.What == Directory },
		Do: func(in *Input) []Action {
			return []Action{{Kind: Warn, Path: in.Remote.Path, Reason: WarnDirectory}}
		}},
	{ID: "R9", Note: "a file at its path: journal its open writes first",
		When: func(in *Input) bool { return !in.local() && in.At.What == File && !in.At.Committed },
		Do:   commit},
	{ID: "R8", Note: "our create, changed since: rebase on the memory",
		When: func(in *Input) bool {
			return !in.local() && in.At.What == File && localCreate(in.At.Pending) &&
				in.ourCreate() && in.At.Pending.SHA != in.Remote.SHA
		},
		Do: func(in *Input) []Action {
			return []Action{rebaseOnRemote(in, in.At.FileID, ErrRebaseChange), agree(in.At.FileID)}
		}},
	{ID: "R9", Note: "a local create at its path, other bytes: store wins",
		When: func(in *Input) bool {
			return !in.local() && in.At.What == File && localCreate(in.At.Pending) && in.At.Pending.SHA != in.Remote.SHA
		},
		Do: func(in *Input) []Action {
			return append(storeWins(in, in.At.Pending, ConflictCreated), agree(in.At.FileID))
		}},
	{ID: "R7", Note: "a local create at its path, same bytes: adopt",
		When: func(in *Input) bool { return !in.local() && in.At.What == File && localCreate(in.At.Pending) },
		Do: func(in *Input) []Action {
			return []Action{settleAsRemote(in, in.At.Pending), agree(in.At.FileID)}
		}},
	{ID: "R14", Note: "another file with a pending change at its path: store wins for it", Then: true,
		When: func(in *Input) bool { return !in.local() && in.At.FileID != in.MemoryID && displaces(in) },
		Do:   displace},
	{ID: "R5", Note: "place the memory in the tree",
		When: func(in *Input) bool { return !in.local() },
		Do: func(in *Input) []Action {
			return []Action{{Kind: Apply, FileID: in.MemoryID, Path: in.Remote.Path},
				{Kind: SetBase, FileID: in.MemoryID}, agree(in.MemoryID)}
		}},

	// A memory this mount has a copy of.
	{ID: "R10", Note: "our own write coming back: forget it as sent", Then: true,
		When: func(in *Input) bool { return in.ours() },
		Do: func(in *Input) []Action {
			return []Action{{Kind: Seen, MemoryID: in.MemoryID, SHA: in.Remote.SHA}}
		}},
	{ID: "R10", Note: "our write, the entry is what was sent: settle it",
		When: func(in *Input) bool { return ourWriteBack(in) && in.sameAsRemote(in.Local) },
		Do: func(in *Input) []Action {
			return []Action{settleAsRemote(in, in.Local), agree(in.FileID)}
		}},
	{ID: "R10", Note: "our write, changed again since: rebase on it",
		When: ourWriteBack,
		Do: func(in *Input) []Action {
			return []Action{rebaseOnRemote(in, in.FileID, ErrRebaseChange), agree(in.FileID)}
		}},
	{ID: "R11", Note: "an atomic save: settle the delete and the new file as the memory",
		When: func(in *Input) bool {
			f := in.At.Found
			return deletedOnOurs(in) && in.other() && localCreate(f) && in.sameAsRemote(f)
		},
		Do: func(in *Input) []Action {
			return []Action{{Kind: Seen, MemoryID: in.MemoryID, SHA: in.Remote.SHA},
				settleGone(in.Local), settleAsRemote(in, in.At.Found), agree(in.At.FileID)}
		}},
	{ID: "R12", Note: "deleted here after our write: rebase the delete on it",
		When: deletedOnOurs,
		Do: func(in *Input) []Action {
			acts := []Action{{Kind: Seen, MemoryID: in.MemoryID, SHA: in.Remote.SHA}}
			if in.Local.BaseSHA != in.Remote.SHA {
				acts = append(acts, rebaseOnRemote(in, in.FileID, ErrRebaseDelete))
			}
			return append(acts, agree(in.FileID))
		}},
	{ID: "R13", Note: "nothing new for the local copy",
		When: func(in *Input) bool {
			p := in.Local
			return (in.agreed() || in.ours()) && (p == nil || p.Deleted || p.Origin == "" || p.BaseSHA == in.Remote.SHA)
		},
		Do: func(in *Input) []Action {
			if in.ours() && !in.agreed() {
				return []Action{agree(in.FileID)}
			}
			return []Action{{Kind: Skip}}
		}},
	{ID: "R14", Note: "another file at the remote path: journal its open writes first",
		When: func(in *Input) bool { return in.other() && !in.At.Committed },
		Do:   commit},
	{ID: "R14", Note: "another file with a pending change at the remote path: store wins for it", Then: true,
		When: func(in *Input) bool { return in.other() && displaces(in) },
		Do:   displace},
	{ID: "R15", Note: "nothing pending: take the store's version",
		When: func(in *Input) bool { return !in.pending() },
		Do: func(in *Input) []Action {
			return []Action{{Kind: Apply, FileID: in.FileID, Path: in.Remote.Path},
				{Kind: SetBase, FileID: in.FileID}, agree(in.FileID)}
		}},
	{ID: "R16", Note: "deleted here, changed in the store: restore the store's version",
		When: func(in *Input) bool { return in.Local.Deleted },
		Do: func(in *Input) []Action {
			return []Action{{Kind: Warn, Path: in.Remote.Path, Reason: WarnRestored},
				{Kind: Apply, FileID: in.FileID, Path: in.Remote.Path},
				settleAsRemote(in, in.Local), agree(in.FileID)}
		}},
	{ID: "R17", Note: "changed the same on both sides: adopt",
		When: func(in *Input) bool { return in.sameAsRemote(in.Local) },
		Do: func(in *Input) []Action {
			return []Action{settleAsRemote(in, in.Local), agree(in.FileID)}
		}},
	{ID: "R18", Note: "changed on both sides: store wins",
		When: func(*Input) bool { return true },
		Do: func(in *Input) []Action {
			return append(storeWins(in, in.Local, ConflictChanged), agree(in.FileID))
		}},
}

// FeedRules settle a memory from the change feed's path and sha alone,
// when the local file holds exactly those bytes (docs/sync.md, R7 and
// R17: "also decided without a fetch, from the feed's sha").
var FeedRules = []Rule{
	{ID: "R17", Note: "the copy is pending with the feed's path and bytes: adopt",
		When: func(in *Input) bool {
			return in.local() && in.pending() && !in.Local.Deleted && in.sameAsRemote(in.Local)
		},
		Do: func(in *Input) []Action { return adoptFed(in, in.Local, in.FileID) }},
	{ID: "R7", Note: "a local create at the feed's path with its bytes: adopt",
		When: func(in *Input) bool {
			p := in.At.Pending
			return !in.local() && in.At.What == File && localCreate(p) && in.sameAsRemote(p)
		},
		Do: func(in *Input) []Action {
			return append(adoptFed(in, in.At.Pending, in.At.FileID), Action{Kind: SeenCreate, Path: in.Remote.Path})
		}},
}

// ourWriteBack: the remote state is our write, and the copy's pending
// change of this memory was made against an older base (R10).
func ourWriteBack(in *Input) bool {
	p := in.Local
	return in.ours() && p != nil && !p.Deleted && p.Origin == in.MemoryID && p.BaseSHA != in.Remote.SHA
}

// deletedOnOurs: the copy is pending delete, and the remote state is ours
// or the base (R11, R12).
func deletedOnOurs(in *Input) bool {
	return in.pending() && in.Local.Deleted && (in.ours() || in.agreed())
}

// displaces: the file at the remote path has a pending change the
// memory's arrival would drop (R14).
func displaces(in *Input) bool {
	p := in.At.Pending
	return in.At.What == File && p != nil && !p.Deleted
}

// displace keeps the displaced file's content (unless it is the remote
// bytes) and settles its change (R14).
func displace(in *Input) []Action {
	p := in.At.Pending
	var acts []Action
	if p.SHA != in.Remote.SHA {
		acts = append(acts, Action{Kind: KeepConflict, FileID: p.FileID, Reason: ConflictDisplaced})
	}
	return append(acts, settleGone(p))
}

// commit asks for the open writes of the file at the remote path to be
// journaled before its pending entry is read for R7–R9 and R14.
func commit(in *Input) []Action { return []Action{{Kind: Commit, FileID: in.At.FileID}} }

// storeWins: the local version of p to the conflict log, then the file
// takes the store's version, then p is settled.
func storeWins(in *Input, p *Entry, reason string) []Action {
	return []Action{{Kind: KeepConflict, FileID: p.FileID, Reason: reason},
		{Kind: Apply, FileID: p.FileID, Path: in.Remote.Path}, settleAsRemote(in, p)}
}

func adoptFed(in *Input, p *Entry, fileID string) []Action {
	return []Action{settleAsRemote(in, p), agree(fileID), {Kind: Seen, MemoryID: in.MemoryID, SHA: in.Remote.SHA}}
}

func settleAsRemote(in *Input, p *Entry) Action {
	return Action{Kind: Confirm, FileID: p.FileID, LSN: p.LSN, MemoryID: in.MemoryID, SHA: in.Remote.SHA, Path: in.Remote.Path}
}

func settleGone(p *Entry) Action {
	return Action{Kind: Confirm, FileID: p.FileID, LSN: p.LSN, Path: p.Path}
}

func rebaseOnRemote(in *Input, fileID, reason string) Action {
	return Action{Kind: Rebase, FileID: fileID, MemoryID: in.MemoryID, SHA: in.Remote.SHA, Path: in.Remote.Path, Reason: reason}
}

func agree(fileID string) Action { return Action{Kind: Agree, FileID: fileID} }

func forget(in *Input) Action { return Action{Kind: Forget, MemoryID: in.MemoryID} }
