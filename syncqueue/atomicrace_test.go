package syncqueue

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Editors save atomically (write a temporary file, rename it over the
// target) at any moment, also while a pass uploads: here one goroutine
// saves /a.md that way again and again while another runs passes back to
// back. At the end, after a settling pass, the store must hold exactly
// the last save at /a.md, under its first memory id, with no memory left
// at a temporary path, nothing pending and no conflict (nobody else
// writes).
func TestAtomicSavesDuringPasses(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, map[string]string{"/a.md": "v0\n"})
	id := e.ids["/a.md"]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			e.eng.SyncNow(e.ctx(), true, true)
		}
	}()
	const saves = 400
	last := ""
	for i := 1; i <= saves; i++ {
		tmp := fmt.Sprintf("/a.md.tmp%d", i)
		last = fmt.Sprintf("v%d\n", i)
		e.mustWrite(tmp, last)
		e.rename(tmp, "/a.md")
	}
	close(stop)
	wg.Wait()
	for range 3 {
		e.sync(true, true)
	}
	defer func() {
		if t.Failed() {
			e.dumpLog()
		}
	}()
	e.wantLocal("/a.md", last)
	e.wantStore(map[string]string{"/a.md": last})
	if got := e.storeIDs()["/a.md"]; got != id {
		t.Errorf("/a.md is memory %s, want %s (atomic saves keep the id)", got, id)
	}
	e.noPending()
	e.noConflicts()
}

// dumpLog prints what the engine logged, for a failed test.
func (e *mgEnv) dumpLog() {
	for _, en := range e.hook.AllEntries() {
		e.t.Logf("%s %s %v", en.Level, en.Message, en.Data)
	}
}

// The race TestAtomicSavesDuringPasses once found, step by step, and the
// busy rule that keeps it from arising (busy.go): a memory with a request
// in flight gets no other decision. The feed shows save 1's update before
// its answer: the overlay sets the change aside — it fetches nothing
// while the update is out — and merges it again once the answer is
// carried out. That fetch is held while save 2 is made and its pass
// begins: save 2's update waits for the fetch's answer (no update is sent
// meanwhile), and save 3 stands at the path when it is applied. Save 2
// must go up as ours, not be taken for a remote edit that wins over save
// 3 (which then went to the conflict log, and the mount showed save 2),
// and save 3 goes up as the memory's next version.
func TestOlderWriteOfOursSeenDuringAnUpdate(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, map[string]string{"/a.md": "v0\n"})
	id := e.ids["/a.md"]
	save := func(i int) {
		tmp := fmt.Sprintf("/a.md.tmp%d", i)
		e.mustWrite(tmp, fmt.Sprintf("v%d\n", i))
		e.rename(tmp, "/a.md")
	}
	gates := map[string]chan struct{}{"answer 1": make(chan struct{}), "get": make(chan struct{})}
	var mu sync.Mutex
	open := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		if g := gates[name]; g != nil {
			close(g)
			gates[name] = nil
		}
	}
	t.Cleanup(func() {
		for name := range gates {
			open(name)
		}
	})
	wait := func(r *http.Request, name string) {
		mu.Lock()
		g := gates[name]
		mu.Unlock()
		if g != nil {
			select {
			case <-g:
			case <-r.Context().Done():
			}
		}
	}
	updates := 0
	e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		switch kind {
		case "get": // the store's state now; the answer waits
			rec := p.forward(r, body)
			wait(r, "get")
			mgCopy(w, rec)
			return true
		case "update":
			mu.Lock()
			updates++
			n := updates
			mu.Unlock()
			if n == 1 { // save 1: stored, the answer waits
				rec := p.forward(r, body)
				wait(r, "answer 1")
				mgCopy(w, rec)
				return true
			}
		}
		return false
	})

	e.proxy.holdFeed()
	t.Cleanup(e.proxy.releaseFeed)
	save(1)
	pass1 := make(chan SyncResult, 1)
	go func() { pass1 <- e.eng.SyncNow(e.ctx(), true, true) }()
	eventually(t, "save 1 to reach the store", func() bool { return e.storeContents()["/a.md"] == "v1\n" })
	e.proxy.releaseFeed()
	e.caughtUp() // the feed's change of the memory is set aside
	if n := len(e.proxy.requests("get")); n != 0 {
		t.Fatalf("the overlay fetched the memory %d time(s) while its update was in flight", n)
	}
	open("answer 1")
	if res := <-pass1; res.Failed != 0 {
		t.Fatalf("pass 1: %+v", res)
	}
	eventually(t, "the set-aside change to be fetched", func() bool { return len(e.proxy.requests("get")) > 0 })
	save(2)
	pass2 := make(chan SyncResult, 1)
	go func() { pass2 <- e.eng.SyncNow(e.ctx(), true, true) }()
	time.Sleep(200 * time.Millisecond)
	if n := len(e.proxy.requests("update")); n != 1 {
		t.Fatalf("%d updates sent while a fetch of the memory was in flight, want 1 (save 1's)", n)
	}
	save(3)
	open("get") // the overlay applies save 1 now; save 2's update follows
	if res := <-pass2; res.Failed != 0 {
		t.Fatalf("pass 2: %+v", res)
	}
	e.caughtUp() // save 2 comes back
	e.proxy.setFault(nil)
	e.sync(true, true)
	e.wantLocal("/a.md", "v3\n")
	e.wantStore(map[string]string{"/a.md": "v3\n"})
	if got := e.storeIDs()["/a.md"]; got != id {
		t.Errorf("/a.md is memory %s, want %s", got, id)
	}
	e.noPending()
	e.noConflicts()
}
