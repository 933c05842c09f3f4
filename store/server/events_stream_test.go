package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// Session event streams over HTTP: framing, order, the end, pings,
// shutdown and slow clients.

// requestStream opens a stream that must be refused, returning the answer.
func (s *testServer) requestStream(t *testing.T, sessionID string, hdr http.Header) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.send(ctx, "GET", eventsPath(sessionID)+"/stream", nil, hdr)
	if err != nil {
		t.Fatalf("stream of %s: %v", sessionID, err)
	}
	return r
}

// sseFrame is one frame of an event stream: its lines, without the empty
// line that ends it.
type sseFrame struct {
	lines []string
	err   error // the stream ended (io.EOF as nil) instead
	ended bool
}

// stream is an open event stream whose frames a goroutine reads.
type stream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	frames chan sseFrame
}

// streamBound is how long a test waits for a frame or the end.
const streamBound = 10 * time.Second

// openStream opens a session's event stream; its headers must arrive at
// once (before any event), with status 200 and text/event-stream.
func openStream(t *testing.T, base, sessionID string, hdr http.Header) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+eventsPath(sessionID)+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	setProtocol(req)
	headers := time.AfterFunc(streamBound, cancel)
	resp, err := http.DefaultClient.Do(req)
	if !headers.Stop() {
		t.Fatalf("the stream's headers did not arrive within %s", streamBound)
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("content-type") != "text/event-stream" {
		resp.Body.Close()
		cancel()
		t.Fatalf("stream answered %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("content-type"))
	}
	st := &stream{t: t, resp: resp, cancel: cancel, frames: make(chan sseFrame, 64)}
	go func() {
		defer close(st.frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		var lines []string
		for sc.Scan() {
			if sc.Text() == "" {
				st.frames <- sseFrame{lines: lines}
				lines = nil
				continue
			}
			lines = append(lines, sc.Text())
		}
		st.frames <- sseFrame{ended: true, err: sc.Err(), lines: lines}
	}()
	t.Cleanup(st.close)
	return st
}

func (st *stream) close() {
	st.cancel()
	st.resp.Body.Close()
}

// next returns the next frame that is not a ping.
func (st *stream) next() sseFrame {
	st.t.Helper()
	timeout := time.After(streamBound)
	for {
		select {
		case f, ok := <-st.frames:
			if !ok || f.ended {
				st.t.Fatalf("the stream ended (%v, trailing %q) where a frame was expected", f.err, f.lines)
			}
			if len(f.lines) > 0 && f.lines[0] == "event: ping" {
				continue
			}
			return f
		case <-timeout:
			st.t.Fatalf("no frame within %s", streamBound)
		}
	}
}

// event reads the next frame as an event, checking its framing.
func (st *stream) event() map[string]any {
	st.t.Helper()
	f := st.next()
	if len(f.lines) != 2 || !strings.HasPrefix(f.lines[0], "event: ") || !strings.HasPrefix(f.lines[1], "data: ") {
		st.t.Fatalf("frame %q: want event: TYPE and data: JSON", f.lines)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(f.lines[1], "data: ")), &m); err != nil {
		st.t.Fatalf("frame data %q: %v", f.lines[1], err)
	}
	if m["type"] != strings.TrimPrefix(f.lines[0], "event: ") {
		st.t.Fatalf("frame %q: the event name is not the event's type", f.lines)
	}
	return m
}

// ends waits for the server to end the stream, with no frame but pings.
func (st *stream) ends() {
	st.t.Helper()
	timeout := time.After(streamBound)
	for {
		select {
		case f, ok := <-st.frames:
			switch {
			case !ok:
				return
			case f.ended && f.err == nil && len(f.lines) == 0:
				return
			case f.ended:
				st.t.Fatalf("the stream ended with %v, trailing %q", f.err, f.lines)
			case len(f.lines) > 0 && f.lines[0] == "event: ping":
			default:
				st.t.Fatalf("frame %q where the stream should end", f.lines)
			}
		case <-timeout:
			st.t.Fatalf("the stream did not end within %s", streamBound)
		}
	}
}

// startEventServer is startServer with server options.
func startEventServer(t *testing.T, dsn string, opts server.Options) *testServer {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := server.EnsureAdminKey(ctx, db, testKey, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	opts.Backend = db
	if opts.Log == nil {
		opts.Log = warnLog()
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(srv.BeginShutdown)
	return &testServer{URL: hs.URL, srv: srv}
}

func TestEventsStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, _ := s.newEnv(t, "env")
		sess := s.newSession(t, env.ID)
		before := s.postOK(t, sess.ID, toolUseEvent("bash", map[string]any{"command": "echo before"}))[0]
		st := openStream(t, s.URL, sess.ID, adminHdr)
		second := openStream(t, s.URL, sess.ID, adminHdr)
		// Only events appended after the stream opened arrive, in order,
		// whether posted together or apart.
		posted := s.postOK(t, sess.ID, toolUseEvent("write", map[string]any{"file_path": "/a", "content": "x\ny"}),
			map[string]any{"type": "agent.message", "content": []any{map[string]any{"type": "text", "text": "line1\nline2"}}})
		posted = append(posted, s.postOK(t, sess.ID, toolResultEvent(posted[0]["id"].(string)))...)
		for _, c := range []*stream{st, second} {
			for i, want := range posted {
				got := c.event()
				if got["id"] != want["id"] || got["id"] == before["id"] {
					t.Fatalf("stream event %d is %v, want %v", i, got, want)
				}
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				if string(gj) != string(wj) {
					t.Errorf("streamed %s, listed %s", gj, wj)
				}
			}
		}
		// Events of another session don't reach it.
		other := s.newSession(t, env.ID)
		s.postOK(t, other.ID, toolUseEvent("bash", map[string]any{}))
		// Archiving appends session.status_terminated, delivered, then the end.
		s.request(t, "POST", "/v1/sessions/"+sess.ID+"/archive", nil).decode(t, &store.Session{})
		for _, c := range []*stream{st, second} {
			if got := c.event(); got["type"] != "session.status_terminated" {
				t.Fatalf("after the archive the stream sent %v, want session.status_terminated", got)
			}
			c.ends()
		}
		// A stream of a terminated session sends that event and ends.
		late := openStream(t, s.URL, sess.ID, adminHdr)
		if got := late.event(); got["type"] != "session.status_terminated" {
			t.Fatalf("a stream of a terminated session sent %v", got)
		}
		late.ends()
		wantError(t, "stream of an unknown session", s.requestStream(t, "sesn_nope", adminHdr), 404, "not_found_error")
	})
}

func TestEventsStreamPingAndShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startEventServer(t, dsn, server.Options{StreamKeepAlive: 20 * time.Millisecond})
		env, _ := s.newEnv(t, "env")
		sess := s.newSession(t, env.ID)
		st := openStream(t, s.URL, sess.ID, adminHdr)
		// An idle stream pings.
		select {
		case f := <-st.frames:
			if len(f.lines) != 2 || f.lines[0] != "event: ping" || f.lines[1] != `data: {"type":"ping"}` {
				t.Fatalf("idle stream sent %q, want a ping frame", f.lines)
			}
		case <-time.After(streamBound):
			t.Fatal("an idle stream sent no ping")
		}
		// BeginShutdown ends open streams, so that Shutdown can finish.
		s.srv.BeginShutdown()
		st.ends()
	})
}

// TestEventsStreamSlowClient: a client that stops reading its stream
// loses it once a write has waited StreamWriteTimeout, rather than holding
// the handler (and a graceful shutdown) for ever: the stream's access
// line, written when its handler returns, appears.
func TestEventsStreamSlowClient(t *testing.T) {
	log, hook := test.NewNullLogger()
	s := startEventServer(t, sqltest.SQLite(t), server.Options{Log: log, StreamWriteTimeout: 100 * time.Millisecond})
	env, _ := s.newEnv(t, "env")
	sess := s.newSession(t, env.ID)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET %s/stream HTTP/1.1\r\nHost: memfs\r\nX-Api-Key: %s\r\nAnthropic-Version: %s\r\nAnthropic-Beta: %s\r\n\r\n",
		eventsPath(sess.ID), testKey, store.APIVersion, store.BetaManagedAgents); err != nil {
		t.Fatal(err)
	}
	// Read the headers, then nothing more.
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("stream answered %q, %v", line, err)
	}
	streamEnded := func() bool {
		for _, e := range hook.AllEntries() {
			if e.Message == "request" && e.Data["route"] == "/v1/sessions/{session_id}/events/stream" {
				return true
			}
		}
		return false
	}
	// Fill the connection's buffers until the server's writes block: 64
	// events of 900 KiB are far more than any socket buffer holds.
	big := strings.Repeat("x", 900<<10)
	deadline := time.Now().Add(streamBound)
	for n := 0; !streamEnded(); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("the stream's handler still runs %s after its client stopped reading", streamBound)
		}
		if n < 64 {
			s.postOK(t, sess.ID, map[string]any{"type": "agent.message", "content": big})
		} else {
			time.Sleep(10 * time.Millisecond) // poll interval
		}
	}
}
