package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

// Session events over HTTP: validation, credentials, the stream.

// eventsPath is a session's events URL.
func eventsPath(sessionID string) string { return "/v1/sessions/" + sessionID + "/events" }

// eventList is a page of events as the wire has it.
type eventList struct {
	Data     []map[string]any `json:"data"`
	NextPage *string          `json:"next_page"`
}

// post posts events with hdr and returns the answer.
func (s *testServer) post(t *testing.T, sessionID string, hdr http.Header, events ...any) response {
	t.Helper()
	return s.requestWith(t, "POST", eventsPath(sessionID), map[string]any{"events": events}, hdr)
}

var adminHdr = http.Header{"X-Api-Key": {testKey}}

// postOK posts events with the admin key and returns them as stored.
func (s *testServer) postOK(t *testing.T, sessionID string, events ...any) []map[string]any {
	t.Helper()
	var out eventList
	s.post(t, sessionID, adminHdr, events...).decode(t, &out)
	if len(out.Data) != len(events) {
		t.Fatalf("posted %d events, got %d back", len(events), len(out.Data))
	}
	return out.Data
}

// listAll lists a session's events (admin key).
func (s *testServer) listAll(t *testing.T, sessionID string) []map[string]any {
	t.Helper()
	var out eventList
	s.request(t, "GET", eventsPath(sessionID)+"?limit=1000", nil).decode(t, &out)
	return out.Data
}

func toolUseEvent(name string, input map[string]any) map[string]any {
	return map[string]any{"type": "agent.tool_use", "name": name, "input": input, "evaluated_permission": "allow"}
}

func toolResultEvent(toolUseID string) map[string]any {
	return map[string]any{"type": "user.tool_result", "tool_use_id": toolUseID,
		"content": []any{map[string]any{"type": "text", "text": "done"}}, "is_error": false}
}

func TestEventsPostAndList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, _ := s.newEnv(t, "env")
		sess := s.newSession(t, env.ID)
		got := s.postOK(t, sess.ID,
			toolUseEvent("write", map[string]any{"file_path": "/mnt/memory/notes/a.md", "content": "hello"}),
			map[string]any{"type": "session.status_idle", "stop_reason": map[string]any{"type": "end_turn"}})
		use := got[0]
		id, _ := use["id"].(string)
		at, _ := use["processed_at"].(string)
		if !strings.HasPrefix(id, "sevt_") || use["type"] != "agent.tool_use" || use["name"] != "write" || use["evaluated_permission"] != "allow" {
			t.Errorf("stored tool use %v", use)
		}
		if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || !strings.HasSuffix(at, "Z") || time.Since(ts) > time.Minute {
			t.Errorf("processed_at %q: want RFC 3339 UTC, now", at)
		}
		if in, _ := use["input"].(map[string]any); in["file_path"] != "/mnt/memory/notes/a.md" || in["content"] != "hello" {
			t.Errorf("input %v", use["input"])
		}
		res := s.postOK(t, sess.ID, toolResultEvent(id))[0]
		if res["tool_use_id"] != id || res["is_error"] != false || res["type"] != "user.tool_result" {
			t.Errorf("stored result %v", res)
		}
		// The list has them in order, asc by default; desc reverses; pages link.
		all := s.listAll(t, sess.ID)
		if len(all) != 3 || all[0]["id"] != id || all[2]["id"] != res["id"] {
			t.Fatalf("listed %v", all)
		}
		var page eventList
		s.request(t, "GET", eventsPath(sess.ID)+"?order=desc&limit=2", nil).decode(t, &page)
		if len(page.Data) != 2 || page.Data[0]["id"] != res["id"] || page.NextPage == nil {
			t.Fatalf("desc page %+v", page)
		}
		var rest eventList
		s.request(t, "GET", eventsPath(sess.ID)+"?order=desc&limit=2&page="+*page.NextPage, nil).decode(t, &rest)
		if len(rest.Data) != 1 || rest.Data[0]["id"] != id || rest.NextPage != nil {
			t.Fatalf("second desc page %+v, want the tool use and next_page null", rest)
		}
		// The SDK's filters: types[] and created_at bounds.
		var f eventList
		s.request(t, "GET", eventsPath(sess.ID)+"?types[]=user.tool_result&types[]=session.status_idle", nil).decode(t, &f)
		if len(f.Data) != 2 || f.Data[0]["type"] != "session.status_idle" || f.Data[1]["type"] != "user.tool_result" {
			t.Errorf("types filter: %v", f.Data)
		}
		s.request(t, "GET", eventsPath(sess.ID)+"?created_at[gt]="+at, nil).decode(t, &f)
		if len(f.Data) != 1 || f.Data[0]["id"] != res["id"] {
			t.Errorf("created_at[gt] the tool use's time: %v, want only the result", f.Data)
		}
	})
}

func TestEventsValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, _ := s.newEnv(t, "env")
		sess := s.newSession(t, env.ID)
		use := s.postOK(t, sess.ID, toolUseEvent("bash", map[string]any{"command": "ls"}))[0]["id"].(string)
		ev := func(fields ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i < len(fields); i += 2 {
				m[fields[i].(string)] = fields[i+1]
			}
			return m
		}
		many := make([]any, store.MaxEventsPerRequest+1)
		for i := range many {
			many[i] = toolUseEvent("bash", map[string]any{})
		}
		for _, tc := range []struct {
			what   string
			body   any
			status int
			typ    string
		}{
			{"not JSON", `{"events":[`, 400, "invalid_request_error"},
			{"no events", map[string]any{}, 400, "invalid_request_error"},
			{"events null", `{"events":null}`, 400, "invalid_request_error"},
			{"no event", map[string]any{"events": []any{}}, 400, "invalid_request_error"},
			{"events an object", map[string]any{"events": map[string]any{"type": "agent.message"}}, 400, "invalid_request_error"},
			{"an event that is a string", map[string]any{"events": []any{"agent.message"}}, 400, "invalid_request_error"},
			{"an event that is null", `{"events":[null]}`, 400, "invalid_request_error"},
			{"no type", map[string]any{"events": []any{ev("name", "x")}}, 400, "invalid_request_error"},
			{"type a number", map[string]any{"events": []any{ev("type", 7)}}, 400, "invalid_request_error"},
			{"an unknown type", map[string]any{"events": []any{ev("type", "agent.dance")}}, 400, "invalid_request_error"},
			{"a stream preview type", map[string]any{"events": []any{ev("type", "event_delta")}}, 400, "invalid_request_error"},
			{"an id", map[string]any{"events": []any{ev("type", "agent.message", "id", "sevt_mine")}}, 400, "invalid_request_error"},
			{"a processed_at", map[string]any{"events": []any{ev("type", "agent.message", "processed_at", "2026-01-01T00:00:00Z")}}, 400, "invalid_request_error"},
			{"a field twice", `{"events":[{"type":"agent.message","content":[],"content":[]}]}`, 400, "invalid_request_error"},
			{"a tool use without a name", map[string]any{"events": []any{ev("type", "agent.tool_use", "input", map[string]any{})}}, 400, "invalid_request_error"},
			{"a tool use without input", map[string]any{"events": []any{ev("type", "agent.tool_use", "name", "bash")}}, 400, "invalid_request_error"},
			{"input not an object", map[string]any{"events": []any{ev("type", "agent.tool_use", "name", "bash", "input", "ls")}}, 400, "invalid_request_error"},
			{"a permission of maybe", map[string]any{"events": []any{ev("type", "agent.tool_use", "name", "bash", "input", map[string]any{}, "evaluated_permission", "maybe")}}, 400, "invalid_request_error"},
			{"a result without tool_use_id", map[string]any{"events": []any{ev("type", "user.tool_result")}}, 400, "invalid_request_error"},
			{"a result for no tool use", map[string]any{"events": []any{toolResultEvent("sevt_nope")}}, 400, "invalid_request_error"},
			{"a custom result for a builtin tool use", map[string]any{"events": []any{ev("type", "user.custom_tool_result", "custom_tool_use_id", use)}}, 400, "invalid_request_error"},
			{"a confirmation of perhaps", map[string]any{"events": []any{ev("type", "user.tool_confirmation", "tool_use_id", use, "result", "perhaps")}}, 400, "invalid_request_error"},
			{"an idle without stop_reason", map[string]any{"events": []any{ev("type", "session.status_idle")}}, 400, "invalid_request_error"},
			{"a stop_reason without type", map[string]any{"events": []any{ev("type", "session.status_idle", "stop_reason", map[string]any{})}}, 400, "invalid_request_error"},
			{"session.status_terminated", map[string]any{"events": []any{ev("type", "session.status_terminated")}}, 400, "invalid_request_error"},
			{"session.deleted", map[string]any{"events": []any{ev("type", "session.deleted")}}, 400, "invalid_request_error"},
			{"a lone surrogate", `{"events":[{"type":"agent.message","content":"\ud800"}]}`, 400, "invalid_request_error"},
			{"a good event then a bad one", map[string]any{"events": []any{toolUseEvent("bash", map[string]any{}), ev("type", "agent.dance")}}, 400, "invalid_request_error"},
			{"too many events", map[string]any{"events": many}, 400, "invalid_request_error"},
			{"over 1 MiB", map[string]any{"events": []any{ev("type", "agent.message", "content", strings.Repeat("x", 1<<20))}}, 413, "request_too_large"},
		} {
			wantError(t, tc.what, s.request(t, "POST", eventsPath(sess.ID), tc.body), tc.status, tc.typ)
		}
		if n := len(s.listAll(t, sess.ID)); n != 1 {
			t.Errorf("refused posts left %d events, want the 1 posted before", n)
		}
		for _, q := range []string{"limit=0", "limit=1001", "limit=x", "order=sideways", "types[]=agent.dance", "types=bogus",
			"created_at[gt]=yesterday", "page=junk"} {
			wantError(t, "list ?"+q, s.request(t, "GET", eventsPath(sess.ID)+"?"+q, nil), 400, "invalid_request_error")
		}
		var p eventList
		s.request(t, "GET", eventsPath(sess.ID)+"?limit=1000", nil).decode(t, &p) // the SDK's tool runner lists with 1000
		wantError(t, "list of an unknown session", s.request(t, "GET", eventsPath("sesn_nope"), nil), 404, "not_found_error")
		wantError(t, "post to an unknown session", s.post(t, "sesn_nope", adminHdr, toolUseEvent("bash", map[string]any{})), 404, "not_found_error")
		s.request(t, "POST", "/v1/sessions/"+sess.ID+"/archive", nil).decode(t, &store.Session{})
		wantError(t, "post to a terminated session", s.post(t, sess.ID, adminHdr, toolUseEvent("bash", map[string]any{})), 403, "permission_error")
	})
}

