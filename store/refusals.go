package store

import (
	"errors"
	"net/http"
)

// Refusals: how a caller tells a server's answer that will not change by
// asking again (a missing header, the wrong kind of credential, an unknown
// environment or store) from a passing failure (429, 5xx, a timeout).

// Refusal returns the server's error when err is an answer of 400, 401,
// 403 or 404: asking again gets the same answer, so a command that gets it
// for its first request, or for the work queue, ends with its message.
// An error of another status, or not from a server (Status 0), is none.
func Refusal(err error) (*Error, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, false
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return e, true
	}
	return nil, false
}

// ExtensionRefused reports whether err is a server's refusal of a memfs-only
// route (the change feed): 400, 403, 404, 405 or 501. A server that lacks the
// route, or does not let this credential use it, answers one of them; all
// mean "not here", and the caller does without the extension.
func ExtensionRefused(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// Status is the HTTP status of err's server answer, 0 when it has none.
func Status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}
