package reconcile

import (
	"sort"
	"time"
)

// PlanItem is one pending local change as upload planning sees it: the
// journal's entry of one file, reduced to what the plan depends on.
type PlanItem struct {
	FileID  string
	LSN     uint64
	Path    string
	Origin  string // the memory the change derives from; "" for a file never uploaded
	Deleted bool
	// Refused: the store refused this very version (400/413, R25): it is
	// not sent again until it changes.
	Refused bool
	// NotUTF8: the content is not valid UTF-8; kept locally, not sent.
	NotUTF8 bool
	// Scratch: a create at the temporary name of the SDK's write tool,
	// held until ScratchUntil unless the pass is final.
	Scratch      bool
	ScratchUntil time.Time
}

// UploadOp is one planned create or update: Item indexes the pass's
// items. Replace is the index of a pending delete at the same path folded
// into this create (then the op is an update of that delete's memory), or
// -1.
type UploadOp struct {
	Kind    UploadKind
	Item    int
	Replace int
}

// UploadPlan is what one pass sends, by index into its items.
type UploadPlan struct {
	// Ops are the creates and updates sent at once, in the items' order.
	Ops []UploadOp
	// AtCap are the creates held because the store is known to be at its
	// memory cap: tried after the deletes, oldest first, on a sign of room.
	AtCap []UploadOp
	// Deletes are the pending deletes of memories, in the items' order,
	// for the delete rules (PlanDeletes).
	Deletes []int
	// NotUTF8 are the changes kept locally because their content is not
	// UTF-8.
	NotUTF8 []int
}

// PlanPass is what upload planning knows of the pass besides its items.
type PlanPass struct {
	Now     time.Time
	Final   bool // the final sync of a mount's end: scratch creates are not held
	CapFull bool // the store is known to be at its memory cap
}

// PlanUploads turns the pending items into requests (docs/sync.md,
// "Passes"): the net change of each file. A delete of a file never
// uploaded sends nothing; a version the store refused waits until it
// changes; a scratch create waits for its grace; a delete of memory M at
// path P and a create at P become one update of M (an editor's atomic
// save keeps the memory's id). With the store at its cap, the creates
// wait apart (AtCap).
func PlanUploads(items []PlanItem, p PlanPass) UploadPlan {
	var pl UploadPlan
	var ops []UploadOp
	createAt := map[string]int{} // path -> index in ops of a create
	var dels []int
	for i, it := range items {
		switch {
		case it.Refused:
		case it.Deleted && it.Origin == "":
			// never uploaded; nothing to do
		case it.Scratch && !p.Final && p.Now.Before(it.ScratchUntil):
			// renamed over its target soon, held meanwhile
		case it.Deleted:
			dels = append(dels, i)
		case it.NotUTF8:
			pl.NotUTF8 = append(pl.NotUTF8, i)
		case it.Origin == "":
			createAt[it.Path] = len(ops)
			ops = append(ops, UploadOp{Kind: UploadCreate, Item: i, Replace: -1})
		default:
			ops = append(ops, UploadOp{Kind: UploadUpdate, Item: i, Replace: -1})
		}
	}
	for _, d := range dels {
		if j, ok := createAt[items[d].Path]; ok && ops[j].Replace < 0 {
			ops[j].Kind, ops[j].Replace = UploadUpdate, d
			continue
		}
		pl.Deletes = append(pl.Deletes, d)
	}
	for _, o := range ops {
		if p.CapFull && o.Kind == UploadCreate {
			pl.AtCap = append(pl.AtCap, o)
		} else {
			pl.Ops = append(pl.Ops, o)
		}
	}
	return pl
}

// OldestFirst orders xs as their changes were made (by LSN), keeping the
// order of equal ones.
func OldestFirst[T any](xs []T, lsn func(T) uint64) {
	sort.SliceStable(xs, func(i, j int) bool { return lsn(xs[i]) < lsn(xs[j]) })
}
