package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/memfs/memfs/store"
)

// ErrFeedUnsupported reports a server without the change-feed extension
// (its /changes route answers 400, 403, 404, 405 or 501). Fall back to
// listing the store.
var ErrFeedUnsupported = store.ErrFeedUnsupported

// Wire error types (error.type) that select a sentinel beyond the status.
const (
	typePreconditionFailed = "memory_precondition_failed_error"
	typePathConflict       = "memory_path_conflict_error"
)

// errorEnvelope is the wire error body:
//
//	{"type":"error","error":{"type":T,"message":M,"details":{"error_code":C},
//	 "conflicting_memory_id":ID,"conflicting_path":P},"request_id":"req_..."}
type errorEnvelope struct {
	Type  string `json:"type"`
	Error *struct {
		Type                string         `json:"type"`
		Message             string         `json:"message"`
		Details             map[string]any `json:"details"`
		ConflictingMemoryID string         `json:"conflicting_memory_id"`
		ConflictingPath     string         `json:"conflicting_path"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// decodeError turns a non-2xx answer into a *store.Error. A body that is
// not the error envelope (a proxy's page, say) still gives the sentinel of
// its status, with the status and the start of the body as the message.
func decodeError(resp *http.Response, body []byte) *store.Error {
	e := &store.Error{Status: resp.StatusCode, RequestID: resp.Header.Get("request-id")}
	if d, ok := retryAfter(resp.Header, time.Now()); ok {
		e.RetryAfter = d
	}
	var env errorEnvelope
	wireType := ""
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		wireType = env.Error.Type
		e.Message = env.Error.Message
		if c, ok := env.Error.Details["error_code"].(string); ok {
			e.Code = c
		}
		e.ConflictingMemoryID = env.Error.ConflictingMemoryID
		e.ConflictingPath = env.Error.ConflictingPath
		if env.RequestID != "" {
			e.RequestID = env.RequestID
		}
	}
	e.Kind = kindOf(resp.StatusCode, wireType)
	if e.Message == "" {
		e.Message = fmt.Sprintf("%s from %s %s", resp.Status, resp.Request.Method, resp.Request.URL.Path)
		if s := snippet(body); s != "" {
			e.Message += ": " + s
		}
	}
	return e
}

// kindOf maps a status (and, for 409, the wire error type) to a sentinel.
func kindOf(status int, wireType string) error {
	switch status {
	case http.StatusBadRequest:
		return store.ErrInvalid
	case http.StatusUnauthorized:
		return store.ErrUnauthorized
	case http.StatusForbidden:
		return store.ErrForbidden
	case http.StatusNotFound:
		return store.ErrNotFound
	case http.StatusConflict:
		switch wireType {
		case typePreconditionFailed:
			return store.ErrPreconditionFailed
		case typePathConflict:
			return store.ErrPathConflict
		}
		return store.ErrConflict
	case http.StatusGone:
		return store.ErrGone
	case http.StatusPreconditionFailed:
		return store.ErrPreconditionFailed
	case http.StatusRequestEntityTooLarge:
		return store.ErrTooLarge
	case http.StatusUnprocessableEntity:
		return store.ErrLimit
	case http.StatusTooManyRequests:
		return store.ErrRateLimited
	case http.StatusRequestTimeout:
		return store.ErrUnavailable
	case http.StatusInternalServerError, http.StatusNotImplemented:
		return store.ErrInternal
	}
	if status >= 500 {
		// 502, 503, 504, 529: a proxy or the server itself is not
		// answering for now.
		return store.ErrUnavailable
	}
	return store.ErrInvalid
}

// snippet is the start of a non-JSON error body, on one line.
func snippet(body []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, string(body))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "..."
	}
	return s
}
