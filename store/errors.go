package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error returned by a Backend, the HTTP client or the
// validation functions matches (errors.Is) at most one of these.
var (
	// ErrInvalid: a malformed request, field, path or content (HTTP 400).
	ErrInvalid = errors.New("invalid request")
	// ErrUnauthorized: no or bad credential (HTTP 401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the credential lacks scope, or the target is read-only
	// (an archived store, a read-only attachment) (HTTP 403).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no such object, or not visible to this credential (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrPreconditionFailed: a content_sha256 precondition did not match (HTTP 409).
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrPathConflict: the path is taken, by a memory or as a directory of
	// memories (HTTP 409).
	ErrPathConflict = errors.New("path conflict")
	// ErrConflict: any other state conflict, e.g. stopping a stopped work item (HTTP 409).
	ErrConflict = errors.New("conflict")
	// ErrGone: a change-feed cursor older than what the server keeps (HTTP 410).
	ErrGone = errors.New("gone")
	// ErrTooLarge: a body or content over its limit (HTTP 413).
	ErrTooLarge = errors.New("too large")
	// ErrLimit: a count limit is reached, e.g. memories per store (HTTP 422).
	ErrLimit = errors.New("limit reached")
	// ErrRateLimited: too many requests (HTTP 429).
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: the service is shutting down, overloaded or
	// unreachable (HTTP 503/529, or a network failure in the client).
	ErrUnavailable = errors.New("unavailable")
	// ErrInternal: a bug on the server (HTTP 500).
	ErrInternal = errors.New("internal error")
	// ErrFeedUnsupported: the server has no change feed (it refused the
	// route: see ExtensionRefused); clients fall back to listing.
	ErrFeedUnsupported = errors.New("the change feed is not offered here")
)

// Error is a domain error with a human-readable message and optional
// machine-readable details. Kind is one of the sentinel errors above, so
// errors.Is(err, ErrNotFound) works through it.
type Error struct {
	Kind    error
	Message string
	// Code is a machine-readable cause (error.details.error_code on the wire).
	Code string
	// ConflictingMemoryID and ConflictingPath are set on ErrPathConflict.
	ConflictingMemoryID string
	ConflictingPath     string
	// RequestID is the server's request id, set by the client.
	RequestID string
	// Status is the HTTP status the client received (0 when not over HTTP).
	Status int
	// RetryAfter is how long the server asked the client to wait before
	// asking again (retry-after-ms or retry-after, seconds or an HTTP
	// date), 0 when it did not say.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Kind.Error()
	}
	if e.RequestID != "" {
		return fmt.Sprintf("%s (request %s)", msg, e.RequestID)
	}
	return msg
}

// Unwrap lets errors.Is match the sentinel kind.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// PathConflict returns the ErrPathConflict error for a path taken by
// another memory (or by memories below it).
func PathConflict(path, conflictingID, conflictingPath string) *Error {
	var msg string
	switch {
	case conflictingPath == path:
		msg = fmt.Sprintf("a memory already exists at path %q", path)
	case len(conflictingPath) > len(path):
		msg = fmt.Sprintf("path %q is a directory of other memories (e.g. %q); a path can't be both a memory and a directory", path, conflictingPath)
	default:
		msg = fmt.Sprintf("path %q is below the memory %q; a path can't be both a memory and a directory", path, conflictingPath)
	}
	return &Error{Kind: ErrPathConflict, Message: msg, Code: "memory_path_conflict",
		ConflictingMemoryID: conflictingID, ConflictingPath: conflictingPath}
}
