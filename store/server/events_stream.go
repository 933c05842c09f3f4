package server

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// The event stream: GET /v1/sessions/{id}/events/stream answers
// text/event-stream, one frame per event appended after the request
// arrived, in the log's order:
//
//	event: agent.tool_use
//	data: {"type":"agent.tool_use","id":"sevt_…","processed_at":"…",…}
//
// (each frame ends with an empty line; the data is the event as listed,
// on one line). The headers are sent at once, before any event, because
// the SDK's tool runner opens the stream, waits for its headers, and
// only then lists the history: every event is in the listing or on the
// stream. Every StreamKeepAlive without an event, a ping frame
// (event: ping), which the SDK skips, keeps proxies from closing an idle
// connection and finds a client that is gone.
//
// The stream ends after it delivers session.status_terminated (archiving
// the session appends it); a stream opened on a terminated session sends
// that event and ends at once. It also ends when the server shuts down
// (BeginShutdown), when the database fails, and when one write waits
// StreamWriteTimeout for a client that stopped reading; the SDK
// reconnects, and lists the history again, in each case.

// streamBatch is how many events one read of the log takes.
const streamBatch = 100

// streamFunc is a streaming handler: it returns an error only before it
// has written anything (answered as the error envelope); once streaming,
// it ends the answer itself.
type streamFunc func(w http.ResponseWriter, r *http.Request, p *principal) error

// handleStream registers a streaming route.
func (s *Server) handleStream(pattern string, h streamFunc) {
	route := routeOf(pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := accessOf(r)
		rec.route = route
		if err := checkProtocol(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		rec.p = p
		if err := h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// catchUp sends the events of session id after cursor, a batch at a
// time, until none is left, and returns the new cursor; over says the
// stream is over: the session ended, the client is gone, or the log could
// not be read.
func (s *Server) catchUp(ctx context.Context, id string, cursor int64, send func([]byte) bool, log logrus.FieldLogger) (_ int64, over bool) {
	for {
		t, err := s.b.EventsAfter(ctx, id, cursor, streamBatch)
		if err != nil {
			if ctx.Err() == nil {
				log.WithError(err).Warn("session event stream: reading the log failed; ending the stream (the client reconnects)")
			}
			return cursor, true
		}
		var frames bytes.Buffer
		ended := false
		for _, e := range t.Events {
			frames.Write(eventFrame(e))
			cursor = e.Seq
			if e.Type == store.EventSessionStatusTerminated {
				ended = true
				break
			}
		}
		if frames.Len() > 0 && !send(frames.Bytes()) {
			return cursor, true
		}
		// A terminated session without its event in the log (archived
		// before memfs kept event logs) ends the stream too.
		if ended || (t.Terminated && cursor >= t.Head) {
			return cursor, true
		}
		if len(t.Events) < streamBatch {
			return cursor, false
		}
	}
}

// eventFrame is the SSE frame of one event.
func eventFrame(e store.Event) []byte {
	var b bytes.Buffer
	b.Grow(len(e.JSON) + len(e.Type) + 16)
	b.WriteString("event: ")
	b.WriteString(e.Type)
	b.WriteString("\ndata: ")
	b.Write(e.JSON)
	b.WriteString("\n\n")
	return b.Bytes()
}

var pingFrame = []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")

func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("session_id")
	if err := eventsAccess(p, id); err != nil {
		return err
	}
	ctx := r.Context()
	// Subscribe before reading the head, so that an append between the
	// two still wakes the loop below.
	woken, release := s.b.SubscribeEvents(id)
	defer func() { release() }()
	tail, err := s.b.EventsAfter(ctx, id, 0, 0)
	if err != nil {
		return err
	}
	var last []store.Event
	if tail.Terminated && tail.Head > 0 {
		// Nothing follows session.status_terminated: it is the last event.
		t, err := s.b.EventsAfter(ctx, id, tail.Head-1, 1)
		if err != nil {
			return err
		}
		last = t.Events
	}

	rc := http.NewResponseController(w)
	// The connection may serve another request after this one: leave it
	// without the deadline send sets.
	defer rc.SetWriteDeadline(time.Time{})
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(frame []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout)) // unsupported only off net/http's server
		if _, err := w.Write(frame); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(nil) {
		return nil
	}
	if tail.Terminated {
		for _, e := range last {
			if e.Type == store.EventSessionStatusTerminated {
				send(eventFrame(e))
			}
		}
		return nil
	}
	log := s.log.WithField("request_id", requestID(r))
	cursor := tail.Head
	keepAlive := time.NewTicker(s.opts.StreamKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-woken:
			release()
			woken, release = s.b.SubscribeEvents(id)
			var over bool
			if cursor, over = s.catchUp(ctx, id, cursor, send, log); over {
				return nil
			}
		case <-keepAlive.C:
			if !send(pingFrame) {
				return nil
			}
		case <-s.shutdown:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
