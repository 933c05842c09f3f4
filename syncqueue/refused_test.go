package syncqueue

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/memfs/memfs/store/sqlstore"
)

// A store that answers the change feed with 401 (a token revoked while
// the mount runs) is reachable: the log says "refused by the store" with
// its message, once however many polls fail, never "store unreachable";
// status gives the message and does not call the store unreachable.
// (The proxy answers 401 as the server would: a real token can't be
// revoked in the middle of a test.) It runs in a synctest bubble
// (bubble_test.go): the overlay's backoff passes in virtual time.
func TestFeedRefusedIsNotAnOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testFeedRefusedIsNotAnOutage)
}

func testFeedRefusedIsNotAnOutage(t *testing.T) {
	e := mgSetupBubble(t, mgFiles, sqlstore.Options{})
	e.start(nil)
	const msg = "the session of this token has ended"
	n := e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		if kind != "changes" {
			return false
		}
		mgWriteError(w, http.StatusUnauthorized, "authentication_error", msg)
		return true
	})
	e.proxy.releaseFeed()
	e.proxy.waitNewPoll(t, n)
	eventually(t, "the refusal in status", func() bool { return e.eng.Status().Refused == msg })
	// More polls fail meanwhile (the overlay's backoff starts at a second).
	n = len(e.proxy.requests("changes"))
	eventually(t, "two more polls", func() bool { return len(e.proxy.requests("changes")) >= n+2 })
	if st := e.eng.Status(); st.Unreachable {
		t.Errorf("status calls a store that answers 401 unreachable: %+v", st)
	}
	if w := e.warnings("refused by the store: " + msg); len(w) != 1 {
		t.Errorf("%d warnings say the store refused, want 1", len(w))
	}
	if w := e.warnings("unreachable"); len(w) != 0 {
		t.Errorf("the log calls the store unreachable: %s", w[0].Message)
	}
	e.proxy.setFault(nil)
	eventually(t, "the refusal to end once the feed answers", func() bool { return e.eng.Status().Refused == "" })
}