func TestEventsCredentials(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, envKey := s.newEnv(t, "env")
		mine := s.newSession(t, env.ID)
		theirs := s.newSession(t, env.ID)
		w, tok := s.claim(t, env.ID, envKey)
		_, other := s.claim(t, env.ID, envKey)
		if w.Data.ID != mine.ID {
			mine, theirs = theirs, mine
		}
		use := s.postOK(t, mine.ID, toolUseEvent("bash", map[string]any{"command": "ls"}))[0]["id"].(string)
		custom := s.postOK(t, mine.ID, map[string]any{"type": "agent.custom_tool_use", "name": "f", "input": map[string]any{}})[0]["id"].(string)
		s.postOK(t, theirs.ID, toolUseEvent("bash", map[string]any{}))
		me := bearer(tok)

		// The session's token reads its log and posts its tool results.
		var l eventList
		s.requestWith(t, "GET", eventsPath(mine.ID), nil, me).decode(t, &l)
		if len(l.Data) != 2 {
			t.Errorf("the token lists %d events, want 2", len(l.Data))
		}
		s.post(t, mine.ID, me, toolResultEvent(use)).decode(t, &l)
		s.post(t, mine.ID, me, map[string]any{"type": "user.custom_tool_result", "custom_tool_use_id": custom}).decode(t, &l)
		st := openStream(t, s.URL, mine.ID, me)
		st.close()
		// ... but nothing else, and nothing of another session.
		for _, ev := range []map[string]any{
			toolUseEvent("bash", map[string]any{}),
			{"type": "session.status_idle", "stop_reason": map[string]any{"type": "end_turn"}},
			{"type": "user.message", "content": []any{}},
			{"type": "user.tool_confirmation", "tool_use_id": use, "result": "allow"},
		} {
			wantError(t, fmt.Sprint("the token posts ", ev["type"]), s.post(t, mine.ID, me, ev), 403, "permission_error")
		}
		wantError(t, "the token lists another session", s.requestWith(t, "GET", eventsPath(theirs.ID), nil, me), 404, "not_found_error")
		wantError(t, "the token posts to another session", s.post(t, theirs.ID, me, toolResultEvent(use)), 404, "not_found_error")
		wantError(t, "the token streams another session", s.requestStream(t, theirs.ID, me), 404, "not_found_error")
		// The environment key and no key are refused.
		ek := bearer(envKey)
		wantError(t, "the environment key lists", s.requestWith(t, "GET", eventsPath(mine.ID), nil, ek), 403, "permission_error")
		wantError(t, "the environment key posts", s.post(t, mine.ID, ek, toolResultEvent(use)), 403, "permission_error")
		wantError(t, "the environment key streams", s.requestStream(t, mine.ID, ek), 403, "permission_error")
		wantError(t, "no key", s.requestWith(t, "GET", eventsPath(mine.ID), nil, http.Header{}), 401, "authentication_error")
		wantError(t, "no key streams", s.requestStream(t, mine.ID, http.Header{}), 401, "authentication_error")
		// The other session's token is refused on mine the same way.
		wantError(t, "the other token", s.requestWith(t, "GET", eventsPath(mine.ID), nil, bearer(other)), 404, "not_found_error")
		// The admin key may post anything but session.status_terminated.
		s.postOK(t, mine.ID, map[string]any{"type": "session.status_running"}, map[string]any{"type": "agent.message", "content": []any{}})
		// A stopped item's token works no more.
		s.requestWith(t, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID+"/stop", map[string]any{"force": true}, me).decode(t, &store.Work{})
		wantError(t, "a stopped item's token", s.requestWith(t, "GET", eventsPath(mine.ID), nil, me), 401, "authentication_error")
	})
}

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
	opts.Backend, opts.Log = db, warnLog()
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
