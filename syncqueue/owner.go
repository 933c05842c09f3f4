package syncqueue

import (
	"context"
	"errors"

	"github.com/memfs/memfs/store"
)

// The owner (docs/architecture.md, "The owner"): one goroutine per mounted
// store carries out the answers of the store's requests about its
// memories, one event at a time. The requests run in a bounded pool
// (EngineOptions.Concurrency), never on the owner, and come back as
// events; the owner never waits on the network. What it handles today:
// the remote side — the changes the feed, the versions or a listing tell
// (a merge batch, merged in order, one fetch at a time), the fetches of
// files not fetched yet (fetchWanted), and the fetches that answer them
// (fetchDone), and the passes (pass.go). The merge state (merge.go), the
// busy set (busy.go), the feed's cursor and the flusher's bookkeeping are
// the owner's alone: no lock guards them, and no other goroutine touches
// them. The goroutines around it have no state of their own: the
// overlay's poller (overlay.go) makes the feed's long polls and the
// listings and hands what they tell as batches; the schedule
// (schedule.go) asks for passes; the filesystem asks for fetches; Status
// asks for what it shows (status.go).
//
// The owner runs from Open to Close: files not fetched yet are read
// until the unmount, after Finish. After Close, what asked it is
// answered at once (Status reads the state left, which nothing changes
// any more).

// ownerEvent is one event the owner handles.
type ownerEvent interface {
	handle(e *Engine)
}

// owner is the owner's loop state: its events and its pool.
type owner struct {
	events chan ownerEvent
	// The pool, one slot per request in flight: the passes' requests and
	// the fetches apart, so that uploads hanging on a slow store never
	// hold back a remote change or a read.
	slots, fetchSlots chan struct{}
	done              chan struct{} // closed once the loop has ended (Close)
	batches           int           // merge batches in progress
}

// startOwner starts the owner's loop; it ends with e.life (Close).
func (e *Engine) startOwner() {
	n := e.opts.Concurrency
	e.own = &owner{events: make(chan ownerEvent), slots: make(chan struct{}, n), fetchSlots: make(chan struct{}, n), done: make(chan struct{})}
	go e.ownLoop()
}

// ownLoop handles events until Close.
func (e *Engine) ownLoop() {
	defer close(e.own.done)
	for {
		select {
		case <-e.life.Done():
			return
		case ev := <-e.own.events:
			ev.handle(e)
		}
	}
}

// stopOwner waits for the owner's loop to end (Close, after lifeCancel).
func (e *Engine) stopOwner() {
	if e.own != nil {
		<-e.own.done
	}
}

