package syncqueue

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server/servertest"
	"github.com/memfs/memfs/store/sqlstore"
)

// Tests that need time to pass (the delete delay, a scratch file's grace,
// the cap's backoff, passes at distinct times) run the engine in a
// testing/synctest bubble: time is virtual there, and time.Sleep(d)
// returns after exactly d of it as soon as every goroutine of the test
// waits. A bubble can't wait on a socket (a goroutine reading one is not
// durably blocked), so the clients call the server's handler, through the
// proxy for the engine, in their own goroutine.

// mgSetupBubble is mgSetupWith for a test running inside synctest.Test.
// The proxy's faults that hijack the connection (mgDrop) need a socket
// and don't work here.
func mgSetupBubble(t *testing.T, files map[string]string, opts sqlstore.Options) *mgEnv {
	t.Helper()
	srv := servertest.NewWith(t, opts)
	e := &mgEnv{t: t, proxy: &mgProxy{next: srv}, ids: map[string]string{}, bubble: true}
	t.Cleanup(e.proxy.releaseFeed)
	e.remote = bubbleClient(t, srv)
	e.fill(files)
	return e
}

// engineClient is the engine's client of the proxy: over a socket, or
// straight into the proxy's handler in a bubble.
func (e *mgEnv) engineClient() *client.Client {
	if e.bubble {
		return bubbleClient(e.t, e.proxy)
	}
	return mgClient(e.t, e.proxyURL)
}

// bubbleClient is mgClient for a bubble: its requests go straight to h.
func bubbleClient(t *testing.T, h http.Handler) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: "http://bubble", APIKey: mgAdminKey, HTTPClient: &http.Client{Transport: handlerRT{h}},
		AllowInsecureHTTP: true, RetryWaitMin: time.Millisecond, RetryWaitMax: 20 * time.Millisecond, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handlerRT is an http.RoundTripper that has a handler answer each
// request in the caller's goroutine.
type handlerRT struct{ h http.Handler }

func (rt handlerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil { // a server's request always has a body
		r = r.Clone(r.Context())
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	rt.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
