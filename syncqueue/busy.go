package syncqueue

import (
	"context"
)

// The busy rule (docs/architecture.md, "The busy rule"): while a request
// about memory X is in flight — an upload, a delete, a park, a fetch — X
// is busy, and the owner makes no other decision about X. An upload, a
// delete or a fetch that concerns X waits in X's queue, in order, and
// starts once X's answer has been carried out; a change the feed, the
// versions or a listing tells about X is set aside and merged again then
// (fetched afresh). So an answer is always carried out on the very state
// it was asked from: no answer older than what was applied can arrive.
//
// A create's memory id is learnt only from its answer, so while a create
// is in flight every memory this mount does not know is busy: a change of
// a memory it may be answered with waits for the answer.
type busySet struct {
	held     map[string]bool // memory ids with a request in flight
	deleting map[string]bool // those of them whose request is a delete
	// creates counts the creates in flight.
	creates int
	// waiting holds, per memory and in order, what waits for the memory
	// to be free: each is started once it is.
	waiting map[string][]func()
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
	return busySet{held: map[string]bool{}, deleting: map[string]bool{}, waiting: map[string][]func(){}, later: map[string]bool{}}
}

// isBusy reports whether memory id is busy.
func (e *Engine) isBusy(id string) bool {
	if e.busy.held[id] {
		return true
	}
	if e.busy.creates > 0 {
		if _, known := e.ms.known[id]; !known {
			return true
		}
	}
	return false
}

// markBusy marks memory id (free) busy until release.
func (e *Engine) markBusy(id string) {
	e.busy.held[id] = true
}

// whenFree runs start at once if memory id is free, else once it is, after
// what waits for it already. start marks id busy if it makes a request.
func (e *Engine) whenFree(id string, start func()) {
	if !e.isBusy(id) && len(e.busy.waiting[id]) == 0 {
		start()
		return
	}
	e.busy.waiting[id] = append(e.busy.waiting[id], start)
}

// covered reports whether the request in flight about its memory (busy)
// leaves the store as it says, so that its answer carries the change: our
// own update or park (its sha sent and not seen yet), delete, or create
// (a memory this mount does not know, at the path and with the sha of a
// create sent).
func (e *Engine) covered(it newsItem) bool {
	switch {
	case it.deleted:
		return e.busy.deleting[it.id]
	case it.sha == "":
		return false
	case e.ms.sent[it.id][it.sha]:
		return true
	}
	_, known := e.ms.known[it.id]
	return !known && e.ms.created[it.path] == it.sha
}

// release frees memory id, and starts what waited for it.
func (e *Engine) release(id string) {
	delete(e.busy.held, id)
	delete(e.busy.deleting, id)
	e.wake(id)
}

// wake starts, while memory id is free, what waits for it, in order; then,
// if it is still free, a change of it set aside is merged again. (A fetch
// merges the store's state as it is then, set-aside changes included.)
func (e *Engine) wake(id string) {
	for !e.isBusy(id) && len(e.busy.waiting[id]) > 0 {
		w := e.busy.waiting[id]
		if len(w) == 1 {
			delete(e.busy.waiting, id)
		} else {
			e.busy.waiting[id] = w[1:]
		}
		w[0]()
	}
	if !e.isBusy(id) && e.busy.later[id] {
		e.mergeAgain(id)
	}
}

// startCreate notes a create in flight.
func (e *Engine) startCreate() {
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
	for id := range e.busy.waiting {
		e.wake(id)
	}
	for id := range e.busy.later {
		e.wake(id)
	}
}

// mergeAgain fetches and merges a remote change of memory id (free) that
// was set aside while id was busy. One that fails stays set aside, and the
// overlay tries it again at its next step (mergeLater).
func (e *Engine) mergeAgain(id string) {
	if e.busy.stopped || e.busy.ctx == nil {
		return // stays set aside
	}
	delete(e.busy.later, id)
	e.markBusy(id)
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

// resolve fetches one memory and merges it (a 409 on upload), once it is
// free; then hears how the merge went.
func (e *Engine) resolve(ctx context.Context, id string, then func(error)) {
	e.whenFree(id, func() {
		e.markBusy(id)
		e.fetch(ctx, id, false, then)
	})
}

// mergeLater merges again the set-aside changes of memories that are
// free now (the overlay, before each step: those whose merge failed).
func (e *Engine) mergeLater() {
	for id := range e.busy.later {
		e.wake(id)
	}
}
