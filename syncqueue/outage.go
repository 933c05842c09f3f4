package syncqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/internal/backoff"
	"github.com/memfs/memfs/store"
)

// outage reports the store's reachability once per outage: one "store
// unreachable" warning with the error, one "recovered" line with the count
// of failures — never a line per attempt. The flusher, the overlay and the
// watchdog share it. A store that answers 401 or 403 is reachable: that is
// "refused by the store" with its message, once until a request works, and
// no outage.
type outage struct {
	log logrus.FieldLogger

	mu       sync.Mutex
	down     bool      // GUARDED_BY(mu)
	refused  bool      // GUARDED_BY(mu): the last failure was a 401/403 (lastErr)
	failures int       // GUARDED_BY(mu)
	lastErr  error     // GUARDED_BY(mu): the last failure, kept after recovery for status
	lastAt   time.Time // GUARDED_BY(mu)
	since    time.Time // GUARDED_BY(mu): start of the current outage
}

func (o *outage) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	o.lastErr, o.lastAt = err, time.Now()
	if isRefusal(err) {
		if !o.refused {
			o.refused = true
			o.log.Warn("refused by the store: " + storeMessage(err) + "; retried with backoff")
		}
		return
	}
	if !o.down {
		o.down, o.since = true, o.lastAt
		o.log.WithError(err).Warn("store unreachable: the mount keeps working, changes stay journaled and are retried")
	}
}

func (o *outage) ok() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = false
	if o.down {
		o.log.WithFields(logrus.Fields{"failures": o.failures, "outage": time.Since(o.since).Round(time.Millisecond).String()}).Info("store recovered")
		o.down, o.failures = false, 0
	}
}

// isDown reports whether the last attempt failed.
func (o *outage) isDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// refusal is the store's refusal (401/403) of the last request, or nil.
func (o *outage) refusal() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refused {
		return o.lastErr
	}
	return nil
}

// isRefusal reports whether err is the store refusing the credential
// (401) or what it may do (403): the store answered.
func isRefusal(err error) bool {
	return errors.Is(err, store.ErrForbidden) || errors.Is(err, store.ErrUnauthorized)
}

// storeMessage is what the store said in err (its message, without the
// request id), or err's text when the store said nothing.
func storeMessage(err error) string {
	var se *store.Error
	if errors.As(err, &se) && se.Message != "" {
		return se.Message
	}
	return err.Error()
}

// last returns when the last failure happened, whether the store is down
// now, and the failure itself (nil if there has been none).
func (o *outage) last() (time.Time, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lastAt, o.down, o.lastErr
}

// inflight tracks the requests to the store that have not answered yet,
// so the watchdog can report a store that stops answering without waiting
// for a request to time out.
type inflight struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]*call // GUARDED_BY(mu)
}

type call struct {
	what     string
	start    time.Time
	allow    time.Duration // expected duration beyond StallAfter (a long poll's wait)
	reported bool
}

func newInflight() *inflight { return &inflight{calls: map[uint64]*call{}} }

// begin registers a request; the returned func ends it.
func (f *inflight) begin(what string, allow time.Duration) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := f.next
	f.calls[id] = &call{what: what, start: time.Now(), allow: allow}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.calls, id)
	}
}

// overdue returns the first request unanswered for longer than stall (plus
// its allowance) that was not reported yet, and marks it reported: one
// stuck request makes one report, however long it hangs.
func (f *inflight) overdue(now time.Time, stall time.Duration) (string, time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if age := now.Sub(c.start); !c.reported && age > stall+c.allow {
			c.reported = true
			return c.what, age, true
		}
	}
	return "", 0, false
}

// watchPeriod is how often the watchdog looks at the requests in flight.
const watchPeriod = 250 * time.Millisecond

// watch reports the store unreachable when a request has gone unanswered
// for StallAfter: a blackholed network keeps a request hanging for the
// client's whole timeout and retries, and nothing would be said meanwhile.
func (e *Engine) watch(ctx context.Context) {
	t := time.NewTicker(watchPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if what, age, ok := e.calls.overdue(time.Now(), e.opts.StallAfter); ok {
				e.outage.fail(fmt.Errorf("%w: no answer to %s for %s", store.ErrUnavailable, what, age.Round(time.Second)))
			}
		}
	}
}

// watchedStore registers every request with the watchdog.
type watchedStore struct {
	Store
	calls *inflight
}

func (s watchedStore) GetStore(ctx context.Context, storeID string) (*store.Store, error) {
	defer s.calls.begin("get store", 0)()
	return s.Store.GetStore(ctx, storeID)
}

func (s watchedStore) ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	defer s.calls.begin("list memories", 0)()
	return s.Store.ListMemories(ctx, storeID, opts)
}

func (s watchedStore) ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error) {
	defer s.calls.begin("list memory versions", 0)()
	return s.Store.ListVersions(ctx, storeID, opts)
}

func (s watchedStore) GetMemory(ctx context.Context, storeID, memoryID string) (*store.Memory, error) {
	defer s.calls.begin("get memory", 0)()
	return s.Store.GetMemory(ctx, storeID, memoryID)
}

func (s watchedStore) Changes(ctx context.Context, storeID string, after int64, limit int, wait time.Duration) (store.ChangePage, error) {
	defer s.calls.begin("the change feed", wait)()
	return s.Store.Changes(ctx, storeID, after, limit, wait)
}

func (s watchedStore) CreateMemory(ctx context.Context, storeID, path, content string) (*store.Memory, error) {
	defer s.calls.begin("create memory", 0)()
	return s.Store.CreateMemory(ctx, storeID, path, content)
}

func (s watchedStore) UpdateMemory(ctx context.Context, storeID, memoryID string, in store.UpdateMemoryInput) (*store.Memory, error) {
	defer s.calls.begin("update memory", 0)()
	return s.Store.UpdateMemory(ctx, storeID, memoryID, in)
}

func (s watchedStore) DeleteMemory(ctx context.Context, storeID, memoryID string, expectedSHA256 *string) error {
	defer s.calls.begin("delete memory", 0)()
	return s.Store.DeleteMemory(ctx, storeID, memoryID, expectedSHA256)
}

// localError is a failure on this host (the journal or the conflict log
// could not be written), not of the store: it must not read as an outage.
type localError struct{ error }

func (e localError) Unwrap() error { return e.error }

func isLocal(err error) bool {
	var l localError
	return errors.As(err, &l)
}

// retryDelay counts the failures in a row of one retrying loop and draws
// each wait from a capped exponential backoff with equal jitter: the n-th
// wait is spread over [d/2, d], d = min·2^(n-1) capped at max.
type retryDelay struct {
	policy  backoff.Policy
	attempt int
}

func newBackoff(min, max time.Duration) retryDelay {
	return retryDelay{policy: backoff.Policy{Min: min, Max: max, Jitter: backoff.Equal}}
}

// next returns the next wait and doubles the following one.
func (b *retryDelay) next() time.Duration {
	w := b.policy.Delay(b.attempt)
	b.attempt++
	return w
}

// reset starts again from min.
func (b *retryDelay) reset() { b.attempt = 0 }
