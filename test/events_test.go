package test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// Session events end to end: real memfs serve processes, the memfs binary.

// evSession creates an environment and a session on srv and returns the
// session's id and the environment's id and key.
func evSession(t *testing.T, srv *harness.Serve) (sessionID, envID, envKey string) {
	t.Helper()
	var env store.Environment
	a := rawCall(t, srv.URL, "POST", "/v1/environments", srv.AdminKey, nil, map[string]any{"name": "events"})
	if a.status != 200 || json.Unmarshal(a.body, &env) != nil {
		t.Fatalf("create environment: %s", a)
	}
	var sess store.Session
	a = rawCall(t, srv.URL, "POST", "/v1/sessions", srv.AdminKey, nil, map[string]any{"environment_id": env.ID})
	if a.status != 200 || json.Unmarshal(a.body, &sess) != nil {
		t.Fatalf("create session: %s", a)
	}
	return sess.ID, env.ID, env.EnvironmentKey
}

// evClient is a store/client for srv with key.
func evClient(t *testing.T, url, key string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: url, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// evPost posts one event with the admin key and returns it as stored.
func evPost(t *testing.T, srv *harness.Serve, sessionID string, event map[string]any) store.Event {
	t.Helper()
	b, _ := json.Marshal(event)
	out, err := evClient(t, srv.URL, srv.AdminKey).SendEvents(context.Background(), sessionID, []json.RawMessage{b})
	if err != nil {
		t.Fatalf("post %s: %v", b, err)
	}
	return out[0]
}

// evFollow reads a stream in the background: its events, then its end.
func evFollow(st *client.EventStream) (<-chan store.Event, <-chan error) {
	events, end := make(chan store.Event, 16), make(chan error, 1)
	go func() {
		defer close(events)
		for st.Next() {
			events <- st.Event()
		}
		end <- st.Err()
	}()
	return events, end
}

// TestServeShutdownEndsEventStreams: SIGTERM ends a session's open event
// stream at once, so the graceful stop finishes promptly (its bound for
// in-flight requests is 30 s) and exits 0.
func TestServeShutdownEndsEventStreams(t *testing.T) {
	srv := harness.StartServe(t, harness.ServeOptions{})
	sess, _, _ := evSession(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/sessions/"+sess+"/events/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = harness.APIHeaders(req.URL.Path, srv.AdminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("open stream: %v %v", res, err)
	}
	defer res.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, res.Body)
		ended <- err
	}()

	start := time.Now()
	srv.Signal(syscall.SIGTERM)
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the stream ended with %v, want a clean end", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the event stream was still open 20 s after SIGTERM")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	code, err := srv.Wait(wctx)
	if err != nil || code != 0 {
		t.Fatalf("memfs serve after SIGTERM with an open stream: exit %d, %v\n%s", code, err, srv.Output())
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("memfs serve took %v to stop with an open stream", elapsed)
	}
}

// TestServeEventStreamCrossProcess: two memfs serve processes on one
// PostgreSQL database; a stream open on one delivers events posted
// through the other, and the other's archive ends it.
func TestServeEventStreamCrossProcess(t *testing.T) {
	dsn := sqltest.Postgres(t)
	a := harness.StartServe(t, harness.ServeOptions{DB: dsn})
	b := harness.StartServe(t, harness.ServeOptions{DB: dsn})
	sess, _, _ := evSession(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := evClient(t, a.URL, a.AdminKey).StreamEvents(ctx, sess)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, end := evFollow(st)
	next := func(what string) store.Event {
		t.Helper()
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended: %v", what, <-end)
			}
			return e
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not on A's stream within 10 s", what)
		}
		return store.Event{}
	}
	use := evPost(t, b, sess, map[string]any{"type": "agent.tool_use", "name": "bash", "input": map[string]any{"command": "ls"}})
	if got := next("B's tool use"); got.ID != use.ID || !bytes.Equal(got.JSON, use.JSON) {
		t.Fatalf("A streamed %s, want %s", got.JSON, use.JSON)
	}
	if a := rawCall(t, b.URL, "POST", "/v1/sessions/"+sess+"/archive", b.AdminKey, nil, nil); a.status != 200 {
		t.Fatalf("archive through B: %s", a)
	}
	if got := next("the termination"); got.Type != store.EventSessionStatusTerminated {
		t.Fatalf("A streamed %s after B's archive", got.JSON)
	}
	select {
	case _, ok := <-events:
		if ok {
			t.Fatal("A's stream went on after session.status_terminated")
		}
		if err := <-end; err != nil {
			t.Errorf("A's stream ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's stream did not end after session.status_terminated")
	}
}

// TestEventsPostWaitResultCommand: the memfs binary posts a tool use and
// waits; a worker holding the session's token answers it; the command
// prints the result's text and exits 0.
func TestEventsPostWaitResultCommand(t *testing.T) {
	srv := harness.StartServe(t, harness.ServeOptions{})
	sess, envID, envKey := evSession(t, srv)
	// Claim the item as a worker would, for the session's token.
	var w store.Work
	if a := rawCall(t, srv.URL, "GET", "/v1/environments/"+envID+"/work/poll", envKey, nil, nil); a.status != 200 || json.Unmarshal(a.body, &w) != nil || w.Secret == nil {
		t.Fatalf("poll: %s", a)
	}
	token := cwSecretToken(t, *w.Secret)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary(t), "sessions", "events", "post", sess, "--tool", "bash",
		"--input", `{"command":"ls /mnt/memory"}`, "--wait-result")
	cmd.Env = append(os.Environ(), "MEMFS_API_URL="+srv.URL, "MEMFS_API_KEY="+srv.AdminKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tc := evClient(t, srv.URL, token)
	var use store.Event
	for deadline := time.Now().Add(30 * time.Second); use.ID == ""; {
		evs, err := tc.AllEvents(ctx, sess)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == store.EventAgentToolUse {
				use = e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool use in the log within 30 s; the command said:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	result, _ := json.Marshal(map[string]any{"type": "user.tool_result", "tool_use_id": use.ID, "is_error": false,
		"content": []any{map[string]any{"type": "text", "text": "notes\nprefs\n"}}})
	if _, err := tc.SendEvents(ctx, sess, []json.RawMessage{result}); err != nil {
		t.Fatalf("the session's token posts the result: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("memfs sessions events post --wait-result: %v\nstderr: %s", err, stderr.String())
	}
	if stdout.String() != "notes\nprefs\n" || !strings.Contains(stderr.String(), use.ID) {
		t.Errorf("stdout %q, stderr %q; want the result's text, and the tool use named", stdout.String(), stderr.String())
	}
}
