package syncqueue

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/syncqueue/reconcile"
)

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
		switch deleteMode(e.opts.Deletions).Disposal() {
		case reconcile.DeleteSettleOnly:
			// Never delete in the store; the file stays gone locally.
			e.locked(func() { f.settleDelete(d) })
			continue
		case reconcile.DeleteLogSettle:
			f.log.WithField("path", d.Path).Warn("would delete memory " + d.Path)
			e.locked(func() { f.settleDelete(d) })
			continue
		}
		f.sendDelete(ctx, d, &out)
	}
	return out
}

// sendDelete sends one due delete, its memory busy (busy.go) until the
// answer is carried out.
//
// REQUIRES: f.e.syncMu NOT held.
func (f *flusher) sendDelete(ctx context.Context, d journal.Entry, out *deleteOutcome) {
	e := f.e
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	err := e.hold(ctx, d.Origin)
	if err == nil {
		defer e.release(d.Origin)
		sha := d.BaseSHA
		e.syncMu.Unlock()
		err = e.opts.Store.DeleteMemory(ctx, e.opts.StoreID, d.Origin, &sha)
		e.syncMu.Lock()
	}
	f.deleteAnswered(d, err, out)
}

// deleteAnswered carries out the verdict on the store's answer to a
// delete: 200 or 404 settle it; 409 brings the store's version back
// (R16, after the pass's uploads); anything else waits as an upload does.
//
// REQUIRES: f.e.syncMu held.
func (f *flusher) deleteAnswered(d journal.Entry, err error, out *deleteOutcome) {
	switch v, _ := reconcile.JudgeAnswer(describe(reconcile.UploadDelete, err)); v {
	case reconcile.VerdictSettle:
		f.credErr = nil
		f.settleDelete(d)
		f.e.ms.forget(d.Origin)
		out.sent++
		out.left--
		f.storeSize--
	case reconcile.VerdictResolve:
		// The store changed it: the store's version comes back.
		out.conflicted = append(out.conflicted, d.Origin)
	case reconcile.VerdictOutage, reconcile.VerdictCutShort:
		f.waitLocked(d, v, err)
		out.transient++
		if out.firstErr == nil {
			out.firstErr = err
		}
	default:
		f.waitLocked(d, v, err)
		out.failed++
	}
}

// deleteMode is the deletion mode (Options.Deletions) as reconcile names it.
func deleteMode(deletions string) reconcile.DeleteMode {
	switch deletions {
	case DeletionsLogOnly:
		return reconcile.DeleteLogOnly
	case DeletionsDisabled:
		return reconcile.DeleteDisabled
	}
	return reconcile.DeleteEnabled
}

// dueDeletes decides which pending deletes go in this pass
// (reconcile.PlanDeletes), and keeps the watches of the 30 s rule. guard
// is set when every file of the store disappeared at once.
//
// REQUIRES: f.e.syncMu held.
func (f *flusher) dueDeletes(dels []journal.Entry, to passOptions) (due []journal.Entry, guard bool, out deleteOutcome) {
	r := reconcile.DeleteRound{Watches: f.deleteSeen, Send: to.deletes, Waive: to.waiveDelay, Now: time.Now(), Pass: f.ticks,
		Delay: f.e.opts.DeleteDelay, StoreSize: f.storeSize}
	for _, d := range dels {
		r.Pending = append(r.Pending, reconcile.PendingDelete{FileID: d.FileID, LSN: d.LSN})
	}
	if len(dels) > 0 && to.deletes {
		r.LocalFiles = f.e.tree.FileCount()
	}
	pl := reconcile.PlanDeletes(r)
	f.deleteSeen = pl.Watches
	out.left = len(dels)
	if pl.HeldBack > 0 {
		f.log.WithFields(logrus.Fields{"sending": len(pl.Due), "held_back": pl.HeldBack}).Warn("deletions held back by the per-pass cap; the rest follow on later passes")
	}
	for _, i := range pl.Due {
		due = append(due, dels[i])
	}
	return due, pl.Guard, out
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
