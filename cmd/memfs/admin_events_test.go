package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

func init() {
	adminGroups["sessions"] = sessionsGroup
	adminGroups["environments"] = environmentsGroup
}

// eventsBound bounds each wait of these tests; passing tests never reach it.
const eventsBound = 10 * time.Second

// newEventSession creates an environment and a session through the CLI.
func (c *cli) newEventSession() string {
	c.t.Helper()
	env := strings.Fields(c.ok("", "environments", "create", "events-env"))[0]
	return strings.TrimSpace(c.ok("", "sessions", "create", "--environment", env))
}

// api is a client of the test server with the admin key.
func (c *cli) api() *client.Client {
	c.t.Helper()
	cl, err := client.New(client.Options{BaseURL: c.env["MEMFS_API_URL"], APIKey: c.env["MEMFS_API_KEY"]})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// syncBuffer is an output that can be read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder // GUARDED_BY(mu)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a command in the background; its stdout can be read while
// it runs, and wait returns what it returned.
func (c *cli) start(ctx context.Context, args ...string) (out *syncBuffer, wait func() (string, error)) {
	out = &syncBuffer{}
	var errb syncBuffer
	aio := adminIO{stdin: strings.NewReader(""), stdout: out, stderr: &errb, getenv: func(k string) string { return c.env[k] }}
	done := make(chan error, 1)
	go func() { done <- adminGroups[args[0]].run(ctx, aio, args[1:]) }()
	return out, func() (string, error) {
		c.t.Helper()
		select {
		case err := <-done:
			return errb.String(), err
		case <-time.After(eventsBound):
			c.t.Fatalf("memfs %s did not end within %s", strings.Join(args, " "), eventsBound)
			return "", nil
		}
	}
}

// waitEvent polls the session's log until an event of type typ appears.
func (c *cli) waitEvent(sessionID, typ string) store.Event {
	c.t.Helper()
	deadline := time.Now().Add(eventsBound)
	for {
		evs, err := c.api().AllEvents(context.Background(), sessionID)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == typ {
				return e
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no %s event within %s", typ, eventsBound)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// postResult answers a tool use as a worker would.
func (c *cli) postResult(sessionID, toolUseID, text string, isError bool) {
	c.t.Helper()
	ev, _ := json.Marshal(map[string]any{"type": "user.tool_result", "tool_use_id": toolUseID, "is_error": isError,
		"content": []any{map[string]any{"type": "text", "text": text}}})
	if _, err := c.api().SendEvents(context.Background(), sessionID, []json.RawMessage{ev}); err != nil {
		c.t.Fatal(err)
	}
}

func TestSessionsEventsCommands(t *testing.T) {
	c := newCLI(t)
	s := c.newEventSession()
	if out, errOut, err := c.run("", "sessions", "events", "ls", s); err != nil || out != "" || !strings.Contains(errOut, "no events") {
		t.Errorf("ls of an empty log: %q, %q, %v", out, errOut, err)
	}
	id := strings.TrimSpace(c.ok("", "sessions", "events", "post", s, "--tool", "bash", "--input", `{"command":"ls /mnt/memory"}`))
	if !strings.HasPrefix(id, "sevt_") {
		t.Fatalf("post printed %q, want the event id", id)
	}
	c.ok(`{"type":"session.status_idle","stop_reason":{"type":"requires_action","event_ids":["`+id+`"]}}`, "sessions", "events", "post", s, "--event", "-")
	var stored store.Event
	c.jsonOut(&stored, "sessions", "events", "post", s, "--event", `{"type":"agent.message","content":[{"type":"text","text":"hello\nthere"}]}`)
	if stored.Type != "agent.message" || !strings.HasPrefix(stored.ID, "sevt_") {
		t.Errorf("post --json printed %s", stored.JSON)
	}

	rows := lines(c.ok("", "sessions", "events", "ls", s))
	if len(rows) != 4 || strings.Join(rows[0], " ") != "PROCESSED TYPE ID DETAIL" {
		t.Fatalf("ls =\n%v", rows)
	}
	if r := rows[1]; r[1] != "agent.tool_use" || r[2] != id || strings.Join(r[3:], " ") != `bash {"command":"ls /mnt/memory"}` {
		t.Errorf("ls row of the tool use: %q", r)
	}
	if r := rows[2]; r[1] != "session.status_idle" || r[3] != "requires_action" {
		t.Errorf("ls row of the idle: %q", r)
	}
	if r := rows[3]; r[1] != "agent.message" || strings.Join(r[3:], " ") != "hello there" {
		t.Errorf("ls row of the message: %q", r)
	}
	var all []map[string]any
	c.jsonOut(&all, "sessions", "events", "ls", s)
	if len(all) != 3 || all[0]["id"] != id || all[0]["name"] != "bash" || all[0]["evaluated_permission"] != "allow" {
		t.Errorf("ls --json = %v", all)
	}
	if in, _ := all[0]["input"].(map[string]any); in["command"] != "ls /mnt/memory" {
		t.Errorf("the tool use's input is %v", all[0]["input"])
	}
}

func TestSessionsEventsWaitResult(t *testing.T) {
	c := newCLI(t)
	s := c.newEventSession()
	// The worker's result arrives after the post: its text is printed.
	out, wait := c.start(context.Background(), "sessions", "events", "post", s, "--tool", "bash", "--input", `{"command":"cat /mnt/memory/n/a.md"}`, "--wait-result")
	use := c.waitEvent(s, "agent.tool_use")
	c.postResult(s, use.ID, "line one\nline two\n", false)
	if errOut, err := wait(); err != nil || out.String() != "line one\nline two\n" || !strings.Contains(errOut, "waiting for its result") {
		t.Fatalf("post --wait-result: %q, %q, %v; want the result's text", out.String(), errOut, err)
	}
	// An error result is printed, and the command fails.
	s2 := c.newEventSession()
	out, wait = c.start(context.Background(), "sessions", "events", "post", s2, "--tool", "read", "--input", `{"file_path":"/nope"}`, "--wait-result", "--json")
	use = c.waitEvent(s2, "agent.tool_use")
	c.postResult(s2, use.ID, "no such file", true)
	_, err := wait()
	var res map[string]any
	if jerr := json.Unmarshal([]byte(out.String()), &res); jerr != nil || res["tool_use_id"] != use.ID || res["is_error"] != true {
		t.Errorf("post --wait-result --json printed %q (%v)", out.String(), jerr)
	}
	if err == nil || !strings.Contains(err.Error(), "is_error") {
		t.Errorf("an error result: err = %v, want the tool's error", err)
	}
	// The session ends before a result: the wait fails.
	s3 := c.newEventSession()
	_, wait = c.start(context.Background(), "sessions", "events", "post", s3, "--tool", "bash", "--input", `{"command":"sleep 100"}`, "--wait-result")
	c.waitEvent(s3, "agent.tool_use")
	c.ok("", "sessions", "archive", s3)
	if _, err := wait(); err == nil || !strings.Contains(err.Error(), "session ended") {
		t.Errorf("archived while waiting: err = %v", err)
	}
	// Ctrl-C stops the wait.
	s4 := c.newEventSession()
	ctx, cancel := context.WithCancel(context.Background())
	_, wait = c.start(ctx, "sessions", "events", "post", s4, "--tool", "bash", "--wait-result")
	c.waitEvent(s4, "agent.tool_use")
	cancel()
	if _, err := wait(); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("interrupted wait: err = %v", err)
	}
}

func TestSessionsEventsStream(t *testing.T) {
	c := newCLI(t)
	s := c.newEventSession()
	out, wait := c.start(context.Background(), "sessions", "events", "stream", s, "--json")
	// The stream shows what is appended after it opened: post until one
	// shows up (the command may not be connected yet), then more, in order.
	deadline := time.Now().Add(eventsBound)
	for n := 0; !strings.Contains(out.String(), `"text":"probe`); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("the stream printed nothing within %s", eventsBound)
		}
		c.ok("", "sessions", "events", "post", s, "--event", fmt.Sprintf(`{"type":"agent.message","content":[{"type":"text","text":"probe %d"}]}`, n))
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	last := strings.TrimSpace(c.ok("", "sessions", "events", "post", s, "--tool", "write", "--input", `{"file_path":"/a","content":"x"}`))
	c.ok("", "sessions", "archive", s)
	if _, err := wait(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	ls := strings.Split(strings.TrimSpace(out.String()), "\n")
	var types, ids []string
	for _, l := range ls {
		var e store.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("stream --json line %q: %v", l, err)
		}
		types, ids = append(types, e.Type), append(ids, e.ID)
	}
	n := len(types)
	if n < 3 || types[n-1] != "session.status_terminated" || types[n-2] != "agent.tool_use" || ids[n-2] != last {
		t.Errorf("stream printed %q; want the probes, the tool use, then session.status_terminated", types)
	}
	// Without --json, one readable line per event.
	s2 := c.newEventSession()
	c.ok("", "sessions", "archive", s2)
	if got := c.ok("", "sessions", "events", "stream", s2); !strings.Contains(got, "session.status_terminated") || strings.Count(got, "\n") != 1 {
		t.Errorf("stream of an ended session printed %q", got)
	}
}

func TestSessionsEventsErrors(t *testing.T) {
	c := newCLI(t)
	s := c.newEventSession()
	for _, args := range [][]string{
		{"post", s},
		{"post", s, "--tool", "bash", "--event", `{"type":"agent.message"}`},
		{"post", s, "--tool", "bash", "--input", `["ls"]`},
		{"post", s, "--tool", "bash", "--input", `{"command":`},
		{"post", s, "--event", `{"type":"agent.message"}`, "--input", `{}`},
		{"post", s, "--event", `not json`},
		{"post", s, "--event", `"agent.message"`},
		{"post", s, "--event", `{"type":"agent.message","content":[]}`, "--wait-result"},
		{"post", "--tool", "bash"},
		{"ls"},
		{"ls", s, "extra"},
		{"stream"},
		{"nosuch", s},
	} {
		_, _, err := c.run("", append([]string{"sessions", "events"}, args...)...)
		if !errors.As(err, new(usageError)) {
			t.Errorf("sessions events %q: err = %v, want a usage error", args, err)
		}
	}
	// The server's refusals come back as its typed errors.
	for _, tc := range []struct {
		args []string
		kind error
	}{
		{[]string{"ls", "sesn_nope"}, store.ErrNotFound},
		{[]string{"stream", "sesn_nope"}, store.ErrNotFound},
		{[]string{"post", "sesn_nope", "--tool", "bash"}, store.ErrNotFound},
		{[]string{"post", s, "--event", `{"type":"agent.dance"}`}, store.ErrInvalid},
		{[]string{"post", s, "--event", `{"type":"session.status_terminated"}`}, store.ErrInvalid},
	} {
		_, _, err := c.run("", append([]string{"sessions", "events"}, tc.args...)...)
		if !errors.Is(err, tc.kind) {
			t.Errorf("sessions events %q: err = %v, want %v", tc.args, err, tc.kind)
		}
	}
	if out, _, _ := c.run("", "sessions", "events", "ls", s); out != "" {
		t.Errorf("refused posts left events: %q", out)
	}
}
