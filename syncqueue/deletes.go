package syncqueue

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// deleteCap is how many deletes one pass may send: a quarter of the store,
// at least 8, at most 50.
func deleteCap(storeSize int) int {
	return min(max(storeSize/4, 8), 50)
}

// deleteOutcome is what sendDeletes did.
type deleteOutcome struct {
	sent, left, transient int
	failed                int   // refused for another reason (the credential, ...): retried next pass
	firstErr              error // the first transient failure
	conflicted            []string
}

// sendDeletes applies the deletion mode, the 30 s + confirming-pass rule,
// the whole-store guard and the per-pass cap, and sends the deletes that
// are due (requests without syncMu).
//
// REQUIRES: f.e.syncMu NOT held.
func (f *flusher) sendDeletes(ctx context.Context, dels []journal.Entry, to passOptions) deleteOutcome {
	e := f.e
	e.syncMu.Lock()
	due, guard, out := f.dueDeletes(dels, to)
	e.syncMu.Unlock()
	if guard {
		f.log.WithField("files", len(dels)).Warn("every file of the store disappeared at once: treated as an accident, nothing is deleted in the store; the files are restored from the store")
		for _, d := range dels {
			if err := e.restore(ctx, d); err != nil {
				out.transient++
			}
		}
		return out
	}
	for _, d := range due {
		switch e.opts.Deletions {
		case DeletionsDisabled:
			// Never delete in the store; the file stays gone locally.
			e.locked(func() { f.settleDelete(d) })
			continue
		case DeletionsLogOnly:
			f.log.WithField("path", d.Path).Warn("would delete memory " + d.Path)
			e.locked(func() { f.settleDelete(d) })
			continue
		}
		sha := d.BaseSHA
		err := e.opts.Store.DeleteMemory(ctx, e.opts.StoreID, d.Origin, &sha)
		e.syncMu.Lock()
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			f.credErr = nil
			f.settleDelete(d)
			e.ms.forget(d.Origin)
			out.sent++
			out.left--
			f.storeSize--
		case errors.Is(err, store.ErrPreconditionFailed):
			// The store changed it: the store's version comes back.
			out.conflicted = append(out.conflicted, d.Origin)
		default:
			if v, _ := f.judgeLocked(d, err); v == transientFailure {
				out.transient++
				if out.firstErr == nil {
					out.firstErr = err
				}
			} else {
				out.failed++
			}
		}
		e.syncMu.Unlock()
	}
	return out
}

// dueDeletes decides which pending deletes go in this pass. guard is set
// when every file of the store disappeared at once.
//
// REQUIRES: f.e.syncMu held.
func (f *flusher) dueDeletes(dels []journal.Entry, to passOptions) (due []journal.Entry, guard bool, out deleteOutcome) {
	now := time.Now()
	live := map[string]bool{}
	for _, d := range dels {
		live[d.FileID] = true
	}
	for id := range f.deleteSeen {
		if !live[id] {
			delete(f.deleteSeen, id) // reappeared or settled: cancel the watch
		}
	}
	out.left = len(dels)
	if len(dels) == 0 || !to.deletes {
		return nil, false, out
	}
	if f.storeSize >= 2 && len(dels) >= f.storeSize && f.e.tree.FileCount() == 0 {
		return nil, true, out
	}
	for _, d := range dels {
		w, ok := f.deleteSeen[d.FileID]
		if !ok || w.lsn != d.LSN {
			w = deleteWatch{lsn: d.LSN, tick: f.ticks, at: now}
			f.deleteSeen[d.FileID] = w
		}
		if to.waiveDelay || (now.Sub(w.at) >= f.e.opts.DeleteDelay && f.ticks > w.tick) {
			due = append(due, d)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].LSN < due[j].LSN })
	if limit := deleteCap(f.storeSize); len(due) > limit {
		f.log.WithFields(logrus.Fields{"sending": limit, "held_back": len(due) - limit}).Warn("deletions held back by the per-pass cap; the rest follow on later passes")
		due = due[:limit]
	}
	return due, false, out
}

// settleDelete releases a pending delete (sent, or not to be sent).
//
// REQUIRES: f.e.syncMu held.
func (f *flusher) settleDelete(d journal.Entry) {
	delete(f.deleteSeen, d.FileID)
	delete(f.waits, d.FileID)
	if err := f.e.journal.Confirm(d.FileID, d.LSN, "", "", d.Path); err != nil && !errors.Is(err, journal.ErrNotPending) {
		f.log.WithError(err).WithField("path", d.Path).Error("could not record a settled delete in the journal")
	}
}
