package sqlstore

import "testing"

// hasToken reports whether ch holds a wake now, consuming it.
func hasToken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestListenerRouting: a "queue:" NOTIFY wakes one queue waiter, a store
// id every feed waiter, and a listener reconnect (notifyAll) every waiter
// of both kinds, since notifications sent while it was away are lost.
func TestListenerRouting(t *testing.T) {
	var feed hub
	var queue queueWaiters
	w := waiters{feed: &feed, queue: &queue}
	key := queueKey("env_1")
	var qs, fs []<-chan struct{}
	for range 3 {
		q, qrel := queue.subscribe(key)
		f, frel := feed.subscribe("memstore_1")
		t.Cleanup(qrel)
		t.Cleanup(frel)
		qs, fs = append(qs, q), append(fs, f)
	}
	w.notify(key)
	if !hasToken(qs[0]) || hasToken(qs[1]) || hasToken(qs[2]) {
		t.Error(`a "queue:" NOTIFY did not wake exactly the oldest queue waiter`)
	}
	for i, f := range fs {
		if hasToken(f) {
			t.Errorf(`a "queue:" NOTIFY woke feed waiter %d`, i)
		}
	}
	w.notify("memstore_1")
	for i, f := range fs {
		if !hasToken(f) {
			t.Errorf("a store NOTIFY did not wake feed waiter %d", i)
		}
	}
	for i, q := range qs {
		if hasToken(q) {
			t.Errorf("a store NOTIFY woke queue waiter %d", i)
		}
	}
	f, frel := feed.subscribe("memstore_1")
	t.Cleanup(frel)
	w.notifyAll()
	for i, q := range qs {
		if !hasToken(q) {
			t.Errorf("a reconnect did not wake queue waiter %d", i)
		}
	}
	if !hasToken(f) {
		t.Error("a reconnect did not wake the feed waiter")
	}
}
