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
// (fetchDone). The flusher's pass still runs on its own goroutine, and
// meets the owner at syncMu, which the owner takes for each event.
//
// The owner runs from Open to Close: files not fetched yet are read
// until the unmount, after Finish.

// ownerEvent is one event the owner handles, with syncMu held.
type ownerEvent interface {
	handle(e *Engine)
}

// owner is the owner's loop state: its events and its pool.
type owner struct {
	events chan ownerEvent
	slots  chan struct{} // the pool: one per request in flight
	done   chan struct{} // closed once the loop has ended (Close)
}

// startOwner starts the owner's loop; it ends with e.life (Close).
func (e *Engine) startOwner() {
	e.own = &owner{events: make(chan ownerEvent), slots: make(chan struct{}, e.opts.Concurrency), done: make(chan struct{})}
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
			e.syncMu.Lock()
			ev.handle(e)
			e.syncMu.Unlock()
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
	select {
	case e.own.events <- ev:
		return true
	case <-e.own.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// request runs call in the pool, and hands the event it returns to the
// owner. Called on any goroutine; it never blocks.
func (e *Engine) request(call func() ownerEvent) {
	go func() {
		select {
		case e.own.slots <- struct{}{}:
		case <-e.own.done:
			return
		}
		ev := call()
		<-e.own.slots
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
// (hold, tryHold): its answer comes back as fetchDone, with then. Called
// with syncMu held.
func (e *Engine) fetch(ctx context.Context, id string, lazy bool, then func(error)) {
	e.request(func() ownerEvent {
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

// start fetches for w, the memory free (syncMu held).
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
	next  int
	reply chan error
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
	b.reply <- nil
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
			b.reply <- err
			return false
		}
		return true
	case it.sha != "" && e.settledWithoutFetch(it.id, it.path, it.sha):
		e.release(it.id)
		return true
	}
	e.fetch(b.ctx, it.id, false, func(err error) {
		if err != nil {
			b.reply <- err
			return
		}
		b.handle(e)
	})
	return false
}

// mergeNews has the owner merge items (a mergeBatch) and waits until it
// has: also once ctx ends, whose requests then fail at once.
func (e *Engine) mergeNews(ctx context.Context, items []newsItem) error {
	b := &mergeBatch{ctx: ctx, items: items, reply: make(chan error, 1)}
	if !e.send(context.Background(), b) {
		return errOwnerGone
	}
	select {
	case err := <-b.reply:
		return err
	case <-e.own.done:
		return errOwnerGone
	}
}
