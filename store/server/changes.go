package server

import (
	"net/http"
	"time"
)

// MaxWaitMS is the longest long poll a client may ask for.
const MaxWaitMS = 30000

// changes serves the change feed with an optional long poll: when nothing
// is newer than after, it waits (up to wait_ms) for a commit to the store,
// in this process or, on PostgreSQL, in any process sharing the database.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	after := q.intIn("after", 0, 0, 1<<62)
	limit := int(q.intIn("limit", 100, 1, 1000))
	wait := time.Duration(q.intIn("wait_ms", 0, 0, MaxWaitMS)) * time.Millisecond
	if q.err != nil {
		return 0, nil, q.err
	}
	wait = min(wait, s.opts.MaxWait)
	var timeout <-chan time.Time
	if wait > 0 && after > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		// Subscribe before reading, so a commit between the read and the
		// wait still wakes us.
		woken, release := s.b.Subscribe(storeID)
		page, err := s.b.Changes(r.Context(), storeID, after, limit)
		if err != nil || len(page.Data) > 0 || timeout == nil {
			release()
			return http.StatusOK, page, err
		}
		select {
		case <-woken:
			release()
		case <-timeout:
			release()
			return http.StatusOK, page, nil
		case <-s.shutdown:
			release()
			return http.StatusOK, page, nil
		case <-r.Context().Done():
			release()
			return 0, nil, r.Context().Err()
		}
	}
}
