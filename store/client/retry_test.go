package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

func TestRetriesUnavailableThenSucceeds(t *testing.T) {
	var attempts atomic.Int32
	var mu sync.Mutex
	var gaps []time.Duration
	var last time.Time
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if n := attempts.Add(1); n > 1 {
			gaps = append(gaps, now.Sub(last))
		}
		last = now
		if attempts.Load() <= 2 {
			w.Header().Set("retry-after-ms", "30")
			writeErr(w, http.StatusServiceUnavailable, "overloaded_error", "busy", nil)
			return
		}
		writeJSON(w, testStore)
	}))
	s, err := c.GetStore(context.Background(), "memstore_1")
	if err != nil {
		t.Fatalf("GetStore: %v", err)
	}
	if s.Name != "notes" {
		t.Errorf("name = %q", s.Name)
	}
	if got := attempts.Load(); got != 3 {
		t.Errorf("attempts = %d, want 3", got)
	}
	// retry-after-ms 30 is honoured, capped at RetryWaitMax (20 ms): every
	// retry waits the cap, more than the 1-2 ms backoff would.
	mu.Lock()
	defer mu.Unlock()
	for _, g := range gaps {
		if g < 20*time.Millisecond {
			t.Errorf("retried after %s, before the capped retry-after of 20ms", g)
		}
	}
}

func TestBadRequestIsNotRetried(t *testing.T) {
	var attempts atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeErr(w, http.StatusBadRequest, "invalid_request_error", "path must begin with /",
			map[string]any{"details": map[string]any{"error_code": "invalid_path"}})
	}))
	_, err := c.CreateMemory(context.Background(), "memstore_1", "a", "x")
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if got := attempts.Load(); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	var attempts atomic.Int32
	var mu sync.Mutex
	var first, second time.Time
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch attempts.Add(1) {
		case 1:
			first = time.Now()
			w.Header().Set("retry-after-ms", "150")
			writeErr(w, http.StatusTooManyRequests, "rate_limit_error", "slow down", nil)
		default:
			second = time.Now()
			writeJSON(w, testStore)
		}
	}), func(o *Options) { o.RetryWaitMax = 5 * time.Second })
	if _, err := c.GetStore(context.Background(), "memstore_1"); err != nil {
		t.Fatal(err)
	}
	if got := attempts.Load(); got != 2 {
		t.Fatalf("attempts = %d, want 2", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if gap := second.Sub(first); gap < 150*time.Millisecond {
		t.Errorf("retried after %s, before retry-after-ms 150", gap)
	}
}

func TestRetriesExhaustedReturnLastAnswer(t *testing.T) {
	var attempts atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeErr(w, http.StatusTooManyRequests, "rate_limit_error", "slow down", nil)
	}), func(o *Options) { o.RetryMax = 2 })
	_, err := c.GetStore(context.Background(), "memstore_1")
	if !errors.Is(err, store.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	if got := attempts.Load(); got != 3 {
		t.Errorf("attempts = %d, want 1 + RetryMax 2", got)
	}
}

func TestShouldRetryFalseIsFinal(t *testing.T) {
	var attempts atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("x-should-retry", "false")
		writeErr(w, http.StatusServiceUnavailable, "overloaded_error", "going away", nil)
	}))
	_, err := c.GetStore(context.Background(), "memstore_1")
	if !errors.Is(err, store.ErrUnavailable) || attempts.Load() != 1 {
		t.Fatalf("err = %v after %d attempts; want ErrUnavailable after 1", err, attempts.Load())
	}
}

func TestNetworkFailureIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := New(Options{BaseURL: "http://" + addr, APIKey: "k", RetryMax: 2, RetryWaitMin: time.Millisecond, RetryWaitMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetStore(context.Background(), "memstore_1")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("err = %v does not wrap the cause ECONNREFUSED", err)
	}
	if !strings.Contains(err.Error(), "3 attempt") {
		t.Errorf("err = %v does not count the attempts", err)
	}
}

func TestContextCancelStopsRetries(t *testing.T) {
	var attempts atomic.Int32
	first := make(chan struct{})
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			close(first)
		}
		w.Header().Set("retry-after-ms", "60000")
		writeErr(w, http.StatusServiceUnavailable, "overloaded_error", "busy", nil)
	}), func(o *Options) { o.RetryWaitMax = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetStore(ctx, "memstore_1")
		done <- err
	}()
	<-first
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not return after its context was cancelled")
	}
	if got := attempts.Load(); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

func TestContextCancelAbortsHungAttempt(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetStore(ctx, "memstore_1")
		done <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not return after its context was cancelled")
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	var attempts atomic.Int32
	release := make(chan struct{})
	defer close(release)
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			select { // hang until the client gives up on this attempt
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		writeJSON(w, testStore)
	}), func(o *Options) { o.Timeout = 100 * time.Millisecond })
	if _, err := c.GetStore(context.Background(), "memstore_1"); err != nil {
		t.Fatalf("GetStore: %v", err)
	}
	if got := attempts.Load(); got != 2 {
		t.Errorf("attempts = %d, want 2", got)
	}
}

func TestTruncatedBodyIsRetried(t *testing.T) {
	var attempts atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("content-length", "500")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"id":"memstore_1","na`)
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		writeJSON(w, testStore)
	}))
	s, err := c.GetStore(context.Background(), "memstore_1")
	if err != nil || s.Name != "notes" {
		t.Fatalf("GetStore = %+v, %v", s, err)
	}
	if got := attempts.Load(); got != 2 {
		t.Errorf("attempts = %d, want 2", got)
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	for attempt := range 8 {
		ceiling := min(lo<<attempt, hi)
		for range 50 {
			if d := retryWait(lo, hi, attempt, nil); d < lo || d > ceiling {
				t.Fatalf("retryWait(attempt %d) = %s, outside [%s, %s]", attempt, d, lo, ceiling)
			}
		}
	}
	now := time.Now()
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(10 * time.Second).UTC().Format(http.TimeFormat)}}, 9 * time.Second, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{}, 0, false},
	} {
		d, ok := retryAfter(tc.h, now)
		if ok != tc.ok || d < tc.want || d > tc.want+time.Second {
			t.Errorf("retryAfter(%v) = %s, %v; want %s, %v", tc.h, d, ok, tc.want, tc.ok)
		}
	}
	resp := &http.Response{Header: http.Header{"Retry-After": {"60"}}}
	if d := retryWait(lo, hi, 0, resp); d != hi {
		t.Errorf("retry-after 60 s gave %s, want the cap %s", d, hi)
	}
}

// A call whose caller retries by itself (store.WithCallerRetries) makes
// one attempt: its failure comes back at once.
func TestCallerRetriesMakesOneAttempt(t *testing.T) {
	var attempts atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeErr(w, http.StatusServiceUnavailable, "overloaded_error", "busy", nil)
	}))
	_, err := c.GetStore(store.WithCallerRetries(context.Background()), "memstore_1")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetStore: %v, want ErrUnavailable", err)
	}
	if got := attempts.Load(); got != 1 {
		t.Fatalf("%d attempts, want 1", got)
	}
	attempts.Store(0)
	c.GetStore(context.Background(), "memstore_1") // fails: the point is the count
	if got := attempts.Load(); got < 2 {
		t.Fatalf("%d attempts without the mark, want the client's retries", got)
	}
}