// send hands ev to the owner, and reports false when the owner has ended
// (or ctx did first).
func (e *Engine) send(ctx context.Context, ev ownerEvent) bool {
	if e.own == nil {
		return false
	}
	select {
	case e.own.events <- ev:
		return true
	case <-e.own.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// request runs call, a pass's request, in the pool, and hands the event
// it returns to the owner. Called on any goroutine; it never blocks.
func (e *Engine) request(call func() ownerEvent) {
	e.inPool(e.own.slots, call)
}

// inPool runs call in a slot of slots, and hands the event it returns to
// the owner.
func (e *Engine) inPool(slots chan struct{}, call func() ownerEvent) {
	go func() {
		select {
		case slots <- struct{}{}:
		case <-e.own.done:
			return
		}
		ev := call()
		<-slots
		select {
		case e.own.events <- ev:
		case <-e.own.done:
		}
	}()
}

// errOwnerGone is the answer to a request made after Close.
var errOwnerGone = errors.New("the mount is closed")

// fetchDone is the store's answer to the fetch of memory id (m nil: 404).
// The owner merges it — into its file not fetched yet when lazy and the
// mount still agrees on it (fill) — frees the memory and goes on with
// then.
type fetchDone struct {
	id   string
	m    *store.Memory
	err  error
	lazy bool
	then func(err error)
}

func (d fetchDone) handle(e *Engine) {
	err := d.err
	if err == nil && !(d.lazy && e.fill(d.m)) {
		err = e.applyRemote(d.id, d.m)
	}
	e.release(d.id)
	d.then(err)
}

// fetch starts the fetch of memory id, which the caller has marked busy
// (markBusy): its answer comes back as fetchDone, with then.
func (e *Engine) fetch(ctx context.Context, id string, lazy bool, then func(error)) {
	e.inPool(e.own.fetchSlots, func() ownerEvent {
		m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, id)
		if errors.Is(err, store.ErrNotFound) {
			m, err = nil, nil
		}
		if lazy {
			if err != nil {
				e.fetchFailed(err)
			} else {
				e.fetchWorked()
			}
		}
		return fetchDone{id: id, m: m, err: err, lazy: lazy, then: then}
	})
}

// fetchWanted asks for the content of the file of memory id (lazy.go):
// fetched now if the memory is free, else once it is (busy.go). The
// answer goes to reply (buffered).
type fetchWanted struct {
	ctx     context.Context
	id      string
	reply   chan error
	started chan struct{} // closed once the memory was free and the fetch began
}

func (w fetchWanted) handle(e *Engine) {
	e.whenFree(w.id, func() { w.start(e) })
}

// start fetches for w, the memory free.
func (w fetchWanted) start(e *Engine) {
	close(w.started)
	if err := w.ctx.Err(); err != nil {
		w.reply <- err // the asker has stopped waiting
		return
	}
	e.markBusy(w.id)
	e.fetch(w.ctx, w.id, true, func(err error) { w.reply <- err })
}

// newsItem is what the feed, the versions or a listing told of one
// memory's change: deleted, or its path and sha when told (sha "": not
// told, the memory is fetched).
type newsItem struct {
	id        string
	deleted   bool
	path, sha string
}

// mergeBatch merges the changes the overlay was told, in order: a
// deletion at once, a path and sha this mount agrees on (or adopts)
// without a request, anything else fetched and merged, one at a time.
// The change of a busy memory (busy.go) waits in the memory's queue, and
// the batch with it, unless the request in flight carries it (covered):
// then it is set aside, and merged again once the memory is free. So
// once the batch has ended every change it told is on the mount, or is
// ours and on its way (the feed's cursor moves on that). The first
// failure ends the batch; reply (buffered) hears how it ended.
type mergeBatch struct {
	ctx   context.Context
	items []newsItem
	then  batchEnd
	next  int
	reply chan error
}

// batchEnd is what a batch that merged every change it told settles:
// the feed's cursor moves (setCursor), and remote changes no longer wait
// on this host (unblock).
type batchEnd struct {
	setCursor, unblock bool
	cursor             int64
	// listing: the items are a whole listing of the store, and every
	// memory this mount knows that it did not show is fetched too (a
	// 404 is a deletion, anything else merges).
	listing bool
}

func (b *mergeBatch) handle(e *Engine) {
	for b.next < len(b.items) {
		it := b.items[b.next]
		b.next++
		if e.isBusy(it.id) || len(e.busy.waiting[it.id]) > 0 {
			if e.covered(it) {
				e.busy.later[it.id] = true
				continue
			}
			e.whenFree(it.id, func() {
				if b.merge(e, it) {
					b.handle(e)
				}
			})
			return
		}
		if !b.merge(e, it) {
			return
		}
	}
	if b.then.setCursor {
		e.cursor = b.then.cursor
	}
	if b.then.unblock {
		e.remoteBlocked = false
	}
	e.own.batches--
	b.reply <- nil
}

// fail ends the batch on err.
func (b *mergeBatch) fail(e *Engine, err error) {
	e.own.batches--
	b.reply <- err
}

// merge merges it, its memory free, and reports whether the batch goes
// on at once: not when it fetches (the answer goes on), nor when the
// merge failed (the batch ends).
func (b *mergeBatch) merge(e *Engine, it newsItem) bool {
	e.markBusy(it.id)
	switch {
	case it.deleted:
		err := e.applyRemote(it.id, nil)
		e.release(it.id)
		if err != nil {
			b.fail(e, err)
			return false
		}
		return true
	case it.sha != "" && e.settledWithoutFetch(it.id, it.path, it.sha):
		e.release(it.id)
		return true
	}
	e.fetch(b.ctx, it.id, false, func(err error) {
		if err != nil {
			b.fail(e, err)
			return
		}
		b.handle(e)
	})
	return false
}

// mergeNews has the owner merge items (a mergeBatch) and settle then,
// and waits until it has: also once ctx ends, whose requests then fail at
// once.
func (e *Engine) mergeNews(ctx context.Context, items []newsItem, then batchEnd) error {
	b := &mergeBatch{ctx: ctx, items: items, then: then, reply: make(chan error, 1)}
	if !e.send(context.Background(), batchStart{b}) {
		return errOwnerGone
	}
	select {
	case err := <-b.reply:
		return err
	case <-e.own.done:
		return errOwnerGone
	}
}

// batchStart begins a merge batch.
type batchStart struct{ b *mergeBatch }

func (s batchStart) handle(e *Engine) {
	e.own.batches++
	if b := s.b; b.then.listing {
		listed := make(map[string]bool, len(b.items))
		for _, it := range b.items {
			listed[it.id] = true
		}
		for id := range e.ms.known {
			if !listed[id] {
				b.items = append(b.items, newsItem{id: id})
			}
		}
	}
	s.b.handle(e)
}

// started hands the owner the context of the running mount (Start): it
// bounds the merges of set-aside changes.
type started struct{ ctx context.Context }

func (s started) handle(e *Engine) { e.busy.ctx = s.ctx }

// finishing tells the owner that Finish has begun: set-aside changes are
// no longer merged.
type finishing struct{}

func (finishing) handle(e *Engine) { e.busy.stopped = true }

// stepping tells the owner that the overlay begins a step: set-aside
// changes whose merge failed are merged again (mergeLater).
type stepping struct{}

func (stepping) handle(e *Engine) { e.mergeLater() }

// reported tells the owner how an overlay step went (report).
type reported struct{ err error }

func (r reported) handle(e *Engine) { e.reportHeld(r.err) }

// followsSet records how the mount follows the store now (Status.Follows).
type followsSet struct{ how string }

func (f followsSet) handle(e *Engine) { e.follows = f.how }

// listedPage is a page of the content fetch's listing (lazy.go): the
// files it describes as agreed are filled; done is closed after.
type listedPage struct {
	ms   []store.Memory
	done chan struct{}
}

func (l listedPage) handle(e *Engine) {
	for i := range l.ms {
		e.fill(&l.ms[i])
	}
	close(l.done)
}

// tell hands ev to the owner, which answers nothing: dropped once the
// owner has ended.
func (e *Engine) tell(ev ownerEvent) {
	e.send(context.Background(), ev)
}
