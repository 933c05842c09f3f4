package sqlstore

import "sync"

// hub wakes change-feed waiters. Each store has at most one open channel;
// notify closes it (waking every waiter at once) and forgets it, and the
// next subscribe makes a new one. A spurious wake-up is harmless: waiters
// re-read the feed.
type hub struct {
	mu    sync.Mutex
	chans map[string]chan struct{} // GUARDED_BY(mu)
}

func (h *hub) subscribe(storeID string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.chans == nil {
		h.chans = map[string]chan struct{}{}
	}
	ch, ok := h.chans[storeID]
	if !ok {
		ch = make(chan struct{})
		h.chans[storeID] = ch
	}
	return ch
}

func (h *hub) notify(storeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.chans[storeID]; ok {
		close(ch)
		delete(h.chans, storeID)
	}
}

// notifyAll wakes every waiter (after the listener reconnects, when
// notifications may have been missed).
func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ch := range h.chans {
		close(ch)
		delete(h.chans, id)
	}
}
