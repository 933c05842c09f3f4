package test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/respjson"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"

	"github.com/memfs/memfs/test/harness"
)

// TestSDKEventsCompat drives the session events endpoints of memfs serve
// through the official Go SDK on both backends: list, send and stream
// with the SDK's own types, one run of its SessionToolRunner, and its
// EnvironmentWorker (memory enabled) end to end, with the agent's events
// posted by the admin key as a self-hosted agent loop would.
func TestSDKEventsCompat(t *testing.T) {
	onBothBackends(t, func(t *testing.T, db string) {
		root := t.TempDir() // the EnvironmentWorker downloads stores to their mount paths
		c := newCompat(t, harness.StartServe(t, harness.ServeOptions{DB: db, Args: []string{"--memory-root", root}}))
		t.Run("ListSendStream", c.ceTestListSendStream)
		t.Run("ToolRunner", c.ceTestToolRunner)
		t.Run("EnvironmentWorker", func(t *testing.T) { c.ceTestEnvironmentWorker(t, root) })
	})
}

// ceBound bounds each wait for something the server or the SDK should do
// promptly; passing tests never wait for it.
const ceBound = 30 * time.Second

// ceLogger is a slog logger whose output is shown only if the test fails.
func ceLogger(t *testing.T) *slog.Logger {
	var buf harness.LockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("SDK log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// ceSession creates a session on a new environment, claims its work item
// with the environment key and returns the session and its token.
func (c *compat) ceSession(t *testing.T, name string, resources ...anthropic.BetaSessionNewParamsResourceUnion) (*anthropic.BetaManagedAgentsSession, string) {
	t.Helper()
	env, key := c.cwNewEnv(t, name)
	sess := must(c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID, Resources: resources}))(t)
	ek := c.client(key)
	w := must(ek.Beta.Environments.Work.Poll(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkPollParams{BlockMs: anthropic.Int(999)}))(t)
	if w == nil || w.Data.ID != sess.ID {
		t.Fatalf("poll found %v, want %s's item", w, sess.ID)
	}
	must(ek.Beta.Environments.Work.Ack(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: env.ID}))(t)
	return sess, cwSecretToken(t, w.Secret)
}

// cePost posts events with the admin key (the SDK's send params hold only
// user.* and system events; the agent's are the server side's) and
// returns their ids.
func (c *compat) cePost(t *testing.T, sessionID string, events ...map[string]any) []string {
	t.Helper()
	a := rawCall(t, c.url, "POST", "/v1/sessions/"+sessionID+"/events", c.admin, nil, map[string]any{"events": events})
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if a.status != 200 || json.Unmarshal(a.body, &out) != nil || len(out.Data) != len(events) {
		t.Fatalf("posting %d events: %s", len(events), a)
	}
	var ids []string
	for _, e := range out.Data {
		ids = append(ids, e.ID)
	}
	return ids
}

// ceCheck checks an event the SDK parsed: the named fields of its JSON
// metadata parsed, it carries no field the SDK doesn't know, and its
// processed_at is RFC 3339 UTC. Fields the poster didn't send (memfs
// keeps events as sent) are not named.
func ceCheck(t *testing.T, what string, v any, fields ...string) {
	t.Helper()
	meta := reflect.ValueOf(v).Elem().FieldByName("JSON")
	if extra := meta.FieldByName("ExtraFields"); extra.Len() > 0 {
		t.Errorf("%s: fields unknown to the SDK: %v", what, extra.MapKeys())
	}
	for _, name := range append([]string{"ID", "Type", "ProcessedAt"}, fields...) {
		f := meta.FieldByName(name).Interface().(respjson.Field)
		if !f.Valid() {
			t.Errorf("%s: %s did not parse: raw %q", what, name, f.Raw())
		}
	}
	if raw := meta.FieldByName("ProcessedAt").Interface().(respjson.Field).Raw(); !rfc3339UTC.MatchString(raw) {
		t.Errorf("%s: processed_at %s is not RFC 3339 UTC", what, raw)
	}
}

