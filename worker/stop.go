package worker

import (
	"context"
	"time"
)

// How long a stop may take. docs/operating.md ("Deploying", Stop
// timeouts) documents a stop timeout of at least StopTimeout for a worker
// (systemd TimeoutStopSec, docker --stop-timeout): a session's teardown must end
// within it, whatever the mounts, the store or the agent's shell do. So a
// teardown gets one deadline, TeardownTimeout after it starts, and every
// step of it a share, in order:
//
//	stop the agent's tools      until the deadline
//	final sync                  until reserveAfterSync before it (≤ syncqueue.FinalSyncTimeout)
//	unmount (EBUSY retries)     until reserveAfterUnmount before it, then a lazy detach
//	close the journal           until the deadline, but at least minJournalClose
//	stop the work item          until the deadline, but at least minStopRequest
//
// A step that reaches its end gives up (the final sync leaves the rest in
// the journal, the unmount detaches lazily) and the next one runs. The
// worst case, TeardownTimeout + minStopRequest, leaves StopTimeout's last
// seconds to the process's exit.
const (
	// StopTimeout is the least stop timeout docs/operating.md documents.
	StopTimeout = 35 * time.Second
	// TeardownTimeout bounds a session's teardown, from its start.
	TeardownTimeout = 30 * time.Second

	reserveAfterSync    = 4 * time.Second
	reserveAfterUnmount = 2 * time.Second
	minJournalClose     = time.Second
	minStopRequest      = 2 * time.Second
)

// endingBefore is ctx ending reserve before ctx's deadline (just ctx when
// it has none).
func endingBefore(ctx context.Context, reserve time.Duration) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, d.Add(-reserve))
	}
	return context.WithCancel(ctx)
}

// lastStep is a context for a step that must run even when ctx has ended
// (closing the journal, telling the API the item stopped): not cancelled
// with ctx, it ends after most, or at ctx's deadline if that comes
// first, but never sooner than least from now.
func lastStep(ctx context.Context, least, most time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(most)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	if floor := time.Now().Add(least); end.Before(floor) {
		end = floor
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}
