package syncqueue

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
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

// The race TestAtomicSavesDuringPasses found, step by step. The overlay
// starts fetching the memory for save 1's update before that update is
// answered, and applies it (an older write of ours, agreed by then) only
// once save 2's update has been sent, while save 3 already stands at the
// path. Save 2's update must still be known as ours when the feed brings
// it — not taken for a remote edit that wins over save 3 (which then went
// to the conflict log, and the mount showed save 2) — and save 3 goes up
// as the memory's next version.
func TestOlderWriteOfOursSeenDuringAnUpdate(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, map[string]string{"/a.md": "v0\n"})
	id := e.ids["/a.md"]
	save := func(i int) {
		tmp := fmt.Sprintf("/a.md.tmp%d", i)
		e.mustWrite(tmp, fmt.Sprintf("v%d\n", i))
		e.rename(tmp, "/a.md")
	}
	gates := map[string]chan struct{}{"answer 1": make(chan struct{}), "get": make(chan struct{}), "send 2": make(chan struct{})}
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
			wait(r, "send 2") // save 2: sent, not yet stored
			return false
		}
		return false
	})
	gen := func() uint64 {
		e.eng.syncMu.Lock()
		defer e.eng.syncMu.Unlock()
		return e.eng.ms.gen[id]
	}

	e.proxy.holdFeed()
	t.Cleanup(e.proxy.releaseFeed)
	save(1)
	pass1 := make(chan SyncResult, 1)
	go func() { pass1 <- e.eng.SyncNow(e.ctx(), true, true) }()
	eventually(t, "save 1 to reach the store", func() bool { return e.storeContents()["/a.md"] == "v1\n" })
	e.proxy.releaseFeed()
	eventually(t, "the overlay to fetch save 1", func() bool { return len(e.proxy.requests("get")) > 0 })
	open("answer 1")
	if res := <-pass1; res.Failed != 0 {
		t.Fatalf("pass 1: %+v", res)
	}
	save(2)
	pass2 := make(chan SyncResult, 1)
	go func() { pass2 <- e.eng.SyncNow(e.ctx(), true, true) }()
	eventually(t, "save 2's update to be sent", func() bool { return len(e.proxy.requests("update")) >= 2 })
	save(3)
	before := gen()
	open("get") // the overlay applies save 1 now
	eventually(t, "the overlay to apply save 1", func() bool { return gen() > before })
	open("send 2")
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
