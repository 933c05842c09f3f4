package worker

import (
	"context"
	"testing"
	"time"
)

// TestStopBudget: the steps of a teardown end in order before its
// deadline, and the last steps get their least time even once it passed.
func TestStopBudget(t *testing.T) {
	if reserveAfterSync <= reserveAfterUnmount || TeardownTimeout+minStopRequest >= StopTimeout {
		t.Fatalf("the shares do not fit: sync reserve %s, unmount reserve %s, teardown %s + stop request %s vs stop timeout %s",
			reserveAfterSync, reserveAfterUnmount, TeardownTimeout, minStopRequest, StopTimeout)
	}
	now := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(TeardownTimeout))
	defer cancel()
	sctx, c1 := endingBefore(ctx, reserveAfterSync)
	defer c1()
	uctx, c2 := endingBefore(ctx, reserveAfterUnmount)
	defer c2()
	sd, _ := sctx.Deadline()
	ud, _ := uctx.Deadline()
	if want := now.Add(TeardownTimeout - reserveAfterSync); !sd.Equal(want) {
		t.Errorf("the final sync ends at %s, want %s", sd, want)
	}
	if !sd.Before(ud) {
		t.Errorf("the final sync ends at %s, not before the unmount's end %s", sd, ud)
	}
	nctx, c3 := endingBefore(context.Background(), time.Second)
	defer c3()
	if _, ok := nctx.Deadline(); ok {
		t.Error("endingBefore gave a deadline to a context that had none")
	}

	// The last steps: after most, at the deadline if sooner, never less
	// than least from now, and not cancelled with ctx.
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	cancelled, cancelNow := context.WithDeadline(context.Background(), now.Add(TeardownTimeout))
	cancelNow()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		end  func(before, after time.Time) (lo, hi time.Time)
	}{
		{"no deadline", context.Background(), func(b, a time.Time) (time.Time, time.Time) { return b.Add(time.Minute), a.Add(time.Minute) }},
		{"deadline sooner than most", ctx, func(time.Time, time.Time) (time.Time, time.Time) { d, _ := ctx.Deadline(); return d, d }},
		{"deadline passed", past, func(b, a time.Time) (time.Time, time.Time) { return b.Add(minStopRequest), a.Add(minStopRequest) }},
		{"cancelled", cancelled, func(time.Time, time.Time) (time.Time, time.Time) { d, _ := ctx.Deadline(); return d, d }},
	} {
		before := time.Now()
		lctx, c := lastStep(tc.ctx, minStopRequest, time.Minute)
		after := time.Now()
		d, ok := lctx.Deadline()
		if lo, hi := tc.end(before, after); !ok || d.Before(lo) || d.After(hi) {
			t.Errorf("%s: the last step ends at %s, want between %s and %s", tc.name, d, lo, hi)
		}
		if lctx.Err() != nil {
			t.Errorf("%s: the last step's context has already ended: %v", tc.name, lctx.Err())
		}
		c()
	}
}
