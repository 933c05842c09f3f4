package syncqueue

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The busy rule (busy.go): a fetch of a file not fetched yet is answered
// with the memory as it was when asked, and a remote edit the feed brings
// while that answer is on its way waits for it in the memory's queue —
// the feed's cursor does not pass it — and is merged after: the mount
// ends on the edit, never on the older answer arriving last.
func TestRemoteChangeWaitsForAFetchInFlight(t *testing.T) {
	t.Parallel()
	e := mgSetup(t, lazyFiles)
	answer := make(chan struct{})
	var held atomic.Bool
	e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		switch {
		case kind == "list" && strings.Contains(r.URL.RawQuery, "view=full"):
			w.WriteHeader(http.StatusServiceUnavailable) // the background content fetch waits
			return true
		case kind == "get" && held.CompareAndSwap(false, true):
			rec := p.forward(r, body) // the store's state when asked
			select {
			case <-answer:
			case <-r.Context().Done():
			}
			mgCopy(w, rec)
			return true
		}
		return false
	})
	closeAnswer := func() {
		select {
		case <-answer:
		default:
			close(answer)
		}
	}
	t.Cleanup(closeAnswer)
	e.start(nil)
	a, err := e.lookup("/a.md")
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := e.tree.Read(a.Ino, make([]byte, 64), 0)
		read <- err
	}()
	eventually(t, "the read's fetch to be asked", func() bool { return len(e.proxy.requests("get")) > 0 })
	e.remotePut("/a.md", "alpha, edited while a fetch was answered\n")
	head, err := e.remote.Changes(e.ctx(), e.storeID, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if c := e.eng.Status().FeedCursor; c >= head.NextCursor {
		t.Fatalf("the feed's cursor reached %d (head %d) while the edit waited for the fetch in flight", c, head.NextCursor)
	}
	closeAnswer()
	if err := <-read; err != nil {
		t.Fatalf("the read: %v", err)
	}
	e.caughtUp()
	e.wantLocal("/a.md", "alpha, edited while a fetch was answered\n")
	e.noConflicts()
	e.noPending()
}
