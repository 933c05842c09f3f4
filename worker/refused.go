package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/memfs/memfs/internal/backoff"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// Fatal is fatal: a 400, 401, 403 or 404 from the poll, the ack, the
// session get or a mount's first request is the same answer every time (a
// missing header, the wrong kind of credential, an unknown environment or
// store), so the command ends with the server's message instead of
// retrying. So is a server whose TLS certificate is not trusted
// (client.CertificateError): the worker's CA file must change first. 429,
// 5xx and timeouts pass: they are retried with a capped backoff that
// honours the server's Retry-After.

// refusal is an error that ends the worker: what was refused, and the
// server's answer (a *store.Error with its message).
type refusal struct {
	what string
	err  error
}

func (r *refusal) Error() string {
	if store.Status(r.err) == 0 {
		return fmt.Sprintf("%s failed for good: %v", r.what, r.err)
	}
	return fmt.Sprintf("%s was refused (HTTP %d %s): %v", r.what, store.Status(r.err), http.StatusText(store.Status(r.err)), r.err)
}

func (r *refusal) Unwrap() error { return r.err }

// refused wraps err as a refusal of what when the server refused it for
// good (store.Refusal), or its certificate is not trusted; otherwise it
// returns nil.
func refused(what string, err error) error {
	if _, ok := store.Refusal(err); !ok && !errors.As(err, new(*client.CertificateError)) {
		return nil
	}
	var r *refusal
	if errors.As(err, &r) {
		return err
	}
	return &refusal{what: what, err: err}
}

// isRefusal reports whether err ends the worker.
func isRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

// Waits between failed polls: from a second, doubling, capped.
const (
	pollBackoffMin = time.Second
	pollBackoffCap = 60 * time.Second
)

// pollBackoff is the wait after the n-th failed poll in a row (n ≥ 1): a
// random time in the upper half of min·2^(n-1), capped at pollBackoffCap,
// or what the server asked for with Retry-After when that is longer
// (capped the same).
func pollBackoff(n int, err error) time.Duration {
	d := backoff.Policy{Min: pollBackoffMin, Max: pollBackoffCap, Jitter: backoff.Equal}.Delay(n - 1)
	var se *store.Error
	if errors.As(err, &se) && se.RetryAfter > d {
		d = min(se.RetryAfter, pollBackoffCap)
	}
	return d
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
