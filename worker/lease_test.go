package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// failingBeats answers the first beats with an error, then extends.
type failingBeats struct {
	mu    sync.Mutex
	fails int
}

func (f *failingBeats) Heartbeat(ctx context.Context, envID, workID, expected string, ttl time.Duration) (*store.Heartbeat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return nil, errors.New("connection refused")
	}
	return &store.Heartbeat{LeaseExtended: true, State: store.WorkActive}, nil
}

// A failed heartbeat is reported to the lease's failed hook (metrics). In
// a synctest bubble, synctest.Wait returns once the lease waits for its
// next beat: the first has been sent and answered by then.
func TestLeaseReportsFailedHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failed atomic.Int32
		l := newLease(&failingBeats{fails: 1}, "env_x", "work_x", "", logrus.New())
		l.failed = func() { failed.Add(1) }
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); l.run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		if failed.Load() == 0 {
			t.Fatal("the failed heartbeat was not reported")
		}
		select {
		case e := <-l.end:
			t.Errorf("one failed heartbeat ended the session (%s)", e)
		default:
		}
	})
}
