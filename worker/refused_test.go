package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// queueServer answers every poll of the work queue with the next of
// answers (the last one again once they run out) and counts the polls.
func queueServer(t *testing.T, answers ...func(w http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var polls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/work/poll") {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		n := int(polls.Add(1)) - 1
		answers[min(n, len(answers)-1)](w)
	}))
	t.Cleanup(hs.Close)
	return hs, &polls
}

// refuse answers status in the API's error envelope with msg.
func refuse(status int, typ, msg string, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_test"}`, typ, msg)
	}
}

func testWorker(t *testing.T, url string) *Worker {
	t.Helper()
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	w, err := New(Config{APIURL: url, EnvironmentID: "env_test", EnvironmentKey: "sk-env-test", StateDir: t.TempDir(),
		MemoryRoot: t.TempDir(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPollRefusalEndsWorker: a 400, 401, 403 or 404 from the poll ends
// Worker.Run at the first poll with the server's message and what was
// refused, never a retry loop, and never the guess "check
// --environment-id and --environment-key".
func TestPollRefusalEndsWorker(t *testing.T) {
	for _, c := range []struct {
		status   int
		typ, msg string
		wantHTTP string
	}{
		{400, "invalid_request_error", "anthropic-version: header is required", "HTTP 400 Bad Request"},
		{401, "authentication_error", "invalid x-api-key: use Authorization: Bearer for an environment key", "HTTP 401 Unauthorized"},
		{403, "permission_error", "this key can't poll environment env_test", "HTTP 403 Forbidden"},
		{404, "not_found_error", "environment env_test not found", "HTTP 404 Not Found"},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			hs, polls := queueServer(t, refuse(c.status, c.typ, c.msg))
			w := testWorker(t, hs.URL)
			w.sleep = func(context.Context, time.Duration) { t.Errorf("the worker waited to poll again after a %d", c.status) }
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := w.Run(ctx)
			if ctx.Err() != nil {
				t.Fatalf("Run still polled after a minute of %d answers (%d polls)", c.status, polls.Load())
			}
			if err == nil {
				t.Fatalf("Run returned nil after a %d", c.status)
			}
			msg := err.Error()
			for _, want := range []string{c.msg, c.wantHTTP, "environment env_test", "environment key", "req_test"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "check --environment-id") || strings.Contains(msg, "<nil>") {
				t.Errorf("error %q guesses a cause", msg)
			}
			if n := polls.Load(); n != 1 {
				t.Errorf("%d polls, want 1", n)
			}
		})
	}
}

// TestPollRetryAfter: 429 and 5xx answers stay transient, one attempt per
// poll, and the wait before the next poll honours Retry-After in seconds
// and as an HTTP date, capped at pollBackoffCap; a refusal then ends Run.
func TestPollRetryAfter(t *testing.T) {
	date := time.Now().Add(40 * time.Second).UTC().Format(http.TimeFormat)
	hs, polls := queueServer(t,
		refuse(429, "rate_limit_error", "slow down", "retry-after", "7"),
		refuse(503, "overloaded_error", "busy", "retry-after", date),
		refuse(529, "overloaded_error", "busy", "retry-after", "3600"),
		refuse(500, "api_error", "oops"),
		refuse(401, "authentication_error", "key revoked"),
	)
	w := testWorker(t, hs.URL)
	var mu sync.Mutex
	var waits []time.Duration
	w.sleep = func(_ context.Context, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := w.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "key revoked") {
		t.Fatalf("Run = %v, want the 401's refusal", err)
	}
	if n := polls.Load(); n != 5 {
		t.Errorf("%d polls, want 5 (one attempt each)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 4 {
		t.Fatalf("waits %v, want 4", waits)
	}
	if waits[0] != 7*time.Second {
		t.Errorf("after 429 retry-after: 7, waited %s", waits[0])
	}
	// The date has a second's resolution, and the test runs meanwhile.
	if waits[1] < 20*time.Second || waits[1] > 40*time.Second {
		t.Errorf("after 503 retry-after: %s (40 s ahead), waited %s", date, waits[1])
	}
	if waits[2] != pollBackoffCap {
		t.Errorf("after retry-after: 3600, waited %s, want the cap %s", waits[2], pollBackoffCap)
	}
	// The fourth failure in a row without retry-after: 4 s doubled to 8 s, upper half.
	if waits[3] < 4*time.Second || waits[3] > 8*time.Second {
		t.Errorf("after a 500 (fourth failure in a row), waited %s, want 4 s to 8 s", waits[3])
	}
}

// TestAckRefusalEndsWorker: an ack refused with 400/401/403/404 stops the
// item and ends Run with the server's message; a 409 (the item is no
// longer this worker's) does not end it.
func TestAckRefusalEndsWorker(t *testing.T) {
	for _, c := range []struct {
		status int
		fatal  bool
	}{{400, true}, {401, true}, {403, true}, {404, true}, {409, false}} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			var polls, stops atomic.Int32
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/work/poll"):
					if polls.Add(1) > 1 {
						refuse(401, "authentication_error", "the end of the test")(w)
						return
					}
					w.Header().Set("content-type", "application/json")
					fmt.Fprint(w, `{"id":"work_1","type":"work","environment_id":"env_test","state":"queued","data":{"type":"session","id":"sesn_1"}}`)
				case strings.HasSuffix(r.URL.Path, "/work/work_1/ack"):
					refuse(c.status, "invalid_request_error", "ack refused for the test")(w)
				case strings.HasSuffix(r.URL.Path, "/work/work_1/stop"):
					stops.Add(1)
					w.Header().Set("content-type", "application/json")
					fmt.Fprint(w, `{"id":"work_1","type":"work","state":"stopped"}`)
				default:
					http.Error(w, "unexpected "+r.URL.Path, http.StatusTeapot)
				}
			}))
			t.Cleanup(hs.Close)
			w := testWorker(t, hs.URL)
			w.sleep = func(context.Context, time.Duration) {}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := w.Run(ctx)
			if ctx.Err() != nil || err == nil {
				t.Fatalf("Run = %v after %d polls", err, polls.Load())
			}
			ackEnded := strings.Contains(err.Error(), "ack refused for the test")
			if ackEnded != c.fatal {
				t.Errorf("ack answered %d: Run = %v; want it to end Run: %v", c.status, err, c.fatal)
			}
			if c.fatal && !strings.Contains(err.Error(), "acknowledging work item work_1") {
				t.Errorf("error %q does not say what was refused", err)
			}
			if n := stops.Load(); n != 1 {
				t.Errorf("the item was stopped %d times, want 1", n)
			}
		})
	}
}
