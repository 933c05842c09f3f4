package sqlstore

import "sync"

// hub wakes change-feed waiters. Each store with waiters has one open
// channel; notify closes it (waking every waiter at once) and forgets it,
// and the next subscribe makes a new one. Subscriptions are counted, so a
// store nobody waits on any more holds no memory. A spurious wake-up is
// harmless: waiters re-read the feed.
type hub struct {
	mu    sync.Mutex
	chans map[string]*hubEntry // GUARDED_BY(mu)
}

type hubEntry struct {
	ch   chan struct{}
	refs int
}

// subscribe returns the store's current channel and a release function
// to call once the caller stops waiting on it.
func (h *hub) subscribe(storeID string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.chans == nil {
		h.chans = map[string]*hubEntry{}
	}
	e, ok := h.chans[storeID]
	if !ok {
		e = &hubEntry{ch: make(chan struct{})}
		h.chans[storeID] = e
	}
	e.refs++
	var once sync.Once
	return e.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			e.refs--
			if e.refs == 0 && h.chans[storeID] == e {
				delete(h.chans, storeID)
			}
		})
	}
}

func (h *hub) notify(storeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.chans[storeID]; ok {
		close(e.ch)
		delete(h.chans, storeID)
	}
}

// notifyAll wakes every waiter (after the listener reconnects, when
// notifications may have been missed).
func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, e := range h.chans {
		close(e.ch)
		delete(h.chans, id)
	}
}
