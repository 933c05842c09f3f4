package server

// The access log: one line per request, written when its answer is done,
// through Options.Log (so memfs serve's --log-format json makes it JSON).
//
//	level=info msg=request method=GET route="/v1/memory_stores/{store_id}/memories/{memory_id}"
//	  status=200 duration_ms=1.234 bytes=512 actor=session actor_id=sesn_... remote=10.0.0.7:51234
//	  request_id=req_...
//
// Fields:
//   - route is the pattern the request matched, never the raw path (which
//     carries ids) nor the query (which a client could fill with anything,
//     a key included); "/" is the catch-all that answers 404, "-" a
//     request net/http answered itself (a redirect to a clean path).
//   - actor is who the credential was: admin, environment, session, or
//     none when it was missing or refused; actor_id is the key's id for
//     admin and environment keys and the session id for a session token.
//     The credential itself is never logged, nor any header.
//   - duration_ms is from the request's arrival to the end of its answer;
//     bytes is the size of the answer's body.
//
// Level: info, except a long poll (the work queue's poll, the change
// feed) that answers 200 with nothing new, which is debug: idle workers
// and mounts poll all the time and those lines say nothing. A long poll
// that finds work or changes, or fails, is logged at info like any
// request; a refused credential always is.
//
// Repeated 401s from one address get a warning too (authstorm.go), and
// the same request is counted for Prometheus by route (metrics.go).

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// accessRecord is what the handlers learn about a request for its access
// line: the route they serve, the authenticated caller, whether a long
// poll came back empty. ServeHTTP puts one in the request's context; only
// that request's goroutine touches it.
type accessRecord struct {
	route    string
	p        *principal
	longPoll bool // the route is a long poll
	empty    bool // ... and it answered with nothing new
}

const accessRecordKey ctxKey = 1

// accessOf returns the request's record (a throwaway one for a request
// that did not come through ServeHTTP).
func accessOf(r *http.Request) *accessRecord {
	if rec, ok := r.Context().Value(accessRecordKey).(*accessRecord); ok {
		return rec
	}
	return &accessRecord{}
}

func withAccessRecord(ctx context.Context, rec *accessRecord) context.Context {
	return context.WithValue(ctx, accessRecordKey, rec)
}

// routeOf is the path part of a mux pattern: "GET /v1/x/{id}" → "/v1/x/{id}".
func routeOf(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// emptyAnswer reports whether a long poll's answer holds nothing new: no
// work item, or a change page without changes.
func emptyAnswer(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case *store.Work:
		return v == nil
	case store.ChangePage:
		return len(v.Data) == 0
	}
	return false
}

// answerWriter records the status and body size of an answer.
type answerWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *answerWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logAccess writes the access line of a finished request, and feeds a 401
// to the storm detector.
func (s *Server) logAccess(r *http.Request, rec *accessRecord, w *answerWriter, took time.Duration) {
	status := w.status
	if status == 0 {
		status = http.StatusOK // what net/http sends for a handler that wrote nothing
	}
	actor, actorID := "none", ""
	if p := rec.p; p != nil {
		actor, actorID = p.kind, p.keyID
		if p.kind == store.KeyKindSession {
			actorID = p.sessionID
		}
	}
	route := rec.route
	if route == "" {
		route = "-"
	}
	fields := logrus.Fields{
		"method":      r.Method,
		"route":       route,
		"status":      status,
		"duration_ms": float64(took.Microseconds()) / 1000,
		"bytes":       w.bytes,
		"actor":       actor,
		"remote":      r.RemoteAddr,
		"request_id":  requestID(r),
	}
	if actorID != "" {
		fields["actor_id"] = actorID
	}
	s.metrics.observe(r.Method, route, status, took)
	entry := s.log.WithFields(fields)
	if rec.longPoll && rec.empty && status == http.StatusOK {
		entry.Debug("request")
	} else {
		entry.Info("request")
	}
	if status == http.StatusUnauthorized {
		s.storms.refused(r.RemoteAddr, time.Now())
	}
}
