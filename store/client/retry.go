package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/memfs/memfs/internal/backoff"
	"github.com/memfs/memfs/store"
	"github.com/sirupsen/logrus"
)

// checkRetry is the retry policy: retry network errors, truncated or
// timed-out responses, 429 and 5xx (but 501); never other statuses, nor an
// answer with x-should-retry: false, nor anything once ctx is done.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if store.CallerRetries(ctx) {
		return false, nil
	}
	if err != nil {
		// The default policy declines what a retry cannot fix (bad
		// scheme, bad TLS certificate, too many redirects).
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	if strings.EqualFold(resp.Header.Get("x-should-retry"), "false") {
		return false, nil
	}
	s := resp.StatusCode
	return s == http.StatusTooManyRequests || (s >= 500 && s != http.StatusNotImplemented), nil
}

// retryWait returns the wait before retry number attempt+1: what the
// server asked for (retry-after-ms, then retry-after), else a random
// duration between lo and lo·2^attempt (full jitter); never more than hi.
func retryWait(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if d, ok := retryAfter(resp.Header, time.Now()); ok {
			return clamp(d, 0, hi)
		}
	}
	return backoff.Policy{Min: lo, Max: hi, Jitter: backoff.Full}.Delay(attempt)
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}

// retryAfter reads retry-after-ms (milliseconds, possibly fractional) or
// retry-after (seconds, or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// errAttemptTimeout is the cause of an attempt cut short by Options.Timeout.
var errAttemptTimeout = errors.New("no complete response within the attempt timeout")

// attemptTimeoutKey carries a request's per-attempt timeout in its context
// (longer than the default for a long poll).
type attemptTimeoutKey struct{}

// timeoutTransport bounds each attempt separately, so that a hung attempt
// is abandoned and retried while the caller's context bounds the whole call.
type timeoutTransport struct {
	base    http.RoundTripper
	timeout time.Duration
}

// RoundTrip sends one attempt with its own deadline, which lasts until the
// response body is closed.
func (t *timeoutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	d := t.timeout
	if v, ok := r.Context().Value(attemptTimeoutKey{}).(time.Duration); ok && v > 0 {
		d = v
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), d, errAttemptTimeout)
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		err = attemptErr(ctx, r.Context(), d, err)
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{rc: resp.Body, ctx: ctx, parent: r.Context(), d: d, cancel: cancel}
	return resp, nil
}

// attemptErr names an attempt timeout as such rather than as a context
// deadline, which callers would take for their own.
func attemptErr(ctx, parent context.Context, d time.Duration, err error) error {
	if parent.Err() == nil && errors.Is(context.Cause(ctx), errAttemptTimeout) {
		return fmt.Errorf("%w (%s)", errAttemptTimeout, d)
	}
	return err
}

// cancelBody releases an attempt's deadline when its body is closed.
type cancelBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	parent context.Context
	d      time.Duration
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		err = attemptErr(b.ctx, b.parent, b.d, err)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

// debugLogger adapts a logrus logger to retryablehttp.LeveledLogger, at
// debug level throughout: the client returns errors instead of logging
// them, and one line per attempt is noise at info.
type debugLogger struct{ l logrus.FieldLogger }

var _ retryablehttp.LeveledLogger = debugLogger{}

func (d debugLogger) log(msg string, kv []any) {
	f := logrus.Fields{}
	for i := 0; i+1 < len(kv); i += 2 {
		f[fmt.Sprint(kv[i])] = kv[i+1]
	}
	d.l.WithFields(f).Debug("memfs client: " + msg)
}

func (d debugLogger) Error(msg string, kv ...any) { d.log(msg, kv) }
func (d debugLogger) Info(msg string, kv ...any)  { d.log(msg, kv) }
func (d debugLogger) Debug(msg string, kv ...any) { d.log(msg, kv) }
func (d debugLogger) Warn(msg string, kv ...any)  { d.log(msg, kv) }
