package syncqueue

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memfs/memfs/store/sqlstore"
)

// TestCapWaitsForRoom: new files over a store's memory cap are not sent
// again every pass. The first pass sends at most one request per upload
// slot; later passes send none until there is a sign of room. A delete seen
// in the feed lets the oldest waiting file go up, for two requests (the
// next is refused, which ends the try); without a sign, one request after
// the backoff; status says the store is at its cap and when it is tried
// again. It runs in a synctest bubble (bubble_test.go), where the backoff
// passes by time.Sleep.
func TestCapWaitsForRoom(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testCapWaitsForRoom)
}

func testCapWaitsForRoom(t *testing.T) {
	e := mgSetupBubble(t, map[string]string{"/1.md": "1", "/2.md": "2"}, sqlstore.Options{MaxMemoriesPerStore: 2})
	const slots = 4
	e.start(func(o *EngineOptions) { o.Concurrency = slots })
	const files = 20
	for i := range files {
		e.mustWrite(fmt.Sprintf("/new/%02d.md", i), fmt.Sprintf("new file %d\n", i))
	}
	creates := func() int { return len(e.proxy.requests("create")) }
	pass := func(what string, wantSent, wantUploaded int) {
		t.Helper()
		before := creates()
		res := e.sync(true, false)
		if sent := creates() - before; sent != wantSent || res.Uploaded != wantUploaded {
			t.Fatalf("%s: %d creates sent and %+v; want %d sent, %d uploaded", what, sent, res, wantSent, wantUploaded)
		}
	}
	before := creates()
	res := e.sync(true, false)
	if sent := creates() - before; sent == 0 || sent > slots || res.Failed != files || res.Left != files {
		t.Fatalf("the pass that finds the cap: %d creates sent and %+v; want 1 to %d sent, all %d failed and left", sent, res, slots, files)
	}
	for i := range 3 {
		pass(fmt.Sprintf("pass %d at the cap", i+2), 0, 0)
	}
	st := e.eng.Status()
	if !st.AtCap || st.CapRetryAt == nil || time.Until(*st.CapRetryAt) > capRetryMin || st.PendingUploads != files {
		t.Errorf("status at the cap: at_cap %v, retry at %v (now %v), %d uploads pending", st.AtCap, st.CapRetryAt, time.Now(), st.PendingUploads)
	}
	for _, c := range st.Pending {
		if c.Reason != ReasonCap {
			t.Errorf("%s waits for %q, want %q", c.Path, c.Reason, ReasonCap)
		}
	}

	// Another client deletes a memory: the oldest new file takes its place.
	e.remoteDelete("/1.md")
	e.caughtUp()
	pass("the pass after a delete in the feed", 2, 1)
	if c := e.storeContents()["/new/00.md"]; c != "new file 0\n" {
		t.Errorf("the oldest new file in the store: %q", c)
	}
	pass("the pass after that", 0, 0)

	// No sign: one try once the backoff is over, then none again.
	time.Sleep(capRetryMax)
	pass("the pass after the backoff", 1, 0)
	pass("the pass after that try", 0, 0)
	if st := e.eng.Status(); !st.AtCap || st.CapRetryAt == nil || !st.CapRetryAt.After(time.Now()) {
		t.Errorf("status after the try: at_cap %v, retry at %v (now %v)", st.AtCap, st.CapRetryAt, time.Now())
	}

	// Room for two.
	e.remoteDelete("/2.md")
	e.remoteDelete("/new/00.md")
	e.caughtUp()
	pass("the pass after two deletes", 3, 2)
	if n := len(e.warnings("memory cap")); n > slots+2 {
		t.Errorf("%d warnings about the cap, want one per file refused (at most %d)", n, slots+2)
	}
}

// The rules of capWait, one step at a time.
func TestCapWaitRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newCapWait()
	if !c.mayTry(now, false, false) || !c.retryTime().IsZero() {
		t.Fatal("a store not known full: creates go")
	}
	sent := c.epoch // a batch of creates sent together
	c.refused(now)
	first := c.retryTime()
	if c.mayTry(now, false, false) || first.IsZero() || first.Sub(now) > capRetryMin {
		t.Fatalf("after a refusal: may try %v, retry at %v", c.mayTry(now, false, false), first)
	}
	c.refused(now) // another of the batch
	if !c.retryTime().Equal(first) {
		t.Error("a second refusal of the same batch moved the backoff")
	}
	c.created(sent) // one of the batch the store took before it was full
	if !c.full {
		t.Error("a create sent before the refusal ended the wait")
	}
	if !c.mayTry(now, true, false) || !c.mayTry(now, false, true) || !c.mayTry(first, false, false) {
		t.Error("a delete of the pass, a final pass or the end of the backoff do not let creates try")
	}
	c.roomSeen()
	if !c.mayTry(now, false, false) {
		t.Error("a delete seen does not let creates try")
	}
	c.refused(now) // the try: still full
	if c.mayTry(now, false, false) || !c.retryTime().After(now) {
		t.Error("a refused try does not wait again")
	}
	c.created(c.epoch) // a try the store took
	if c.full || !c.mayTry(now, false, false) {
		t.Error("a create sent after the refusal and taken does not end the wait")
	}
}
