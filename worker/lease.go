package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// Ending says how a session ends (docs/operating.md, "Session lifecycle",
// step 7).
type Ending int

const (
	// EndClean: the item went to stopping/stopped: final sync with
	// deletes, then stop the item.
	EndClean Ending = iota
	// EndShutdown: the worker was told to stop, or hit an error: writes
	// only, then stop the item (force).
	EndShutdown
	// EndLeaseLost: another worker may hold the item now: writes only,
	// and the item is not stopped.
	EndLeaseLost
	// EndError: the session's tool runner failed (--run-tools): writes
	// only, then stop the item (force), as for a shutdown.
	EndError
)

func (e Ending) String() string {
	return [...]string{"clean", "shutdown", "lease lost", "error"}[e]
}

// heartbeater is what the lease keeper needs from the API.
type heartbeater interface {
	Heartbeat(ctx context.Context, envID, workID, expected string, ttl time.Duration) (*store.Heartbeat, error)
}

// lease keeps a work item's lease from the claim to the end of teardown:
// it heartbeats every ttl/2 (1 s to 30 s) and reports, once, why the
// session must end: the item stopping (clean), the lease lost (412,
// lease_extended false, or no successful heartbeat for longer than the
// lease). It stops when its context ends (after teardown).
type lease struct {
	api         heartbeater
	envID, work string
	log         logrus.FieldLogger

	mu   sync.Mutex
	last string // GUARDED_BY(mu)
	ttl  time.Duration
	end  chan Ending // capacity 1: the first reason to end
	// failed, when set, is called for each heartbeat that failed (metrics).
	failed func()
}

func newLease(api heartbeater, envID, workID, last string, log logrus.FieldLogger) *lease {
	if last == "" {
		last = store.NoHeartbeat
	}
	return &lease{api: api, envID: envID, work: workID, last: last, log: log, ttl: store.DefaultLeaseTTL, end: make(chan Ending, 1)}
}

func (l *lease) signal(e Ending) {
	select {
	case l.end <- e:
	default:
	}
}

// run heartbeats until ctx ends. The first beat is sent at once.
func (l *lease) run(ctx context.Context) {
	lastOK := time.Now()
	for {
		hb, err := l.beat(ctx)
		if err != nil && ctx.Err() == nil && l.failed != nil {
			l.failed()
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrPreconditionFailed):
			l.log.WithError(err).Warn("lease lost: the work item's heartbeat precondition failed")
			l.signal(EndLeaseLost)
		case err != nil:
			if time.Since(lastOK) > l.ttl {
				l.log.WithError(err).Warn("lease lost: no successful heartbeat for longer than the lease")
				l.signal(EndLeaseLost)
			}
		default:
			lastOK = time.Now()
			switch {
			case hb.State == store.WorkStopping || hb.State == store.WorkStopped:
				l.signal(EndClean)
			case !hb.LeaseExtended:
				l.log.Warn("lease lost: the heartbeat did not extend the lease")
				l.signal(EndLeaseLost)
			}
		}
		interval := min(max(l.ttl/2, time.Second), 30*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (l *lease) beat(ctx context.Context) (*store.Heartbeat, error) {
	l.mu.Lock()
	expected := l.last
	l.mu.Unlock()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hb, err := l.api.Heartbeat(hctx, l.envID, l.work, expected, 0)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if hb.LastHeartbeat != "" {
		l.last = hb.LastHeartbeat
	}
	if hb.TTLSeconds > 0 {
		l.ttl = time.Duration(hb.TTLSeconds) * time.Second
	}
	l.mu.Unlock()
	return hb, nil
}
