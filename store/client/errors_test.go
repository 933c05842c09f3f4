package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
)

func TestErrorEnvelope(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusConflict, "memory_path_conflict_error", "path \"/a\" is a directory of other memories",
			map[string]any{
				"details":               map[string]any{"error_code": "memory_path_conflict"},
				"conflicting_memory_id": "mem_9",
				"conflicting_path":      "/a/b",
			})
	}))
	_, err := c.CreateMemory(context.Background(), "memstore_1", "/a", "x")
	if !errors.Is(err, store.ErrPathConflict) {
		t.Fatalf("err = %v, want ErrPathConflict", err)
	}
	var se *store.Error
	if !errors.As(err, &se) {
		t.Fatalf("err %T is not a *store.Error", err)
	}
	want := store.Error{Kind: store.ErrPathConflict, Message: `path "/a" is a directory of other memories`,
		Code: "memory_path_conflict", ConflictingMemoryID: "mem_9", ConflictingPath: "/a/b",
		RequestID: "req_body", Status: http.StatusConflict}
	if *se != want {
		t.Errorf("error = %+v\nwant    %+v", *se, want)
	}
	if !strings.Contains(err.Error(), "req_body") {
		t.Errorf("message %q lacks the request id", err.Error())
	}
}

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		status int
		typ    string
		want   error
	}{
		{400, "invalid_request_error", store.ErrInvalid},
		{401, "authentication_error", store.ErrUnauthorized},
		{403, "permission_error", store.ErrForbidden},
		{404, "not_found_error", store.ErrNotFound},
		{409, "memory_precondition_failed_error", store.ErrPreconditionFailed},
		{409, "memory_path_conflict_error", store.ErrPathConflict},
		{409, "invalid_request_error", store.ErrConflict},
		{410, "invalid_request_error", store.ErrGone},
		{412, "invalid_request_error", store.ErrPreconditionFailed},
		{413, "request_too_large", store.ErrTooLarge},
		{422, "invalid_request_error", store.ErrLimit},
		{429, "rate_limit_error", store.ErrRateLimited},
		{500, "api_error", store.ErrInternal},
		{503, "overloaded_error", store.ErrUnavailable},
		{529, "overloaded_error", store.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", tc.status, tc.typ), func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeErr(w, tc.status, tc.typ, "m", nil)
			}), func(o *Options) { o.RetryMax = -1 })
			_, err := c.GetStore(context.Background(), "memstore_1")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var se *store.Error
			if !errors.As(err, &se) || se.Status != tc.status {
				t.Errorf("err = %#v, want a *store.Error with status %d", err, tc.status)
			}
		})
	}
}

func TestNonEnvelopeError(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("request-id", "req_h")
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}), func(o *Options) { o.RetryMax = -1 })
	_, err := c.GetStore(context.Background(), "memstore_1")
	var se *store.Error
	if !errors.As(err, &se) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want a *store.Error of kind ErrUnavailable", err)
	}
	if se.RequestID != "req_h" || !strings.Contains(se.Message, "502") || !strings.Contains(se.Message, "bad gateway") {
		t.Errorf("error = %+v", se)
	}
}
