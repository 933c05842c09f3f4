package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/memfs/memfs/store"
)

// errorBody is the wire error envelope.
type errorBody struct {
	Type      string      `json:"type"`
	Error     errorDetail `json:"error"`
	RequestID string      `json:"request_id"`
}

type errorDetail struct {
	Type                string         `json:"type"`
	Message             string         `json:"message"`
	Details             map[string]any `json:"details,omitempty"`
	ConflictingMemoryID string         `json:"conflicting_memory_id,omitempty"`
	ConflictingPath     string         `json:"conflicting_path,omitempty"`
}

// errorKinds maps each sentinel to its status and wire type.
var errorKinds = []struct {
	kind   error
	status int
	typ    string
}{
	{store.ErrHeartbeat, http.StatusPreconditionFailed, "invalid_request_error"},
	{store.ErrInvalid, http.StatusBadRequest, "invalid_request_error"},
	{store.ErrUnauthorized, http.StatusUnauthorized, "authentication_error"},
	{store.ErrForbidden, http.StatusForbidden, "permission_error"},
	{store.ErrNotFound, http.StatusNotFound, "not_found_error"},
	{store.ErrPreconditionFailed, http.StatusConflict, "memory_precondition_failed_error"},
	{store.ErrPathConflict, http.StatusConflict, "memory_path_conflict_error"},
	{store.ErrConflict, http.StatusConflict, "invalid_request_error"},
	{store.ErrGone, http.StatusGone, "invalid_request_error"},
	{store.ErrTooLarge, http.StatusRequestEntityTooLarge, "request_too_large"},
	{store.ErrLimit, http.StatusUnprocessableEntity, "invalid_request_error"},
	{store.ErrRateLimited, http.StatusTooManyRequests, "rate_limit_error"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, "overloaded_error"},
}

// writeError answers err as the error envelope. Unknown errors are 500s,
// logged once here with the request id; their text is not sent. A 503
// (store.ErrUnavailable: the database is away) and a 429 carry
// retry-after and retry-after-ms, which the SDK and store/client honour,
// and are logged as warnings with their cause.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, typ := http.StatusInternalServerError, "api_error"
	for _, k := range errorKinds {
		if errors.Is(err, k.kind) {
			status, typ = k.status, k.typ
			break
		}
	}
	rid := requestID(r)
	body := errorBody{Type: "error", RequestID: rid, Error: errorDetail{Type: typ, Message: err.Error()}}
	var se *store.Error
	if errors.As(err, &se) {
		body.Error.Message = se.Message
		if se.Code != "" {
			body.Error.Details = map[string]any{"error_code": se.Code}
		}
		body.Error.ConflictingMemoryID, body.Error.ConflictingPath = se.ConflictingMemoryID, se.ConflictingPath
	}
	var he *store.HeartbeatError
	if errors.As(err, &he) {
		body.Error.Message = he.Error()
		body.Error.Details = map[string]any{"error_code": "heartbeat_precondition_failed", "error_visibility": "user_facing", "current_state": he.Current}
	}
	switch {
	case status == http.StatusInternalServerError && r.Context().Err() != nil:
		// The client went away (or the server is shutting down): nobody
		// reads this answer, and it is not a bug worth an error line.
		s.log.WithField("request_id", rid).WithError(err).Debugf("%s %s abandoned", r.Method, r.URL.Path)
	case status == http.StatusInternalServerError:
		s.log.WithField("request_id", rid).WithError(err).Errorf("%s %s failed", r.Method, r.URL.Path)
		body.Error.Message = "internal error; the server logged it with request id " + rid
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		// The client is told only to come back; the cause (a driver error
		// naming hosts and databases, for a database that went away) is
		// logged here, once, with the request id.
		s.log.WithField("request_id", rid).WithError(err).Warnf("%s %s: %d, the client will retry", r.Method, r.URL.Path, status)
		w.Header().Set("retry-after", "1")
		w.Header().Set("retry-after-ms", "1000")
	case status >= 400 && status < 500:
		w.Header().Set("x-should-retry", "false")
	}
	writeJSON(w, status, body)
}

// writeJSON answers v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"type":"error","error":{"type":"api_error","message":"response encoding failed"}}`)
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
