package sqlstore

import (
	"container/list"
	"sync"
)

// queueWaiters wakes blocked work polls ONE per enqueue, not all of them:
// with 50 workers long-polling an environment, a broadcast made every
// enqueue cost 50 poll queries (the thundering herd). The change feed is
// different and stays on hub: every feed waiter must see every commit.
//
// Each environment (keyed by queueKey, the NOTIFY payload) has a FIFO of
// waiters, each with its own buffered(1) channel, which holds at most one
// wake token. wake puts a token into the channel of the oldest waiter that
// has none; the waiter's select consumes it. A waiter that leaves without
// receiving its token (its block ran out, shutdown, its request ended, or
// its poll claimed an item before it got to the select) passes the token
// on at release, so a wake is never lost while a waiter could use it. A
// wake with no token-less waiter is dropped: every waiter already holds
// one and will poll, and a later waiter polls after subscribing, so it
// finds the item by querying.
//
// # Why no queued item waits for a block to run out
//
// Claim: while a waiter W of this process is blocked without a token, no
// item queued in its environment (committed, then woken for) stays
// unclaimed until a block_ms runs out, modulo a Poll error.
//
//  1. W polled after subscribing and found nothing, so an item whose wake
//     came before W subscribed was claimed by then (its commit precedes
//     its wake). Take an item I whose wake comes after W subscribed.
//  2. From W's subscription on, no token is dropped: wake and release
//     both give a token to the oldest token-less waiter, and W is one.
//     So I's wake puts a token into some waiter's channel.
//  3. That token is held until its holder either passes it on at release
//     (step 2 again) or receives it and polls. That poll starts after I's
//     commit, so it either claims an item, or finds none (I was claimed).
//  4. Every claim wakes one more waiter (DB.Poll calls wake after its
//     commit): the claim may have taken another item than I (an older
//     one, or one whose lease lapsed, which never wakes anyone), so the
//     wake is handed on and step 3 repeats. Each step is one poll query,
//     so the chain ends, within a few polls, at a poll that finds no item
//     offered: I has been claimed.
//
// A Poll error ends a chain (the erroring request returns its error); the
// other waiters then find I at their block's end, as before.
//
// On PostgreSQL an enqueue wakes through its NOTIFY alone, in every
// process including its own (DB.enqueued): commit delivers it to every
// listener, so step 2's wake is never missing. While a listener is away
// its process's polls find items at their block's end, and its reconnect
// wakes all of them. SQLite wakes in DB.enqueued.
//
// The cost: an enqueue wakes one poll per process, and a claim one more,
// which finds the next item in a burst or nothing. Every enqueue
// commits exactly one item (enqueue), so one wake per enqueue is enough:
// a transaction queuing several would have to wake as many.
type queueWaiters struct {
	mu   sync.Mutex
	envs map[string]*list.List // GUARDED_BY(mu); of *queueWaiter, oldest first
}

// queueWaiter is one subscription: its wake token, and its place in its
// environment's FIFO.
type queueWaiter struct {
	token chan struct{} // buffered(1)
	elem  *list.Element
}

// subscribe adds a waiter at the back of key's FIFO. The release function
// (idempotent) must be called on every exit path; it passes on a token
// the waiter did not receive.
func (q *queueWaiters) subscribe(key string) (<-chan struct{}, func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.envs == nil {
		q.envs = map[string]*list.List{}
	}
	l := q.envs[key]
	if l == nil {
		l = list.New()
		q.envs[key] = l
	}
	w := &queueWaiter{token: make(chan struct{}, 1)}
	w.elem = l.PushBack(w)
	var once sync.Once
	return w.token, func() { once.Do(func() { q.release(key, w) }) }
}

// release removes w from key's FIFO and hands a token it still holds to
// the next token-less waiter.
func (q *queueWaiters) release(key string, w *queueWaiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.envs[key]
	l.Remove(w.elem)
	if l.Len() == 0 {
		delete(q.envs, key)
	}
	select {
	case <-w.token:
		q.wakeLocked(key)
	default:
	}
}

// wake gives one token to the oldest waiter of key that has none, or
// drops it if there is no such waiter.
func (q *queueWaiters) wake(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wakeLocked(key)
}

func (q *queueWaiters) wakeLocked(key string) {
	l := q.envs[key]
	if l == nil {
		return
	}
	for e := l.Front(); e != nil; e = e.Next() {
		select {
		case e.Value.(*queueWaiter).token <- struct{}{}:
			return
		default: // holds a token already
		}
	}
}

// wakeAll gives every waiter a token (after the listener reconnects, when
// notifications may have been missed).
func (q *queueWaiters) wakeAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, l := range q.envs {
		for e := l.Front(); e != nil; e = e.Next() {
			select {
			case e.Value.(*queueWaiter).token <- struct{}{}:
			default:
			}
		}
	}
}
