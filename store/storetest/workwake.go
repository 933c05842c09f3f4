package storetest

import (
	"reflect"
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
// returns them with a function releasing them all. A waiter still
// subscribed after receiving its wake waits for the next one, so a test
// releases one group before enqueuing for the next.
func queueSubs(t *testing.T, b store.Backend, envID string, n int) ([]<-chan struct{}, func()) {
	t.Helper()
	chs := make([]<-chan struct{}, n)
	releases := make([]func(), n)
	for i := range chs {
		chs[i], releases[i] = b.SubscribeQueue(envID)
		t.Cleanup(releases[i])
	}
	return chs, func() {
		for _, release := range releases {
			release()
		}
	}
}

// receiveWakes receives on chs until want of them have received (bounded
// by waitBound), then for wakeQuiet more, and returns how many received.
func receiveWakes(t *testing.T, chs []<-chan struct{}, want int) int {
	t.Helper()
	got := 0
	woken := make([]bool, len(chs))
	bound := time.After(waitBound)
	for got < want && receiveOne(chs, woken, bound) {
		got++
	}
	if got < want {
		t.Fatalf("%d of %d subscribers woken within %v, want %d", got, len(chs), waitBound, want)
	}
	quiet := time.After(wakeQuiet)
	for receiveOne(chs, woken, quiet) {
		got++
	}
	return got
}

// receiveOne receives on any channel of chs not yet marked in woken, and
// marks it; false once until fires first.
func receiveOne(chs []<-chan struct{}, woken []bool, until <-chan time.Time) bool {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(until)}}
	idx := []int{-1}
	for i, ch := range chs {
		if !woken[i] {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			idx = append(idx, i)
		}
	}
	chosen, _, _ := reflect.Select(cases)
	if chosen == 0 {
		return false
	}
	woken[idx[chosen]] = true
	return true
}

// testWorkWakeOne: one enqueue wakes exactly one of three blocked
// subscribers, two enqueues wake two.
func testWorkWakeOne(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")

	chs, release := queueSubs(t, b, env.ID, 3)
	newSession(t, b, env.ID)
	if n := receiveWakes(t, chs, 1); n != 1 {
		t.Errorf("one session create woke %d of 3 blocked subscribers, want 1", n)
	}
	release()

	chs, _ = queueSubs(t, b, env.ID, 3)
	newSession(t, b, env.ID)
	_, err := b.EnqueueHealthcheck(t.Context(), env.ID)
	ok(t, err, "EnqueueHealthcheck")
	if n := receiveWakes(t, chs, 2); n != 2 {
		t.Errorf("two enqueues woke %d of 3 blocked subscribers, want 2", n)
	}
}

// testWorkWakePassedOn: a subscriber handed the wake that releases
// without receiving it (its block ran out, its request ended) passes it
// to another subscriber: the wake is not lost.
func testWorkWakePassedOn(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	chs := make([]<-chan struct{}, 3)
	releases := make([]func(), 3)
	for i := range chs {
		chs[i], releases[i] = b.SubscribeQueue(env.ID)
		t.Cleanup(releases[i])
	}
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
	rest := append(append([]<-chan struct{}{}, chs[:holder]...), chs[holder+1:]...)
	if n := receiveWakes(t, rest, 1); n != 1 {
		t.Errorf("the released wake reached %d of the 2 other subscribers, want 1", n)
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