func (c *compat) ceTestListSendStream(t *testing.T) {
	sess, token := c.ceSession(t, "ce-events")
	sc := c.client(token)
	ctx, cancel := context.WithTimeout(context.Background(), ceBound)
	defer cancel()

	// The stream answers at once; what is appended after it opened arrives.
	stream := sc.Beta.Sessions.Events.StreamEvents(ctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if err := stream.Err(); err != nil {
		t.Fatalf("StreamEvents: %v", err)
	}
	got := make(chan anthropic.BetaManagedAgentsStreamSessionEventsUnion, 16)
	streamErr := make(chan error, 1)
	go func() {
		defer close(got)
		for stream.Next() {
			got <- stream.Current()
		}
		streamErr <- stream.Err()
	}()
	next := func(what string) anthropic.BetaManagedAgentsStreamSessionEventsUnion {
		t.Helper()
		select {
		case ev, ok := <-got:
			if !ok {
				t.Fatalf("%s: the stream ended: %v", what, <-streamErr)
			}
			return ev
		case <-time.After(ceBound):
			t.Fatalf("%s: nothing on the stream within %s", what, ceBound)
		}
		panic("unreachable")
	}

	ids := c.cePost(t, sess.ID, map[string]any{"type": "agent.tool_use", "name": "write",
		"input": map[string]any{"file_path": "/mnt/memory/notes/a.md", "content": "hello"}, "evaluated_permission": "allow"})
	use := ids[0]
	idle := c.cePost(t, sess.ID, map[string]any{"type": "session.status_idle", "stop_reason": map[string]any{"type": "requires_action", "event_ids": []string{use}}})[0]

	// The session's token answers with the SDK's own send params.
	sent := must(sc.Beta.Sessions.Events.Send(callCtx(t), sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserToolResult: &anthropic.BetaManagedAgentsUserToolResultEventParams{
			ToolUseID: use, IsError: param.NewOpt(false),
			Content: []anthropic.BetaManagedAgentsUserToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "wrote a.md"}}},
		}}}}))(t)
	checkParsed(t, "send answer", sent)
	if len(sent.Data) != 1 {
		t.Fatalf("send answered %s", sent.RawJSON())
	}
	res := sent.Data[0].AsUserToolResult()
	ceCheck(t, "sent result", &res, "ToolUseID", "Content", "IsError")
	if res.ToolUseID != use || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "wrote a.md" || !strings.HasPrefix(res.ID, "sevt_") {
		t.Errorf("sent result %s", res.RawJSON())
	}

	ev := next("the tool use")
	tu := ev.AsAgentToolUse()
	ceCheck(t, "streamed tool use", &tu, "Input", "Name", "EvaluatedPermission")
	if tu.ID != use || tu.Name != "write" || tu.Input["file_path"] != "/mnt/memory/notes/a.md" || tu.EvaluatedPermission != "allow" {
		t.Errorf("streamed tool use %s", tu.RawJSON())
	}
	ev = next("the idle")
	if id := ev.AsSessionStatusIdle(); ev.Type != "session.status_idle" || id.ID != idle || ev.StopReason.Type != "requires_action" || !slices.Equal(ev.StopReason.EventIDs, []string{use}) {
		t.Errorf("streamed idle %s", ev.RawJSON())
	}
	if ev = next("the result"); ev.Type != "user.tool_result" || ev.ToolUseID != use || ev.ID != res.ID {
		t.Errorf("streamed result %s", ev.RawJSON())
	}

	// The list, paged by the SDK in both orders and filtered by type.
	var asc []string
	for _, e := range drain(t, sc.Beta.Sessions.Events.ListAutoPaging(callCtx(t), sess.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1)})) {
		asc = append(asc, e.ID)
		if e.Type == "agent.tool_use" {
			u := e.AsAgentToolUse()
			ceCheck(t, "listed tool use", &u, "Input", "Name", "EvaluatedPermission")
		}
	}
	if want := []string{use, idle, res.ID}; !slices.Equal(asc, want) {
		t.Errorf("listed %q, want %q", asc, want)
	}
	var desc []string
	for _, e := range drain(t, sc.Beta.Sessions.Events.ListAutoPaging(callCtx(t), sess.ID, anthropic.BetaSessionEventListParams{
		Limit: anthropic.Int(2), Order: anthropic.BetaSessionEventListParamsOrderDesc})) {
		desc = append(desc, e.ID)
	}
	if want := []string{res.ID, idle, use}; !slices.Equal(desc, want) {
		t.Errorf("listed newest first %q, want %q", desc, want)
	}
	typed := drain(t, sc.Beta.Sessions.Events.ListAutoPaging(callCtx(t), sess.ID, anthropic.BetaSessionEventListParams{
		Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.tool_use", "user.tool_result"}}))
	if len(typed) != 2 || typed[0].ID != use || typed[1].ID != res.ID {
		t.Errorf("types filter listed %d events", len(typed))
	}

	// Refusals reach the SDK as the errors it expects, sent once.
	c.requests()
	_, err := sc.Beta.Sessions.Events.Send(callCtx(t), sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "hi"}}}}}}})
	c.wantAPIError(t, err, 403, "permission_error")
	_, err = sc.Beta.Sessions.Events.Send(callCtx(t), sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserToolResult: &anthropic.BetaManagedAgentsUserToolResultEventParams{ToolUseID: "sevt_nope"}}}})
	c.wantAPIError(t, err, 400, "invalid_request_error")
	_, err = c.sdk.Beta.Sessions.Events.List(callCtx(t), "sesn_nope", anthropic.BetaSessionEventListParams{})
	c.wantAPIError(t, err, 404, "not_found_error")

	// Archiving delivers session.status_terminated, then the stream ends cleanly.
	must(c.sdk.Beta.Sessions.Archive(callCtx(t), sess.ID, anthropic.BetaSessionArchiveParams{}))(t)
	ev = next("the termination")
	term := ev.AsSessionStatusTerminated()
	ceCheck(t, "streamed termination", &term)
	if ev.Type != "session.status_terminated" {
		t.Fatalf("after the archive the stream sent %s", ev.RawJSON())
	}
	select {
	case _, ok := <-got:
		if ok {
			t.Fatal("the stream went on after session.status_terminated")
		}
		if err := <-streamErr; err != nil {
			t.Errorf("the stream ended with %v, want a clean end", err)
		}
	case <-time.After(ceBound):
		t.Fatal("the stream did not end after session.status_terminated")
	}
}

