package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// rawAnswer is one HTTP answer, read whole.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
}

// String is how a failure message shows the answer: the status and the
// body.
func (r rawAnswer) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

// rawCall sends one API request with key (as the SDK sends it: see
// harness.APIHeaders) and returns the
// answer, whatever its status, for tests that check what the typed client
// hides: statuses, headers, error envelopes. q, when not empty, is added
// as the query string (path must then have none); body, when not nil, is
// sent as JSON. The timeout only bounds a hung server.
func rawCall(t *testing.T, base, method, path, key string, q url.Values, body any) rawAnswer {
	t.Helper()
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range harness.APIHeaders(path, key) {
		req.Header[k] = v
	}
	if rd != nil {
		req.Header.Set("content-type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return rawAnswer{status: res.StatusCode, header: res.Header, body: b}
}
