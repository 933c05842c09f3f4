package syncqueue

import (
	"context"
)

// The busy rule (docs/architecture.md, "The busy rule"): while a request
// about memory X is in flight — an upload, a delete, a park, a fetch — X
// is busy, and no other decision about X is made. A fetch or an upload
// that concerns X waits until X's answer has been carried out; a change
// the feed, the versions or a listing tells about X is set aside and
// merged again then (fetched afresh). So an answer is always carried out
// on the very state it was asked from: no answer older than what was
// applied can arrive.
//
// A create's memory id is learnt only from its answer, so while a create
// is in flight every memory this mount does not know is busy: a change of
// a memory it may be answered with waits for the answer.
//
// Every method here is called with Engine.syncMu held.
type busySet struct {
	held map[string]chan struct{} // memory id -> closed once its answer has been carried out
	// creates counts the creates in flight; idle is closed when the last
	// of them has been answered (nil while none is in flight).
	creates int
	idle    chan struct{}
	// waiting holds, per memory and in order, the fetches of files not
	// fetched yet that wait for the memory to be free.
	waiting map[string][]fetchWanted
	// later holds the memories whose remote change was set aside while
	// they were busy: each is fetched and merged again once free.
	later map[string]bool
	// stopped: Finish has begun, and set-aside changes are no longer
	// merged (the next mount lists the store).
	stopped bool
	// ctx bounds the merges of set-aside changes (from Start).
	ctx context.Context
}

func newBusySet() busySet {
	return busySet{held: map[string]chan struct{}{}, waiting: map[string][]fetchWanted{}, later: map[string]bool{}}
}

// waitOn returns what a decision about memory id waits for: nil when id
// is free.
func (e *Engine) waitOn(id string) <-chan struct{} {
	if ch := e.busy.held[id]; ch != nil {
		return ch
	}
	if e.busy.idle != nil {
		if _, known := e.ms.known[id]; !known {
			return e.busy.idle
		}
	}
	return nil
}

// hold waits until memory id is free (bounded by ctx; syncMu is let go
// meanwhile) and marks it busy. On success the caller frees it with
// release once the answer of its request has been carried out.
func (e *Engine) hold(ctx context.Context, id string) error {
	for {
		ch := e.waitOn(id)
		if ch == nil {
			e.busy.held[id] = make(chan struct{})
			return nil
		}
		e.syncMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		e.syncMu.Lock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// tryHold marks memory id busy if it is free, and reports whether it did;
// if not, a remote change of it is set aside (later).
func (e *Engine) tryHold(id string) bool {
	if e.waitOn(id) != nil {
		e.busy.later[id] = true
		return false
	}
	e.busy.held[id] = make(chan struct{})
	return true
}

// release frees memory id, and starts what waited for it.
func (e *Engine) release(id string) {
	if ch := e.busy.held[id]; ch != nil {
		close(ch)
		delete(e.busy.held, id)
	}
	e.wake(id)
}

// wake starts, if memory id is free, the first fetch that waits for it;
// else, a change of it set aside is merged again. (A fetch merges the
// store's state as it is then, set-aside changes included.)
func (e *Engine) wake(id string) {
	if e.waitOn(id) != nil {
		return
	}
	if w := e.busy.waiting[id]; len(w) > 0 {
		if len(w) == 1 {
			delete(e.busy.waiting, id)
		} else {
			e.busy.waiting[id] = w[1:]
		}
		delete(e.busy.later, id)
		w[0].start(e)
		return
	}
	if e.busy.later[id] {
		e.mergeAgain(id)
	}
}

// startCreate notes a create in flight.
func (e *Engine) startCreate() {
	if e.busy.creates == 0 {
		e.busy.idle = make(chan struct{})
	}
	e.busy.creates++
}

// endCreate notes a create answered (its answer carried out); once none
// is left in flight, what waited on the memories this mount did not know
// starts.
func (e *Engine) endCreate() {
	e.busy.creates--
	if e.busy.creates > 0 {
		return
	}
	close(e.busy.idle)
	e.busy.idle = nil
	for id := range e.busy.waiting {
		e.wake(id)
	}
	for id := range e.busy.later {
		e.wake(id)
	}
}

// mergeAgain fetches and merges, on the owner, a remote change of memory
// id (free) that was set aside while id was busy. One that fails stays set
// aside, and the overlay tries it again at its next step (mergeLater).
func (e *Engine) mergeAgain(id string) {
	if e.busy.stopped || e.busy.ctx == nil || e.own == nil {
		return // stays set aside
	}
	delete(e.busy.later, id)
	e.busy.held[id] = make(chan struct{})
	ctx := e.busy.ctx
	e.fetch(ctx, id, false, func(err error) {
		if err != nil {
			e.busy.later[id] = true
			if ctx.Err() == nil {
				e.reportHeld(err)
			}
		}
	})
}

// stopMerging ends the merging of set-aside changes (Finish).
func (e *Engine) stopMerging() {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	e.busy.stopped = true
}

// mergeLater merges again the set-aside changes of memories that are
// free now (the overlay, before each step: those whose merge failed).
func (e *Engine) mergeLater() {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	for id := range e.busy.later {
		e.wake(id)
	}
}
