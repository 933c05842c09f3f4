package sqlstore

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxGroup bounds how many writes share one transaction, so one group's
// statements and its callers' wait stay small.
const maxGroup = 64

// groupReq is one caller's write waiting in, or running in, a group. The
// runner fills result fields and then closes done.
type groupReq[R any] struct {
	ctx  context.Context
	arg  any
	wake chan struct{} // buffered(1): done, or promoted to leader
	done bool          // GUARDED_BY(groups.mu) once queued
	lead bool          // GUARDED_BY(groups.mu): promoted, runs the next group
	res  R             // written by the runner before done
	err  error         // written by the runner before done
}

// groups batches concurrent calls per key (a store) so that one leader
// runs them together: with a group in flight, calls that arrive queue;
// when it ends, its leader promotes the first queued call, which runs
// everything queued by then as the next group. No goroutine is started:
// the leader is a caller. A leader runs one group only (its own call is
// in it), so no caller waits behind more than the group in flight and its
// own. A call whose context ends while it is queued leaves the queue and
// returns the context's error; once its group is in flight it waits for
// the outcome, and the group's context ends only when every member's has.
type groups[R any] struct {
	run func(ctx context.Context, key string, reqs []*groupReq[R])

	mu sync.Mutex
	m  map[string]*groupQueue[R] // GUARDED_BY(mu)
}

type groupQueue[R any] struct {
	pending []*groupReq[R] // GUARDED_BY(groups.mu)
	running bool           // GUARDED_BY(groups.mu): a group is in flight or a leader is promoted
}

// do queues arg under key and returns its outcome as run reported it.
func (g *groups[R]) do(ctx context.Context, key string, arg any) (R, error) {
	r := &groupReq[R]{ctx: ctx, arg: arg, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*groupQueue[R]{}
	}
	q := g.m[key]
	if q == nil {
		q = &groupQueue[R]{}
		g.m[key] = q
	}
	q.pending = append(q.pending, r)
	if !q.running {
		q.running = true
		r.lead = true
	}
	g.mu.Unlock()
	for {
		g.mu.Lock()
		done, lead := r.done, r.lead
		g.mu.Unlock()
		if done {
			return r.res, r.err
		}
		if lead {
			g.lead(key, q)
			continue // r was in the group: done now
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
			if g.withdraw(key, q, r) {
				var zero R
				return zero, ctx.Err()
			}
			<-r.wake // in flight or promoted: wait for it
		}
	}
}

// lead runs everything queued under key as one group, then hands the
// queue on.
func (g *groups[R]) lead(key string, q *groupQueue[R]) {
	g.mu.Lock()
	n := min(len(q.pending), maxGroup)
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	for _, r := range batch {
		r.lead = false
	}
	g.mu.Unlock()

	var live []*groupReq[R]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
	}
	if len(live) > 0 {
		ctx, stop := groupContext(live)
		g.run(ctx, key, live)
		stop()
	}

	g.mu.Lock()
	for _, r := range batch {
		r.done = true
		select {
		case r.wake <- struct{}{}:
		default: // a wake is pending; r rechecks its state
		}
	}
	g.handOn(key, q)
	g.mu.Unlock()
}

// handOn promotes the first queued call to lead the next group, or ends
// the queue when nothing waits. g.mu is held.
func (g *groups[R]) handOn(key string, q *groupQueue[R]) {
	if len(q.pending) == 0 {
		q.running = false
		delete(g.m, key)
		return
	}
	next := q.pending[0]
	next.lead = true
	select {
	case next.wake <- struct{}{}:
	default: // already woken; it rechecks its state
	}
}

// withdraw takes r out of the queue if it is still there (not in flight),
// passing on the lead if r held it. It reports whether r was withdrawn.
func (g *groups[R]) withdraw(key string, q *groupQueue[R], r *groupReq[R]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, p := range q.pending {
		if p != r {
			continue
		}
		q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
		if r.lead {
			r.lead = false
			g.handOn(key, q)
		}
		return true
	}
	return false
}

// groupContext is a context for a group's work that ends once every
// member's context has ended (one caller giving up must not fail the
// others), and stop releases it.
func groupContext[R any](reqs []*groupReq[R]) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(reqs)))
	stops := make([]func() bool, len(reqs))
	for i, r := range reqs {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
