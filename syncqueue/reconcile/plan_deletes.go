package reconcile

import (
	"sort"
	"time"
)

// DeleteMode is what a due delete does (--memory-sync-deletions).
type DeleteMode int

// The deletion modes.
const (
	DeleteEnabled  DeleteMode = iota // send the delete
	DeleteLogOnly                    // the same checks, then log "would delete" instead of the request
	DeleteDisabled                   // never delete in the store; the file stays gone locally
)

// DeleteDisposal is what to do with one due delete.
type DeleteDisposal int

// The disposals of a due delete.
const (
	DeleteSend       DeleteDisposal = iota // send it
	DeleteLogSettle                        // log "would delete memory <path>", then settle it unsent
	DeleteSettleOnly                       // settle it unsent, silently
)

// Disposal is what mode does with a due delete.
func (m DeleteMode) Disposal() DeleteDisposal {
	switch m {
	case DeleteLogOnly:
		return DeleteLogSettle
	case DeleteDisabled:
		return DeleteSettleOnly
	}
	return DeleteSend
}

// PendingDelete is one pending delete of a memory.
type PendingDelete struct {
	FileID string
	LSN    uint64
}

// DeleteWatch is when a pass first saw a file's pending delete (of that
// version, LSN).
type DeleteWatch struct {
	LSN  uint64
	Pass int
	At   time.Time
}

// DeleteRound is what the delete rules know of one pass.
type DeleteRound struct {
	Pending []PendingDelete
	// Watches is when each pending delete was first seen, as the last
	// pass left it (not modified).
	Watches map[string]DeleteWatch
	// Send: the pass sends deletes (interval passes, a clean end); quiet
	// passes and an unclean end do not.
	Send bool
	// Waive: the final sync of a clean end, which waives the 30 s and the
	// confirming pass (not the cap).
	Waive      bool
	Now        time.Time
	Pass       int           // this pass's number
	Delay      time.Duration // how long a delete lasts before it is due (30 s)
	StoreSize  int           // memories in the store, as last seen
	LocalFiles int           // files the mount holds
}

// DeletePlan is the decision of the delete rules for one pass.
type DeletePlan struct {
	// Due are the indexes in Pending of the deletes to send now, oldest
	// first, within the cap.
	Due []int
	// HeldBack is how many due deletes the per-pass cap holds back.
	HeldBack int
	// Guard: every file of the store disappeared at once; nothing is
	// deleted, the files are restored from the store.
	Guard bool
	// Watches replaces the round's Watches: watches of deletes no longer
	// pending are dropped, new ones start.
	Watches map[string]DeleteWatch
}

// DeleteCap is how many deletes one pass may send: a quarter of the
// store, at least 8, at most 50.
func DeleteCap(storeSize int) int {
	return min(max(storeSize/4, 8), 50)
}

// PlanDeletes applies the delete rules (docs/sync.md, "Deletes"): a
// delete is due once it has lasted Delay and a pass later than the one
// that first saw it finds it still pending (both waived by the final sync
// of a clean end); a pass sends at most DeleteCap of the store; when the
// mount holds no file any more, the store had two or more and the deletes
// cover them all, none is sent (the wipe guard). A pass that sends no
// deletes starts no watch.
func PlanDeletes(r DeleteRound) DeletePlan {
	pl := DeletePlan{Watches: map[string]DeleteWatch{}}
	live := map[string]bool{}
	for _, d := range r.Pending {
		live[d.FileID] = true
	}
	for id, w := range r.Watches {
		if live[id] { // else reappeared or settled: the watch ends
			pl.Watches[id] = w
		}
	}
	if len(r.Pending) == 0 || !r.Send {
		return pl
	}
	if r.StoreSize >= 2 && len(r.Pending) >= r.StoreSize && r.LocalFiles == 0 {
		pl.Guard = true
		return pl
	}
	for i, d := range r.Pending {
		w, ok := pl.Watches[d.FileID]
		if !ok || w.LSN != d.LSN {
			w = DeleteWatch{LSN: d.LSN, Pass: r.Pass, At: r.Now}
			pl.Watches[d.FileID] = w
		}
		if r.Waive || (r.Now.Sub(w.At) >= r.Delay && r.Pass > w.Pass) {
			pl.Due = append(pl.Due, i)
		}
	}
	sort.SliceStable(pl.Due, func(i, j int) bool { return r.Pending[pl.Due[i]].LSN < r.Pending[pl.Due[j]].LSN })
	if limit := DeleteCap(r.StoreSize); len(pl.Due) > limit {
		pl.HeldBack = len(pl.Due) - limit
		pl.Due = pl.Due[:limit]
	}
	return pl
}
