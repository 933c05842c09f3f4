package syncqueue

import (
	"context"
	"sync"
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
	// later holds the memories whose remote change was set aside while
	// they were busy: each is merged again once free.
	later map[string]bool
	// stopped: Finish has begun, and set-aside changes are no longer
	// merged on their own (the next mount lists the store).
	stopped bool
	// ctx bounds the merges of set-aside changes (from Start).
	ctx     context.Context
	replays sync.WaitGroup
}

func newBusySet() busySet {
	return busySet{held: map[string]chan struct{}{}, later: map[string]bool{}}
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

// release frees memory id, and merges again a remote change of it that
// was set aside meanwhile.
func (e *Engine) release(id string) {
	if ch := e.busy.held[id]; ch != nil {
		close(ch)
		delete(e.busy.held, id)
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
// is left in flight, the set-aside changes of memories this mount did not
// know are merged again.
func (e *Engine) endCreate() {
	e.busy.creates--
	if e.busy.creates > 0 {
		return
	}
	close(e.busy.idle)
	e.busy.idle = nil
	for id := range e.busy.later {
		if e.busy.held[id] == nil {
			e.mergeAgain(id)
		}
	}
}

// mergeAgain merges again, on its own goroutine, a remote change of memory id
// that was set aside while id was busy: the memory is fetched afresh. One
// that fails stays set aside, and the overlay tries it again at its next
// step (mergeLater).
func (e *Engine) mergeAgain(id string) {
	if e.busy.stopped || e.busy.ctx == nil {
		return // stays set aside
	}
	delete(e.busy.later, id)
	ctx := e.busy.ctx
	e.busy.replays.Add(1)
	go func() {
		defer e.busy.replays.Done()
		if err := e.mergeChange(ctx, id, remoteNews{}); err != nil {
			e.syncMu.Lock()
			e.busy.later[id] = true
			e.syncMu.Unlock()
			if ctx.Err() == nil {
				e.report(err)
			}
		}
	}()
}

// stopReplays ends the merging of set-aside changes on their own, and
// waits for those under way.
func (e *Engine) stopReplays() {
	e.syncMu.Lock()
	e.busy.stopped = true
	e.syncMu.Unlock()
	e.busy.replays.Wait()
}

// mergeLater merges the set-aside changes of memories that are free now
// (the overlay, before each step: those whose merge failed).
func (e *Engine) mergeLater(ctx context.Context) error {
	e.syncMu.Lock()
	var ids []string
	for id := range e.busy.later {
		if e.waitOn(id) == nil {
			ids = append(ids, id)
			delete(e.busy.later, id)
		}
	}
	e.syncMu.Unlock()
	for i, id := range ids {
		if err := e.mergeChange(ctx, id, remoteNews{}); err != nil {
			e.syncMu.Lock()
			for _, id := range ids[i:] {
				e.busy.later[id] = true
			}
			e.syncMu.Unlock()
			return err
		}
	}
	return nil
}
