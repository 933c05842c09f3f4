package storetest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// Wake one, not all: an enqueue wakes ONE blocked work poll (per process),
// never losing a wake, while the change feed still wakes every waiter.
// These tests hold subscriptions the way store/server's poll loop does,
// without polling, so the only wakes are the enqueues' own.

// wakeQuiet is how long subscribers that must NOT be woken are watched:
// a negative check needs a bound, and a wake lands within milliseconds.
const wakeQuiet = 200 * time.Millisecond

// queueSubs subscribes n waiters to env's queue, oldest first, and
// returns their channels and release functions. A waiter still
// subscribed after receiving its wake waits for the next one (as the
// oldest without one), so a test releases it as a woken poll does.
func queueSubs(t *testing.T, b store.Backend, envID string, n int) ([]<-chan struct{}, []func()) {
	t.Helper()
	chs := make([]<-chan struct{}, n)
	releases := make([]func(), n)
	for i := range chs {
		chs[i], releases[i] = b.SubscribeQueue(envID)
		t.Cleanup(releases[i])
	}
	return chs, releases
}

// receiveWakes receives on chs until want of them have received (bounded
// by waitBound), then for wakeQuiet more, and returns how many received.
// A waiter that received is released at once, as a woken poll releases
// its subscription (still subscribed, it would take the next wake).
func receiveWakes(t *testing.T, chs []<-chan struct{}, releases []func(), want int) int {
	t.Helper()
	got := 0
	woken := make([]bool, len(chs))
	bound := time.After(waitBound)
	for got < want && receiveRelease(chs, releases, woken, bound) {
		got++
	}
	if got < want {
		t.Fatalf("%d of %d subscribers woken within %v, want %d", got, len(chs), waitBound, want)
	}
	quiet := time.After(wakeQuiet)
	for receiveRelease(chs, releases, woken, quiet) {
		got++
	}
	return got
}

// receiveRelease is receiveOne, then releases the waiter that received.
func receiveRelease(chs []<-chan struct{}, releases []func(), woken []bool, until <-chan time.Time) bool {
	i := receiveOne(chs, woken, until)
	if i >= 0 {
		releases[i]()
	}
	return i >= 0
}

// receiveOne receives on any channel of chs not yet marked in woken,
// marks it and returns its index; -1 once until fires first.
func receiveOne(chs []<-chan struct{}, woken []bool, until <-chan time.Time) int {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(until)}}
	idx := []int{-1}
	for i, ch := range chs {
		if !woken[i] {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			idx = append(idx, i)
		}
	}
	chosen, _, _ := reflect.Select(cases)
	if chosen > 0 {
		woken[idx[chosen]] = true
	}
	return idx[chosen]
}

// testWorkWakeOne: one enqueue wakes exactly one of three blocked
// subscribers, two enqueues wake two.
func testWorkWakeOne(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")

	chs, releases := queueSubs(t, b, env.ID, 3)
	newSession(t, b, env.ID)
	if n := receiveWakes(t, chs, releases, 1); n != 1 {
		t.Errorf("one session create woke %d of 3 blocked subscribers, want 1", n)
	}
	for _, release := range releases {
		release()
	}

	chs, releases = queueSubs(t, b, env.ID, 3)
	newSession(t, b, env.ID)
	_, err := b.EnqueueHealthcheck(t.Context(), env.ID)
	ok(t, err, "EnqueueHealthcheck")
	if n := receiveWakes(t, chs, releases, 2); n != 2 {
		t.Errorf("two enqueues woke %d of 3 blocked subscribers, want 2", n)
	}
}

// testWorkWakePassedOn: a subscriber handed the wake that releases
// without receiving it (its block ran out, its request ended) passes it
// to another subscriber: the wake is not lost.
func testWorkWakePassedOn(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	chs, releases := queueSubs(t, b, env.ID, 3)
	newSession(t, b, env.ID)
	// The channel is buffered: len shows the wake delivered, not received.
	holder := -1
	deadline := time.Now().Add(waitBound)
	for holder < 0 && time.Now().Before(deadline) {
		for i, ch := range chs {
			if len(ch) > 0 {
				holder = i
			}
		}
		time.Sleep(time.Millisecond)
	}
	if holder < 0 {
		t.Fatalf("no subscriber was handed the wake within %v", waitBound)
	}
	releases[holder]()
	rest := slices.Delete(slices.Clone(chs), holder, holder+1)
	restReleases := slices.Delete(slices.Clone(releases), holder, holder+1)
	if n := receiveWakes(t, rest, restReleases, 1); n != 1 {
		t.Errorf("the released wake reached %d of the 2 other subscribers, want 1", n)
	}
}

// testWorkWakeHandedOn: a woken poll whose claim takes another item than
// the one it was woken for (here one claimed before and offered again)
// hands the wake on, so the new item is not left for a block to run out.
func testWorkWakeHandedOn(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	first := newSession(t, b, env.ID)
	if w := pollOnce(t, b, env.ID, "w0"); w == nil || w.Data.ID != first.ID {
		t.Fatalf("first poll claimed %+v, want %s's item", w, first.ID)
	}
	chs, releases := queueSubs(t, b, env.ID, 2)
	newSession(t, b, env.ID)
	woken := make([]bool, len(chs))
	if !receiveRelease(chs, releases, woken, time.After(waitBound)) {
		t.Fatalf("the session create woke no subscriber within %v", waitBound)
	}
	// Reclaiming at once offers the unacknowledged first item again, and
	// it is the oldest: the woken poll claims it, not the new one.
	w, err := b.Poll(t.Context(), store.PollInput{EnvironmentID: env.ID, WorkerID: "w1"})
	ok(t, err, "Poll")
	if w == nil || w.Data.ID != first.ID {
		t.Fatalf("woken poll claimed %+v, want the reclaimed %s's item", w, first.ID)
	}
	if receiveOne(chs, woken, time.After(waitBound)) < 0 {
		t.Fatalf("the claim of another item handed the wake to no subscriber within %v", waitBound)
	}
}

// testFeedWakesAll: the change feed stays a broadcast: one commit wakes
// every waiter of the store.
func testFeedWakesAll(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	chs := make([]<-chan struct{}, 3)
	for i := range chs {
		var release func()
		chs[i], release = b.Subscribe(s.ID)
		t.Cleanup(release)
	}
	create(t, b, s.ID, "/a", "1")
	for i, ch := range chs {
		waitClosed(t, ch, "change feed waiter "+string(rune('1'+i)))
	}
}
