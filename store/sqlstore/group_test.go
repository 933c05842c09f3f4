package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// groupHarness runs groups whose run echoes each arg as its result and
// blocks until released, recording each group's args.
type groupHarness struct {
	g       groups[string]
	release chan struct{}
	mu      sync.Mutex
	batches [][]string // GUARDED_BY(mu)
}

func newGroupHarness() *groupHarness {
	h := &groupHarness{release: make(chan struct{})}
	h.g.run = func(ctx context.Context, key string, reqs []*groupReq[string]) {
		var args []string
		for _, r := range reqs {
			args = append(args, r.arg.(string))
		}
		h.mu.Lock()
		h.batches = append(h.batches, args)
		h.mu.Unlock()
		<-h.release
		for _, r := range reqs {
			r.res = key + ":" + r.arg.(string)
		}
	}
	return h
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *groupHarness) queued(key string) int {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if q := h.g.m[key]; q != nil {
		return len(q.pending)
	}
	return 0
}

func (h *groupHarness) groups() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.batches)
}

type groupResult struct {
	arg, res string
	err      error
}

func (h *groupHarness) call(ctx context.Context, key, arg string, out chan<- groupResult) {
	go func() {
		res, err := h.g.do(ctx, key, arg)
		out <- groupResult{arg, res, err}
	}()
}

// Calls that arrive while a group is in flight run together as the next
// group, at most maxGroup at a time, each getting its own result.
func TestGroupsBatchCallsWhileOneRuns(t *testing.T) {
	h := newGroupHarness()
	out := make(chan groupResult)
	h.call(t.Context(), "s", "first", out)
	waitFor(t, "the first group to start", func() bool { return len(h.groups()) == 1 })
	const more = maxGroup + 6
	for i := range more {
		h.call(t.Context(), "s", fmt.Sprint(i), out)
	}
	waitFor(t, "the calls to queue", func() bool { return h.queued("s") == more })
	close(h.release)
	for range more + 1 {
		r := <-out
		if r.err != nil || r.res != "s:"+r.arg {
			t.Fatalf("call %s: %q, %v; want %q", r.arg, r.res, r.err, "s:"+r.arg)
		}
	}
	var sizes []int
	for _, b := range h.groups() {
		sizes = append(sizes, len(b))
	}
	if !slices.Equal(sizes, []int{1, maxGroup, 6}) {
		t.Fatalf("group sizes %v, want [1 %d 6]", sizes, maxGroup)
	}
	if n := h.queued("s"); n != 0 || len(h.g.m) != 0 {
		t.Fatalf("after the last group: %d queued, %d queues kept", n, len(h.g.m))
	}
}

// Keys (stores) don't share groups: a call under another key runs at once.
func TestGroupsKeysIndependent(t *testing.T) {
	h := newGroupHarness()
	out := make(chan groupResult)
	h.call(t.Context(), "a", "x", out)
	h.call(t.Context(), "b", "y", out)
	waitFor(t, "both groups to start", func() bool { return len(h.groups()) == 2 })
	close(h.release)
	for range 2 {
		if r := <-out; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// A call whose context ends while queued leaves at once with the context's
// error and is not run; the rest of the queue still runs.
func TestGroupsCanceledWhileQueued(t *testing.T) {
	h := newGroupHarness()
	out := make(chan groupResult)
	h.call(t.Context(), "s", "first", out)
	waitFor(t, "the first group to start", func() bool { return len(h.groups()) == 1 })
	ctx, cancel := context.WithCancel(t.Context())
	h.call(ctx, "s", "gives-up", out)
	waitFor(t, "it to queue", func() bool { return h.queued("s") == 1 })
	h.call(t.Context(), "s", "stays", out)
	waitFor(t, "the second to queue", func() bool { return h.queued("s") == 2 })
	cancel()
	if r := <-out; r.arg != "gives-up" || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first to return: %+v, want gives-up with context.Canceled while the group runs", r)
	}
	close(h.release)
	for range 2 {
		if r := <-out; r.err != nil {
			t.Fatalf("call %s: %v", r.arg, r.err)
		}
	}
	want := [][]string{{"first"}, {"stays"}}
	if got := h.groups(); len(got) != 2 || !slices.Equal(got[1], want[1]) {
		t.Fatalf("groups %v, want %v", got, want)
	}
}

// One member giving up must not cancel the group's work for the others;
// it ends only when every member's context has.
func TestGroupContextEndsWithLastMember(t *testing.T) {
	ctxA, cancelA := context.WithCancel(t.Context())
	ctxB, cancelB := context.WithCancel(t.Context())
	defer cancelB()
	ctx, stop := groupContext([]*groupReq[string]{{ctx: ctxA}, {ctx: ctxB}})
	defer stop()
	cancelA()
	select {
	case <-ctx.Done():
		t.Fatal("group context ended when one of two members gave up")
	default:
	}
	cancelB()
	waitFor(t, "the group context to end", func() bool { return ctx.Err() != nil })
}
