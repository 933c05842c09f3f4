package syncqueue

import (
	"context"
	"sync/atomic"
	"time"
)

// When the flusher runs a pass (docs/sync.md, "Passes"):
//
//   - every Interval, on a fixed cadence: the longest a closed change
//     waits, and the only passes that send deletes (their 30 s +
//     confirming-pass rule and the whole-store guard are judged there,
//     as before the quiet trigger existed);
//   - with Quiet set, also once writes are pending and no file has been
//     closed for Quiet: an edit goes up about Quiet after it, and a burst
//     of closes, each less than Quiet after the last, costs one pass. Its
//     worst case is one pass per Quiet while someone keeps editing with
//     pauses just over Quiet; a file closed more often than every Quiet
//     (a log appended every 500 ms) never lets the period pass, and goes
//     up at the interval;
//   - at once for a journal a previous run left behind; on SyncNow
//     (SIGUSR1); and the final sync at Finish.
//
// A quiet pass only uploads writes, creates and moves. After a pass that
// could not reach the store for some change (or while the store is known
// to be unreachable), quiet passes wait until a pass gets through again,
// and the interval's cadence restarts from the failed quiet pass: a failing
// store gets at most one attempt per interval, never one per quiet period.
//
// The schedule runs on real timers and reads time.Now, as the rest of the
// engine does: tests that need time to pass run the engine in a
// testing/synctest bubble.

// Pass triggers: what started a pass (PassInfo.Trigger, and the trigger
// field of the "sync pass" log line).
const (
	TriggerInterval = "interval" // the interval's cadence
	TriggerQuiet    = "quiet"    // a quiet period after the last close
	TriggerReplay   = "replay"   // a journal left behind, at Start
	TriggerNow      = "now"      // SyncNow (SIGUSR1, tests)
	TriggerFinal    = "final"    // the final sync of Finish
)

// MinQuiet is the shortest quiet period: shorter is hardly quiet (the
// journal's group commit alone takes up to 100 ms), and it bounds the
// passes someone editing can cause at ten a second.
const MinQuiet = 100 * time.Millisecond

// QuietValid is the one rule for a quiet period with sync interval
// interval: off (0), or at least MinQuiet and shorter than the interval.
// The engine, the worker's Config and the command line each check it,
// each wording the refusal in its own terms.
func QuietValid(quiet, interval time.Duration) bool {
	return quiet == 0 || (quiet >= MinQuiet && quiet < interval)
}

// DefaultQuiet is memfs's default quiet period (--memory-sync-quiet).
// The package's default is off (EngineOptions.Quiet 0).
const DefaultQuiet = time.Second

// closeSignal tells the flusher's loop of each journaled write without a
// lock: the filesystem journals a close under its tree lock, on a FUSE
// request's goroutine, and only stores the time in an atomic and makes a
// non-blocking send on a one-slot channel (a full slot makes it a no-op).
// The loop wakes on the first of a burst and reads the time when its
// timer fires, so a burst wakes it about once per quiet period.
type closeSignal struct {
	base time.Time    // the origin of last, with its monotonic clock reading
	last atomic.Int64 // when the latest write was journaled, as time since base
	c    chan struct{}
}

func newCloseSignal() *closeSignal {
	return &closeSignal{base: time.Now(), c: make(chan struct{}, 1)}
}

// note records a write journaled now. Safe on a nil signal (quiet off).
func (s *closeSignal) note() {
	if s == nil {
		return
	}
	s.last.Store(int64(time.Since(s.base)))
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// since is how long ago the latest write was journaled.
func (s *closeSignal) since() time.Duration {
	return time.Since(s.base) - time.Duration(s.last.Load())
}

// drain takes a pending wake-up: the pass about to start covers every
// write journaled until now.
func (s *closeSignal) drain() {
	select {
	case <-s.c:
	default:
	}
}

// unjournaledRetry is how often files whose close the journal could not
// take (a full state dir) are tried again: "journaled as soon as there is
// room", without waiting for a pass.
const unjournaledRetry = time.Second

// flushLoop runs the passes of the schedule above until ctx ends, and
// retries unjournaled closes every second.
func (e *Engine) flushLoop(ctx context.Context) {
	tick := time.NewTicker(e.opts.Interval)
	defer tick.Stop()
	retry := time.NewTicker(unjournaledRetry)
	defer retry.Stop()
	quiet := time.NewTimer(time.Hour)
	quiet.Stop() // armed by the first close
	defer quiet.Stop()
	var closes <-chan struct{} // nil while the timer is armed, or with quiet off
	if e.closes != nil {
		closes = e.closes.c
	}
	if e.replayed > 0 {
		// A journal left behind goes up at once, not an interval later.
		e.runPass(ctx, passOptions{deletes: true, trigger: TriggerReplay})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			e.retryUnjournaled() // status shows what is left
		case <-tick.C:
			e.runPass(ctx, passOptions{deletes: true, trigger: TriggerInterval})
		case <-closes:
			// Armed: later closes only move the time the timer reads.
			closes = nil
			quiet.Reset(e.opts.Quiet)
		case <-quiet.C:
			if left := e.opts.Quiet - e.closes.since(); left > 0 {
				quiet.Reset(left) // closed again meanwhile: not quiet yet
				continue
			}
			e.closes.drain()
			closes = e.closes.c
			if e.quietPass(ctx) {
				// Back off to the interval: the next attempt is a full
				// interval after this one.
				tick.Reset(e.opts.Interval)
			}
		}
	}
}

// quietPass runs the pass of a quiet period, unless the store is failing
// (the interval's passes retry then) or no write is pending (a pass took
// it meanwhile, or only deletes wait: they go at the interval): the owner
// judges that as the pass would begin (passWanted). It reports whether it
// ran and could not reach the store for some change.
func (e *Engine) quietPass(ctx context.Context) (failed bool) {
	return e.askPass(ctx, passOptions{trigger: TriggerQuiet}).unreached
}
