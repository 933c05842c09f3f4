package test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/test/harness"
)

// The --run-tools tests (tools_test.go) drive a real memfs worker running
// the SDK's session tool runner against a real memfs serve: they post the
// agent's events with the admin key, as the agent loop would (the
// documented stand-in for it), and read the user.tool_result events the
// runner posts back with the session token.

// tlToolsUser is who the tests' tools run as (the worker runs as root).
const tlToolsUser = "nobody"

// Deadlines: bounds on waiting, never expected durations.
const (
	tlResultTimeout = 30 * time.Second // a tool call answered (the runner streams the log)
)

// tlEvent is an event of a session's log as the tests read it.
type tlEvent struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	ProcessedAt string          `json:"processed_at"`
	ToolUseID   string          `json:"tool_use_id"`
	IsError     bool            `json:"is_error"`
	Content     []tlContent     `json:"content"`
	Raw         json.RawMessage `json:"-"`
}

type tlContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// text is a tool result's text blocks, joined.
func (ev tlEvent) text() string {
	var parts []string
	for _, c := range ev.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// postEvents appends events to a session's log with the admin key and
// returns them as stored.
func (e *wkEnv) postEvents(sessionID string, events ...map[string]any) []tlEvent {
	e.t.Helper()
	r := e.call(http.MethodPost, "/v1/sessions/"+sessionID+"/events", e.serve.AdminKey, nil, map[string]any{"events": events})
	if r.status != http.StatusOK {
		e.t.Fatalf("post events to %s: %s", sessionID, r)
	}
	var out struct {
		Data []tlEvent `json:"data"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Data) != len(events) {
		e.t.Fatalf("post events: %s (%v)", r.body, err)
	}
	return out.Data
}

// toolUse posts one agent.tool_use (allowed, as an always_allow policy
// would) and returns its id.
func (e *wkEnv) toolUse(sessionID, name string, input map[string]any) string {
	e.t.Helper()
	ev := e.postEvents(sessionID, map[string]any{"type": "agent.tool_use", "name": name, "input": input, "evaluated_permission": "allow"})
	return ev[0].ID
}

// events reads a session's whole log, oldest first.
func (e *wkEnv) events(sessionID string) []tlEvent {
	e.t.Helper()
	var all []tlEvent
	page := ""
	for {
		q := url.Values{"limit": {"1000"}, "order": {"asc"}}
		if page != "" {
			q.Set("page", page)
		}
		r := e.call(http.MethodGet, "/v1/sessions/"+sessionID+"/events", e.serve.AdminKey, q, nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("list the events of %s: %s", sessionID, r)
		}
		var p struct {
			Data     []json.RawMessage `json:"data"`
			NextPage *string           `json:"next_page"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			e.t.Fatal(err)
		}
		for _, raw := range p.Data {
			var ev tlEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				e.t.Fatal(err)
			}
			ev.Raw = raw
			all = append(all, ev)
		}
		if p.NextPage == nil || *p.NextPage == "" || len(p.Data) == 0 {
			return all
		}
		page = *p.NextPage
	}
}

// toolResult waits for the user.tool_result answering toolUseID.
func (e *wkEnv) toolResult(sessionID, toolUseID string) tlEvent {
	e.t.Helper()
	deadline := time.Now().Add(tlResultTimeout)
	for {
		for _, ev := range e.events(sessionID) {
			if ev.Type == "user.tool_result" && ev.ToolUseID == toolUseID {
				return ev
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no user.tool_result for %s in %s's log within %s", toolUseID, sessionID, tlResultTimeout)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// runTool posts a tool call and waits for its result.
func (e *wkEnv) runTool(sessionID, name string, input map[string]any) tlEvent {
	e.t.Helper()
	return e.toolResult(sessionID, e.toolUse(sessionID, name, input))
}

// mustTool is runTool for a call that must succeed; it returns the
// result's text.
func (e *wkEnv) mustTool(sessionID, name string, input map[string]any) string {
	e.t.Helper()
	r := e.runTool(sessionID, name, input)
	if r.IsError {
		e.t.Fatalf("%s %v: is_error, %q", name, input, r.text())
	}
	return r.text()
}

// bash is the input of a bash tool call.
func bash(command string) map[string]any { return map[string]any{"command": command} }

// versionsOf lists a memory's versions, newest first.
func (e *wkEnv) versionsOf(storeID, memoryID string) []store.Version {
	e.t.Helper()
	var out []store.Version
	for v, err := range e.admin.Versions(context.Background(), storeID, store.ListVersionsOptions{MemoryID: memoryID}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// memoryAt is the memory at p in a store (nil if none).
func (e *wkEnv) memoryAt(storeID, p string) *store.Memory {
	e.t.Helper()
	m, err := e.admin.MemoryByPath(context.Background(), storeID, p)
	if err != nil {
		return nil
	}
	return m
}

// workdirOf is where the worker runs a session's tools by default.
func (e *wkEnv) workdirOf(sessionID string) string {
	return filepath.Join(e.stateDir, "work", sessionID)
}

// tlProcesses lists the pids of the processes below ancestor whose command
// line is exactly argv.
func tlProcesses(ancestor int, argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	var out []int
	for pid, cmdline := range tlCmdlines() {
		if cmdline != want {
			continue
		}
		for p := pid; p > 1; p = tlParent(p) {
			if p == ancestor {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// tlCmdlines is every process of this PID namespace with its command line
// (NUL-separated, as /proc shows it).
func tlCmdlines() map[int]string {
	ents, _ := os.ReadDir("/proc")
	out := map[int]string{}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline"); err == nil {
			out[pid] = string(b)
		}
	}
	return out
}

// tlParent is a process's parent pid (0 when unknown).
func tlParent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// tlWaitFor polls cond until it holds; it fails the test at the deadline.
func tlWaitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// startToolsWorker starts memfs worker --run-tools with args (the
// environment key as MEMFS_ENVIRONMENT_KEY, not on the command line, so
// the tests can check the agent's shell can't find it), its tools run as
// tlToolsUser, and waits until it polls.
func (e *wkEnv) startToolsWorker(env []string, args ...string) *harness.Worker {
	e.t.Helper()
	return e.startToolsWorkerAs(tlToolsUser, env, args...)
}

// startToolsWorkerAs is startToolsWorker with --tools-user user ("": none,
// the default).
func (e *wkEnv) startToolsWorkerAs(user string, env []string, args ...string) *harness.Worker {
	e.t.Helper()
	requireTool(e.t, "bwrap") // the agent's sandbox
	opts := harness.WorkerOptions{URL: e.serve.URL, EnvironmentID: e.envID, EnvironmentKey: e.envKey, MemoryRoot: e.root, StateDir: e.stateDir}
	argv := []string{"worker", "--api-url", opts.URL, "--environment-id", opts.EnvironmentID,
		"--memory-root", opts.MemoryRoot, "--state-dir", opts.StateDir, "--run-tools"}
	if user != "" {
		argv = append(argv, "--tools-user", user)
	}
	argv = append(argv, args...)
	w := &harness.Worker{Proc: harness.StartProc(e.t, harness.ProcOptions{Env: append([]string{"MEMFS_ENVIRONMENT_KEY=" + e.envKey}, env...)}, argv...), Opts: opts}
	e.t.Cleanup(func() {
		if w.Running() {
			w.Kill()
		}
		harness.DetachUnder(opts.MemoryRoot)
		if e.t.Failed() {
			e.t.Logf("the worker's output:\n%s", w.Output())
		}
	})
	w.WaitOutput(1, 60*time.Second, "worker polling for work")
	return w
}
