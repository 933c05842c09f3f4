package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// TestServeTimeoutsSpareLongPolls: with --read-timeout and --idle-timeout
// of 1s, a change-feed wait of 3s runs its course on its connection and
// answers 200: the timeouts bound reading a request and idling between
// requests, never a request that waits.
func TestServeTimeoutsSpareLongPolls(t *testing.T) {
	t.Parallel()
	srv := harness.StartServe(t, harness.ServeOptions{Args: []string{"--read-timeout", "1s", "--idle-timeout", "1s"}})
	api := newServeAPI(srv.URL, srv.AdminKey)
	ctx := context.Background()
	var st struct{ ID string }
	if _, err := api.call(ctx, "POST", "/v1/memory_stores", map[string]any{"name": "poll"}, &st); err != nil {
		t.Fatal(err)
	}
	if _, err := api.call(ctx, "POST", "/v1/memory_stores/"+st.ID+"/memories", map[string]any{"path": "/a.md", "content": "a\n"}, nil); err != nil {
		t.Fatal(err)
	}
	var page struct {
		NextCursor int64 `json:"next_cursor"`
	}
	if _, err := api.call(ctx, "GET", "/v1/memory_stores/"+st.ID+"/changes?after=0", nil, &page); err != nil || page.NextCursor == 0 {
		t.Fatalf("the change feed's cursor: %d, %v", page.NextCursor, err)
	}
	start := time.Now()
	status, err := api.call(ctx, "GET", fmt.Sprintf("/v1/memory_stores/%s/changes?after=%d&wait_ms=3000", st.ID, page.NextCursor), nil, nil)
	if err != nil || status != 200 {
		t.Fatalf("a 3s change-feed wait with 1s timeouts: %d, %v", status, err)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Fatalf("the wait answered after %s, before its 3s: is this the long poll?", took)
	}
}

// TestServeSlowBodyTimesOut: a body that stops arriving is answered 400
// once --read-timeout passes, instead of holding the connection and its
// handler for ever; headers that stop arriving close the connection.
func TestServeSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	srv := harness.StartServe(t, harness.ServeOptions{Args: []string{"--read-timeout", "1s"}})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(60 * time.Second)) // a bound for a hung serve only
		return c, bufio.NewReader(c)
	}
	c, br := dial()
	fmt.Fprintf(c, "POST /v1/memory_stores HTTP/1.1\r\nHost: memfs\r\n%scontent-type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":",
		harness.RawAPIHeaders("/v1/memory_stores", srv.AdminKey))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a body that stopped arriving got no answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "read timeout") {
		t.Errorf("a body that stopped arriving: %d %s; want 400 saying the read timeout passed", res.StatusCode, b)
	}

	c, br = dial()
	fmt.Fprintf(c, "GET /v1/memory_stores HTTP/1.1\r\nHost: memfs\r\n")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("headers that stopped arriving: read %v, want the connection closed (EOF)", err)
	}
}
