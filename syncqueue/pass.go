package syncqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/syncqueue/reconcile"
)

// A pass runs on the owner (owner.go) as phases driven by answers: its
// uploads in flight (up to Concurrency), then, when all are answered, the
// deletes that are due, one at a time; then the creates that waited at
// the store's memory cap; then the path-conflict retries and the parked
// cycle of moves; then the memories the store changed too, fetched and
// merged; then its end. Each request's answer comes back as an event and
// the owner goes on from there: nothing waits on the network with state
// held, and between two answers of a pass the owner handles the remote
// side's events as well. Passes run one at a time, in the order asked.

// passWanted asks the owner for a pass (SyncNow, Finish, the schedule);
// reply (buffered) hears how it went.
type passWanted struct {
	ctx   context.Context
	to    passOptions
	reply chan passOutcome
}

// passOutcome is how a pass asked for went: its result, whether it ran
// (a quiet pass does not while the store is failing or no write is
// pending: schedule.go), and whether it could not reach the store for
// some change.
type passOutcome struct {
	res            SyncResult
	ran, unreached bool
}

func (w passWanted) handle(e *Engine) {
	if e.f.running != nil {
		e.f.queued = append(e.f.queued, w)
		return
	}
	e.beginPass(w)
}

// runPass has the owner run one pass and waits for its result. A pass
// always ends: once ctx ends, its requests fail at once.
func (e *Engine) runPass(ctx context.Context, to passOptions) SyncResult {
	return e.askPass(ctx, to).res
}

// askPass has the owner run one pass and waits until it has.
func (e *Engine) askPass(ctx context.Context, to passOptions) passOutcome {
	w := passWanted{ctx: ctx, to: to, reply: make(chan passOutcome, 1)}
	if !e.send(context.Background(), w) {
		return passOutcome{}
	}
	select {
	case out := <-w.reply:
		return out
	case <-e.own.done:
		return passOutcome{}
	}
}

// skipQuiet reports whether a quiet pass is not to run now: the store is
// failing (the interval's passes retry then), or no write is pending.
func (e *Engine) skipQuiet() bool {
	if e.f.unreached || e.outage.isDown() {
		return true
	}
	st := e.journal.Stats()
	return st.Pending == st.Deletes
}

// pass is the state of one pass in progress.
type pass struct {
	passWanted
	start       time.Time
	r           passRun
	full, probe bool // the store was known at its cap as the pass began; and may be tried
	ops         []op // the uploads of the first phase
	next, out   int  // the next op to start; uploads in flight
	deletes     []journal.Entry
	d           deleteOutcome
	try         bool // the creates that waited at the cap may be tried
	retry       []op // path conflicts of this round
	still       []op // path conflicts still blocked in this round
	rounds      int  // path-conflict rounds left
	progress    bool // a path-conflict retry of this round went up
}

// beginPass plans a pass and starts its uploads.
func (e *Engine) beginPass(w passWanted) {
	f := e.f
	if w.to.trigger == TriggerQuiet && e.skipQuiet() {
		w.reply <- passOutcome{}
		e.nextPass()
		return
	}
	p := &pass{passWanted: w, start: time.Now()}
	f.running = p
	if left, err := e.retryUnjournaled(); left > 0 {
		f.log.WithError(err).WithField("files", left).Debug("files whose close could not be journaled are still not journaled")
	}
	f.ticks++
	pending := e.journal.Pending()
	f.moving = map[string]bool{}
	for _, p := range pending {
		if p.Origin != "" {
			f.moving[p.Origin] = true
		}
	}
	// A store known to be at its cap gets no creates but those tried one
	// at a time after the deletes, on a sign of room (capwait.go).
	p.full, p.probe = f.capw.full, f.capw.mayTry(p.start, false, w.to.final)
	var held []op
	p.ops, held, p.deletes = f.plan(pending, w.to.final, p.full)
	p.r.capped = held
	e.startUploads(p)
}

// startUploads starts the pass's uploads while fewer than Concurrency are
// in flight; once all are answered, the deletes follow.
func (e *Engine) startUploads(p *pass) {
	for p.next < len(p.ops) && p.out < e.opts.Concurrency {
		o := p.ops[p.next]
		p.next++
		if o.kind == opCreate && e.f.capw.full {
			// Another create of this pass was refused at the cap.
			p.r.failed(o, reconcile.VerdictWaitCap, false, nil)
			continue
		}
		p.out++
		e.upload(p.ctx, o, func(err error) {
			p.out--
			if err != nil {
				v, first := e.f.judge(o, err)
				p.r.failed(o, v, first, err)
			} else {
				p.r.done(o)
			}
			e.startUploads(p)
		})
	}
	if p.out == 0 && p.next == len(p.ops) {
		p.ops = nil
		e.startDeletes(p)
	}
}

// resolveConflicts fetches and merges, one at a time, the memories the
// store changed too: the store wins, the local versions go to the
// conflict log. (Not on an unclean end, which only pushes writes.)
func (e *Engine) resolveConflicts(p *pass, i int) {
	if i == 0 {
		p.r.res.Conflicts = len(p.r.conflicted)
		if p.to.final && !p.to.deletes {
			e.endPass(p)
			return
		}
	}
	if i == len(p.r.conflicted) {
		e.endPass(p)
		return
	}
	e.resolve(p.ctx, p.r.conflicted[i], func(err error) {
		if err != nil {
			p.r.transient++
		}
		e.resolveConflicts(p, i+1)
	})
}

// endPass reports the pass: to the outage watch, the log, the flusher's
// record of the last pass and the observer; answers its asker, and begins
// the next pass asked for.
func (e *Engine) endPass(p *pass) {
	f, r := e.f, &p.r
	switch {
	case r.transient > 0 && p.ctx.Err() != nil:
		// Cut short (a final sync out of time, a stop): not an outage.
	case r.transient > 0:
		e.outage.fail(fmt.Errorf("%d change(s) could not be uploaded: %w", r.transient, r.firstErr))
	case r.res.Uploaded+r.res.Deleted > 0:
		e.outage.ok()
	}
	r.res.Left = e.journal.Stats().Pending
	if r.res.did() {
		f.log.WithFields(logrus.Fields{"trigger": p.to.trigger, "uploaded": r.res.Uploaded, "deleted": r.res.Deleted, "conflicts": r.res.Conflicts,
			"refused": r.res.Refused, "failed": r.res.Failed, "left": r.res.Left}).Info("sync pass")
	}
	unjournaled := len(unjournaledCloses(e.tree.Unjournaled()))
	down := e.outage.isDown()
	f.last = PassInfo{At: p.start, Duration: time.Since(p.start), Result: r.res, Clean: r.res.Failed == 0 && r.transient == 0, Trigger: p.to.trigger}
	f.unreached = r.transient > 0 && p.ctx.Err() == nil
	if f.last.Clean && !down {
		f.lastClean = p.start
	}
	e.opts.Observer.PassDone(f.last, f.waitingAfter(p.start, unjournaled))
	p.reply <- passOutcome{res: r.res, ran: true, unreached: f.unreached}
	f.running = nil
	e.nextPass()
}

// nextPass begins the next pass asked for, if any.
func (e *Engine) nextPass() {
	f := e.f
	if len(f.queued) > 0 {
		next := f.queued[0]
		f.queued = f.queued[1:]
		e.beginPass(next)
	}
}