func (c *compat) ceTestToolRunner(t *testing.T) {
	sess, token := c.ceSession(t, "ce-runner")
	dir := t.TempDir()
	tools := agenttoolset.BetaAgentToolset20260401(&agenttoolset.AgentToolContext{Workdir: dir})
	defer agenttoolset.CloseAll(tools)
	ctx, cancel := context.WithTimeout(context.Background(), 2*ceBound)
	defer cancel()
	off := time.Duration(0) // no idle timeout: only the termination ends it
	sc := c.client(token)
	runner := sc.Beta.Sessions.Events.NewToolRunner(ctx, sess.ID, anthropic.SessionToolRunnerOptions{
		Tools: tools, MaxIdle: &off, Logger: ceLogger(t)})
	defer runner.Close()
	calls := make(chan anthropic.DispatchedToolCall, 4)
	done := make(chan error, 1)
	go func() {
		for runner.Next() {
			calls <- runner.Current()
		}
		done <- runner.Err()
	}()

	target := filepath.Join(dir, "hello.txt")
	use := c.cePost(t, sess.ID, map[string]any{"type": "agent.tool_use", "name": "write",
		"input": map[string]any{"file_path": target, "content": "hi from the agent\n"}, "evaluated_permission": "allow"})[0]
	var call anthropic.DispatchedToolCall
	select {
	case call = <-calls:
	case err := <-done:
		t.Fatalf("the runner ended before running the tool: %v", err)
	case <-time.After(ceBound):
		t.Fatal("the runner ran no tool")
	}
	if call.ToolUseID != use || call.Name != "write" || call.IsError || !call.Posted {
		t.Fatalf("dispatched %+v, want write of %s posted without error", call, use)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "hi from the agent\n" {
		t.Fatalf("the write tool left %q, %v", b, err)
	}
	var result *anthropic.BetaManagedAgentsUserToolResultEvent
	for _, e := range drain(t, c.sdk.Beta.Sessions.Events.ListAutoPaging(callCtx(t), sess.ID, anthropic.BetaSessionEventListParams{})) {
		if e.Type == "user.tool_result" {
			r := e.AsUserToolResult()
			result = &r
		}
	}
	if result == nil || result.ToolUseID != use || result.IsError || len(result.Content) == 0 {
		t.Fatalf("the log holds no result for %s: %+v", use, result)
	}

	// Archiving the session ends the runner as the SDK defines it.
	must(c.sdk.Beta.Sessions.Archive(callCtx(t), sess.ID, anthropic.BetaSessionArchiveParams{}))(t)
	select {
	case err := <-done:
		if !errors.Is(err, anthropic.ErrSessionTerminated) {
			t.Fatalf("the runner ended with %v, want ErrSessionTerminated", err)
		}
	case <-time.After(ceBound):
		t.Fatal("the runner did not end after the archive")
	}
}

func (c *compat) ceTestEnvironmentWorker(t *testing.T, root string) {
	st := c.newStore(t, "ew notes")
	c.newMemory(t, st.ID, "/hello.md", "hello from the store\n")
	env, key := c.cwNewEnv(t, "ce-worker")
	sess := must(c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{cwMemoryStore(st.ID, "", "")}}))(t)
	mount := sess.Resources[0].MountPath
	if !strings.HasPrefix(mount, root+"/") {
		t.Fatalf("mount path %q is not under the memory root %s", mount, root)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := time.Hour
	w := environments.NewEnvironmentWorker(c.sdk, environments.EnvironmentWorkerOptions{
		EnvironmentID: env.ID, EnvironmentKey: key, Workdir: t.TempDir(), MaxIdle: &long, Logger: ceLogger(t)})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()

	// The worker downloads the store to its mount path.
	waitFor(t, "the store's download", func() bool {
		b, err := os.ReadFile(filepath.Join(mount, "hello.md"))
		return err == nil && string(b) == "hello from the store\n"
	})
	// The agent writes a note; the worker's tool runner runs it and answers.
	use := c.cePost(t, sess.ID, map[string]any{"type": "agent.tool_use", "name": "write",
		"input": map[string]any{"file_path": filepath.Join(mount, "new.md"), "content": "written by the agent\n"}, "evaluated_permission": "allow"})[0]
	waitFor(t, "the worker's tool result", func() bool {
		for _, e := range drain(t, c.sdk.Beta.Sessions.Events.ListAutoPaging(callCtx(t), sess.ID, anthropic.BetaSessionEventListParams{
			Types: []anthropic.BetaManagedAgentsSessionEventType{"user.tool_result"}})) {
			if e.ToolUseID == use {
				if e.IsError {
					t.Fatalf("the write failed: %s", e.RawJSON())
				}
				return true
			}
		}
		return false
	})
	// Archiving ends the session: the worker syncs the note into the store
	// with the session's token, then stops its work item.
	must(c.sdk.Beta.Sessions.Archive(callCtx(t), sess.ID, anthropic.BetaSessionArchiveParams{}))(t)
	full := anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull}
	waitFor(t, "the note in the store and the item stopped", func() bool {
		items := drain(t, c.sdk.Beta.Environments.Work.ListAutoPaging(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkListParams{}))
		return len(items) == 1 && items[0].State == "stopped" &&
			slices.Contains(c.listMemories(t, st.ID, full), listed{"memory", "/new.md", "written by the agent\n"})
	})
	var by []string
	for _, v := range drain(t, c.versions().ListAutoPaging(callCtx(t), st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{})) {
		if v.Path == "/new.md" {
			by = append(by, v.CreatedBy.Type+":"+v.CreatedBy.SessionID)
		}
	}
	if want := []string{"session_actor:" + sess.ID}; !slices.Equal(by, want) {
		t.Errorf("the note's versions were made by %q, want %q", by, want)
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("EnvironmentWorker.Run: %v", err)
		}
	case <-time.After(ceBound):
		t.Fatal("EnvironmentWorker.Run did not return after its context ended")
	}
}

// waitFor polls cond until it holds, failing the test after ceBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ceBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, ceBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
