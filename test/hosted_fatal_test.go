package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// A refusal of the work queue or of a session's first requests ends the
// worker with the server's message (worker/refused.go).

// startVia starts memfs worker on e's environment through url (a proxy)
// without waiting for anything: a worker that is refused may exit before
// it would say it polls.
func (e *wkEnv) startVia(url string, args ...string) *harness.Proc {
	e.t.Helper()
	w := harness.StartProc(e.t, harness.ProcOptions{}, append([]string{"worker", "--api-url", url, "--environment-id", e.envID,
		"--environment-key", e.envKey, "--memory-root", e.root, "--state-dir", e.stateDir}, args...)...)
	e.t.Cleanup(func() {
		if w.Running() {
			w.Kill()
		}
		harness.DetachUnder(e.root)
	})
	return w
}

// TestWorkerPollRefusedExits: a poll answered 400, 401 or 404 ends memfs
// worker with exit status 1 and the server's message, what was refused
// and with which credential — not a retry loop, and not the guess "check
// --environment-id and --environment-key".
func TestWorkerPollRefusedExits(t *testing.T) {
	for _, c := range []struct {
		status   int
		typ, msg string
	}{
		{400, "invalid_request_error", "anthropic-version: header is required"},
		{401, "authentication_error", "the environment key goes in Authorization: Bearer, not x-api-key"},
		{404, "not_found_error", "environment not found"},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			t.Parallel()
			e := newWkEnvAt(t, nil)
			proxy := harness.NewRouteProxy(t, e.serve.URL)
			proxy.Refuse("", `/work/poll$`, c.status, c.typ, c.msg)
			w := e.startVia(proxy.URL, "--memory-sync-interval", "5s")
			if code := w.Wait(wkExitTimeout); code != 1 {
				t.Fatalf("memfs worker exited %d, want 1:\n%s", code, w.Output())
			}
			out := w.Output()
			for _, want := range []string{c.msg, fmt.Sprintf("HTTP %d %s", c.status, http.StatusText(c.status)), "polling the work queue of environment " + e.envID, "with the environment key"} {
				if !strings.Contains(out, want) {
					t.Errorf("memfs worker does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "check --environment-id") || strings.Contains(out, "retrying") {
				t.Errorf("memfs worker guessed a cause or retried:\n%s", out)
			}
			polls := 0
			for _, r := range proxy.Requests() {
				if strings.HasSuffix(r.Path, "/work/poll") {
					polls++
				}
			}
			if polls != 1 {
				t.Errorf("%d polls, want 1", polls)
			}
		})
	}
}

// TestWorkerSessionRefusedExits: a session get, or a mount's first request,
// refused with the session token ends memfs worker with exit status 1 and
// the server's message, after stopping the work item.
func TestWorkerSessionRefusedExits(t *testing.T) {
	for _, c := range []struct {
		name, route string
		status      int
		typ, msg    string
		want        string
	}{
		{"session get", `^/v1/sessions/[^/]+$`, 401, "authentication_error", "a session token goes in Authorization: Bearer", "getting session"},
		{"mount's first request", `/memories$`, 403, "permission_error", "this token does not cover the store", "a memory store's first request with the session token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newWkEnvAt(t, nil)
			st := e.newStore("refused", map[string]string{"/a.md": "a\n"})
			proxy := harness.NewRouteProxy(t, e.serve.URL)
			proxy.Refuse(http.MethodGet, c.route, c.status, c.typ, c.msg)
			sess := e.newSession(wkRW(st))
			w := e.startVia(proxy.URL, "--memory-sync-interval", "5s")
			if code := w.Wait(wkExitTimeout); code != 1 {
				t.Fatalf("memfs worker exited %d, want 1:\n%s", code, w.Output())
			}
			out := w.Output()
			for _, want := range []string{c.msg, c.want, fmt.Sprintf("HTTP %d %s", c.status, http.StatusText(c.status)), sess.ID} {
				if !strings.Contains(out, want) {
					t.Errorf("memfs worker does not say %q:\n%s", want, out)
				}
			}
			if wk := e.workOf(sess.ID); wk.State != "stopped" {
				t.Errorf("the work item is %s, want stopped", wk.State)
			}
		})
	}
}
