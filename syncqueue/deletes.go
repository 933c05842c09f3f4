package syncqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
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

// startDeletes applies the deletion mode, the 30 s + confirming-pass
// rule, the whole-store guard and the per-pass cap to the pass's pending
// deletes, and sends those that are due, one at a time; the creates that
// waited at the cap follow.
func (e *Engine) startDeletes(p *pass) {
	due, guard, out := e.f.dueDeletes(p.deletes, p.to, e.opts.DeleteDelay, e.tree)
	p.d = out
	if guard {
		e.f.log.WithField("files", len(p.deletes)).Warn("every file of the store disappeared at once: treated as an accident, nothing is deleted in the store; the files are restored from the store")
		e.restoreAll(p, 0)
		return
	}
	p.deletes = due
	e.sendDeletes(p, 0)
}

// sendDeletes sends the due deletes from p.deletes[i] on, one at a time.
func (e *Engine) sendDeletes(p *pass, i int) {
	for ; i < len(p.deletes); i++ {
		d := p.deletes[i]
		switch deleteMode(e.opts.Deletions).Disposal() {
		case reconcile.DeleteSettleOnly:
			// Never delete in the store; the file stays gone locally.
			e.settleDelete(d)
			continue
		case reconcile.DeleteLogSettle:
			e.f.log.WithField("path", d.Path).Warn("would delete memory " + d.Path)
			e.settleDelete(d)
			continue
		}
		e.sendDelete(p.ctx, d, func(err error) { e.deleteAnswered(d, err, &p.d) }, func() { e.sendDeletes(p, i+1) })
		return
	}
	e.deletesDone(p)
}

// deletesDone adds what the deletes did to the pass, and tries the creates
// that waited at the cap.
func (e *Engine) deletesDone(p *pass) {
	p.r.addDeletes(p.d)
	p.try = p.d.sent > 0 || (p.full && p.probe)
	capped := p.r.capped
	p.r.capped = nil
	sortByLSN(capped)
	e.retryCapped(p, capped, 0)
}

// restoreAll brings back, one at a time from p.deletes[i] on, the store's
// version of every file deleted here (the whole-store guard).
func (e *Engine) restoreAll(p *pass, i int) {
	if i == len(p.deletes) {
		e.deletesDone(p)
		return
	}
	e.restore(p.ctx, p.deletes[i], func(err error) {
		if err != nil {
			p.d.transient++
		}
		e.restoreAll(p, i+1)
	})
}

// sendDelete sends one due delete once its memory is free; the memory is
// busy (busy.go) until answer has carried out the store's answer, and
// next goes on.
func (e *Engine) sendDelete(ctx context.Context, d journal.Entry, answer func(error), next func()) {
	e.whenFree(d.Origin, func() {
		e.markBusy(d.Origin)
		e.busy.deleting[d.Origin] = true
		st, sid, sha := e.opts.Store, e.opts.StoreID, d.BaseSHA
		e.request(func() ownerEvent {
			err := st.DeleteMemory(ctx, sid, d.Origin, &sha)
			return answered{id: d.Origin, answer: func() { answer(err) }, next: next}
		})
	})
}

// answered is the store's answer to a request about memory id: answer
// carries it out, the memory is freed, and next goes on.
type answered struct {
	id     string
	answer func()
	next   func()
}

func (a answered) handle(e *Engine) {
	a.answer()
	e.release(a.id)
	a.next()
}

// restore brings back the store's version of a file deleted here (the
// whole-store guard), settling the pending delete, once its memory is
// free; then hears how it went.
func (e *Engine) restore(ctx context.Context, d journal.Entry, then func(error)) {
	e.whenFree(d.Origin, func() {
		e.markBusy(d.Origin)
		st, sid := e.opts.Store, e.opts.StoreID
		e.request(func() ownerEvent {
			m, err := st.GetMemory(ctx, sid, d.Origin)
			var res error
			return answered{id: d.Origin, answer: func() { res = e.restored(d, m, err) }, next: func() { then(res) }}
		})
	})
}

// restored carries out the answer to a restore's fetch.
func (e *Engine) restored(d journal.Entry, m *store.Memory, err error) error {
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("restore %s: %w", d.Path, err)
	}
	if m == nil {
		e.confirm(d.FileID, d.LSN, "", "", d.Path)
		e.ms.forget(d.Origin)
		return nil
	}
	e.treeApply(fs.Change{FileID: d.FileID, Path: m.Path, Content: contentBytes(m)})
	e.confirm(d.FileID, d.LSN, m.ID, m.ContentSHA256, m.Path)
	e.ms.agree(d.FileID, m)
	return nil
}

// deleteAnswered carries out the verdict on the store's answer to a
// delete: 200 or 404 settle it; 409 brings the store's version back
// (R16, after the pass's uploads); anything else waits as an upload does.
func (e *Engine) deleteAnswered(d journal.Entry, err error, out *deleteOutcome) {
	f := e.f
	switch v, _ := reconcile.JudgeAnswer(describe(reconcile.UploadDelete, err)); v {
	case reconcile.VerdictSettle:
		f.credErr = nil
		e.settleDelete(d)
		e.ms.forget(d.Origin)
		out.sent++
		out.left--
		f.storeSize--
	case reconcile.VerdictResolve:
		// The store changed it: the store's version comes back.
		out.conflicted = append(out.conflicted, d.Origin)
	case reconcile.VerdictOutage, reconcile.VerdictCutShort:
		f.noteWait(d, v, err)
		out.transient++
		if out.firstErr == nil {
			out.firstErr = err
		}
	default:
		f.noteWait(d, v, err)
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
func (f *flusher) dueDeletes(dels []journal.Entry, to passOptions, delay time.Duration, local Local) (due []journal.Entry, guard bool, out deleteOutcome) {
	r := reconcile.DeleteRound{Watches: f.deleteSeen, Send: to.deletes, Waive: to.waiveDelay, Now: time.Now(), Pass: f.ticks,
		Delay: delay, StoreSize: f.storeSize}
	for _, d := range dels {
		r.Pending = append(r.Pending, reconcile.PendingDelete{FileID: d.FileID, LSN: d.LSN})
	}
	if len(dels) > 0 && to.deletes {
		r.LocalFiles = local.FileCount()
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
func (e *Engine) settleDelete(d journal.Entry) {
	delete(e.f.deleteSeen, d.FileID)
	delete(e.f.waits, d.FileID)
	if err := e.journal.Confirm(d.FileID, d.LSN, "", "", d.Path); err != nil && !errors.Is(err, journal.ErrNotPending) {
		e.f.log.WithError(err).WithField("path", d.Path).Error("could not record a settled delete in the journal")
	}
}
