package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/memfs/memfs/test/harness"
)

// TestSDKWorkCompat drives environments, sessions and the work queue of
// memfs serve through the official Go SDK only (its services and its
// lib/environments WorkPoller), on both backends: every response must
// parse into the SDK's types with every field present, and every error
// must be the one the SDK's worker branches on, sent once.
func TestSDKWorkCompat(t *testing.T) {
	onBothBackends(t, func(t *testing.T, db string) {
		c := newCompat(t, harness.StartServe(t, harness.ServeOptions{DB: db}))
		t.Run("Environments", c.cwTestEnvironments)
		t.Run("Sessions", c.cwTestSessions)
		t.Run("Work", c.cwTestWork)
		t.Run("WorkPoller", c.cwTestWorkPoller)
	})
}

// cwExtras checks that the response v (a pointer to an SDK type) carries
// exactly the given fields the SDK doesn't declare, each valid JSON, and
// removes them so that checkParsed can check the rest.
func cwExtras(t *testing.T, what string, v any, names ...string) {
	t.Helper()
	extra := reflect.ValueOf(v).Elem().FieldByName("JSON").FieldByName("ExtraFields")
	var got []string
	for _, k := range extra.MapKeys() {
		got = append(got, k.String())
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("%s: extra fields %q, want %q", what, got, want)
	}
	for _, k := range extra.MapKeys() {
		extra.SetMapIndex(k, reflect.Value{})
	}
}

// cwNewEnv creates a self-hosted environment through the SDK and returns
// it with its environment_key (an extra field, returned only here).
func (c *compat) cwNewEnv(t *testing.T, name string) (*anthropic.BetaEnvironment, string) {
	t.Helper()
	env := must(c.sdk.Beta.Environments.New(callCtx(t), anthropic.BetaEnvironmentNewParams{
		Name:   name,
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}},
	}))(t)
	var key string
	if f, ok := env.JSON.ExtraFields["environment_key"]; !ok || json.Unmarshal([]byte(f.Raw()), &key) != nil || !strings.HasPrefix(key, "sk-memfs-env-") {
		t.Fatalf("environment create answered %s: want an environment_key", env.RawJSON())
	}
	cwExtras(t, "environment create", env, "environment_key")
	checkParsed(t, "environment create", env, "Description", "ArchivedAt")
	if env.Name != name || env.Config.Type != "self_hosted" || !strings.HasPrefix(env.ID, "env_") {
		t.Errorf("environment %s", env.RawJSON())
	}
	return env, key
}

// cwMemoryStore is a session resource param.
func cwMemoryStore(id string, access anthropic.BetaManagedAgentsMemoryStoreResourceParamAccess, instructions string) anthropic.BetaSessionNewParamsResourceUnion {
	p := &anthropic.BetaManagedAgentsMemoryStoreResourceParam{MemoryStoreID: id, Access: access}
	if instructions != "" {
		p.Instructions = anthropic.String(instructions)
	}
	return anthropic.BetaSessionNewParamsResourceUnion{OfMemoryStore: p}
}

// cwCheckSession checks a session's fields (budget and deployment_id
// null, and the named others; the agent a full object, memfs serve's
// default agent when the session was created without one) and returns
// its memory-store resources, each checked too.
func cwCheckSession(t *testing.T, what string, s *anthropic.BetaManagedAgentsSession, nulls ...string) []anthropic.BetaManagedAgentsMemoryStoreResource {
	t.Helper()
	checkParsed(t, what, s, append([]string{"Budget", "DeploymentID"}, nulls...)...)
	checkParsed(t, what+" agent", &s.Agent, "Multiagent")
	if s.Agent.Type != "agent" || s.Agent.ID == "" || s.Agent.Skills == nil || s.Agent.Tools == nil || s.Agent.MCPServers == nil {
		t.Errorf("%s: agent %s, want an agent with skills, tools and mcp_servers arrays", what, s.Agent.RawJSON())
	}
	var out []anthropic.BetaManagedAgentsMemoryStoreResource
	for i, u := range s.Resources {
		if u.Type != "memory_store" || !strings.HasPrefix(u.ID, "sesrsc_") || u.CreatedAt.IsZero() || u.UpdatedAt.IsZero() {
			t.Errorf("%s: resource %d = %s: want type memory_store, an id and timestamps", what, i, u.RawJSON())
		}
		r := u.AsMemoryStore()
		// id, created_at and updated_at belong to the union (every resource
		// type has them), not to the memory_store variant.
		cwExtras(t, what+" resource", &r, "id", "created_at", "updated_at")
		var nulls []string
		if r.JSON.Instructions.Raw() == "null" {
			nulls = append(nulls, "Instructions")
		}
		checkParsed(t, what+" resource", &r, nulls...)
		out = append(out, r)
	}
	return out
}

// cwSecretToken decodes a work item's secret the way lib/environments
// does: base64url (padding optional) of a JSON object; sessions_token.
func cwSecretToken(t *testing.T, secret string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(secret, "="))
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	var s struct {
		SessionsToken string `json:"sessions_token"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.SessionsToken == "" {
		t.Fatalf("secret decodes to %s: want a JSON object with sessions_token", raw)
	}
	return s.SessionsToken
}

// cwWorkNulls names a work item's null timestamps by state.
func cwWorkNulls(state string, secret bool) []string {
	var n []string
	if !secret {
		n = append(n, "Secret")
	}
	switch state {
	case "queued":
		n = append(n, "AcknowledgedAt", "StartedAt", "LatestHeartbeatAt", "StopRequestedAt", "StoppedAt")
	case "starting":
		n = append(n, "StartedAt", "LatestHeartbeatAt", "StopRequestedAt", "StoppedAt")
	case "active":
		n = append(n, "StopRequestedAt", "StoppedAt")
	case "stopping":
		n = append(n, "StoppedAt")
	}
	return n
}

// cwCheckWork checks a work item's fields for its state.
func cwCheckWork(t *testing.T, what string, w *anthropic.BetaSelfHostedWork, state string, secret bool) {
	t.Helper()
	if w == nil {
		t.Fatalf("%s: no work item", what)
	}
	checkParsed(t, what, w, cwWorkNulls(string(w.State), secret)...)
	checkParsed(t, what+" data", &w.Data)
	if string(w.State) != state || w.Type != "work" || !strings.HasPrefix(w.ID, "work_") {
		t.Errorf("%s: %s, want state %s", what, w.RawJSON(), state)
	}
	if !rfc3339UTC.MatchString(`"` + w.CreatedAt + `"`) {
		t.Errorf("%s: created_at %q is not RFC 3339 UTC", what, w.CreatedAt)
	}
}

func (c *compat) cwTestEnvironments(t *testing.T) {
	env, key := c.cwNewEnv(t, "cw-env")
	ek := c.client(key)

	// The environment key reads its own environment; the key isn't shown again.
	got := must(ek.Beta.Environments.Get(callCtx(t), env.ID, anthropic.BetaEnvironmentGetParams{}))(t)
	checkParsed(t, "environment get", got, "Description", "ArchivedAt")
	if got.ID != env.ID || strings.Contains(got.RawJSON(), key) {
		t.Errorf("environment get %s", got.RawJSON())
	}
	var ids []string
	for _, e := range drain(t, c.sdk.Beta.Environments.ListAutoPaging(callCtx(t), anthropic.BetaEnvironmentListParams{Limit: anthropic.Int(1)})) {
		checkParsed(t, "environment list", &e, "Description", "ArchivedAt")
		ids = append(ids, e.ID)
	}
	if !slices.Contains(ids, env.ID) {
		t.Errorf("environment list %q lacks %s", ids, env.ID)
	}
	other, _ := c.cwNewEnv(t, "cw-archived")
	a := must(c.sdk.Beta.Environments.Archive(callCtx(t), other.ID, anthropic.BetaEnvironmentArchiveParams{}))(t)
	checkParsed(t, "environment archive", a, "Description")
	if a.ArchivedAt == "" {
		t.Errorf("archived environment %s has no archived_at", a.RawJSON())
	}
	c.requests()
	_, err := ek.Beta.Environments.Get(callCtx(t), other.ID, anthropic.BetaEnvironmentGetParams{})
	c.wantAPIError(t, err, 403, "permission_error")
}

func (c *compat) cwTestSessions(t *testing.T) {
	env, key := c.cwNewEnv(t, "cw-sessions")
	notes := c.newStore(t, "Team Notes")
	notes2 := c.newStore(t, "team notes")
	s := must(c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{
		EnvironmentID: env.ID,
		Title:         anthropic.String("a session"),
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{
			cwMemoryStore(notes.ID, "", "keep it short"),
			cwMemoryStore(notes2.ID, anthropic.BetaManagedAgentsMemoryStoreResourceParamAccessReadOnly, ""),
		},
	}))(t)
	if s.Title != "a session" {
		t.Errorf("title %q", s.Title)
	}
	rs := cwCheckSession(t, "session create", s, "ArchivedAt")
	if s.Status != "idle" || s.EnvironmentID != env.ID || len(rs) != 2 {
		t.Fatalf("session %s", s.RawJSON())
	}
	type res struct{ store, access, name, mount, instructions string }
	for i, want := range []res{
		{notes.ID, "read_write", "Team Notes", "/mnt/memory/team-notes", "keep it short"},
		{notes2.ID, "read_only", "team notes", "/mnt/memory/team-notes-2", ""},
	} {
		r := rs[i]
		if got := (res{r.MemoryStoreID, string(r.Access), r.Name, r.MountPath, r.Instructions}); got != want {
			t.Errorf("resource %d = %+v, want %+v", i, got, want)
		}
	}

	// The environment key reads the session too.
	ek := c.client(key)
	got := must(ek.Beta.Sessions.Get(callCtx(t), s.ID, anthropic.BetaSessionGetParams{}))(t)
	cwCheckSession(t, "session get (environment key)", got, "ArchivedAt")
	if got.ID != s.ID {
		t.Errorf("session get %s", got.RawJSON())
	}

	// Refusals reach the SDK as the error it expects, sent once.
	c.requests()
	var nine []anthropic.BetaSessionNewParamsResourceUnion
	for range 9 {
		nine = append(nine, cwMemoryStore(c.newStore(t, "s").ID, "", ""))
	}
	c.requests()
	_, err := c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID, Resources: nine})
	c.wantAPIError(t, err, 400, "invalid_request_error")
	_, err = c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{cwMemoryStore(notes.ID, "", ""), cwMemoryStore(notes.ID, "", "")}})
	c.wantAPIError(t, err, 400, "invalid_request_error")
	_, err = ek.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID})
	c.wantAPIError(t, err, 403, "permission_error")
	_, err = c.sdk.Beta.Sessions.Get(callCtx(t), "sesn_nope", anthropic.BetaSessionGetParams{})
	c.wantAPIError(t, err, 404, "not_found_error")

	// Archive ends the session.
	a := must(c.sdk.Beta.Sessions.Archive(callCtx(t), s.ID, anthropic.BetaSessionArchiveParams{}))(t)
	cwCheckSession(t, "session archive", a)
	if a.Status != "terminated" || a.ArchivedAt.IsZero() {
		t.Errorf("archived session %s", a.RawJSON())
	}
}

func (c *compat) cwTestWork(t *testing.T) {
	env, key := c.cwNewEnv(t, "cw-work")
	st := c.newStore(t, "notes")
	ek := c.client(key)
	work := &ek.Beta.Environments.Work

	stats := must(work.Stats(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkStatsParams{}))(t)
	checkParsed(t, "empty stats", stats, "OldestQueuedAt")
	if stats.Type != "work_queue_stats" || stats.Depth != 0 || stats.Pending != 0 || stats.WorkersPolling != 0 {
		t.Errorf("empty stats %s", stats.RawJSON())
	}
	// An empty queue answers null, which the SDK decodes as no item, blocking or not.
	for _, p := range []anthropic.BetaEnvironmentWorkPollParams{{}, {BlockMs: anthropic.Int(50)}} {
		w, err := work.Poll(callCtx(t), env.ID, p)
		if err != nil || (w != nil && w.ID != "") {
			t.Fatalf("empty poll = %+v, %v; want no item", w, err)
		}
	}
	c.requests()
	_, err := work.Poll(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkPollParams{BlockMs: anthropic.Int(1000)})
	c.wantAPIError(t, err, 400, "invalid_request_error")

	sess := must(c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{cwMemoryStore(st.ID, "", "")}}))(t)
	w := must(work.Poll(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkPollParams{BlockMs: anthropic.Int(999), AnthropicWorkerID: anthropic.String("cw-worker")}))(t)
	cwCheckWork(t, "poll", w, "queued", true)
	if w.Data.ID != sess.ID || w.Data.Type != "session" || w.EnvironmentID != env.ID {
		t.Fatalf("polled %s, want %s's item", w.RawJSON(), sess.ID)
	}
	token := cwSecretToken(t, w.Secret)
	stats = must(work.Stats(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkStatsParams{}))(t)
	checkParsed(t, "stats", stats)
	if stats.Depth != 0 || stats.Pending != 1 || stats.WorkersPolling != 1 || !rfc3339UTC.MatchString(`"`+stats.OldestQueuedAt+`"`) {
		t.Errorf("stats with one claimed item %s, want depth 0 pending 1 workers 1 and oldest_queued_at", stats.RawJSON())
	}

	acked := must(work.Ack(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: env.ID}))(t)
	cwCheckWork(t, "ack", acked, "starting", false)

	// The worker's credential from here on is the session token.
	sc := c.client(token)
	s := must(sc.Beta.Sessions.Get(callCtx(t), sess.ID, anthropic.BetaSessionGetParams{}))(t)
	rs := cwCheckSession(t, "session get (session token)", s, "Title", "ArchivedAt")
	if s.Status != "running" || len(rs) != 1 || rs[0].MemoryStoreID != st.ID || rs[0].MountPath != "/mnt/memory/notes" || rs[0].Access != "read_write" {
		t.Errorf("session through its token: %s", s.RawJSON())
	}
	hb := must(sc.Beta.Environments.Work.Heartbeat(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: env.ID, ExpectedLastHeartbeat: anthropic.String("NO_HEARTBEAT")}))(t)
	checkParsed(t, "heartbeat", hb)
	if hb.State != "active" || !hb.LeaseExtended || hb.TTLSeconds != 30 || hb.Type != "work_heartbeat" || hb.LastHeartbeat == "" {
		t.Errorf("first heartbeat %s", hb.RawJSON())
	}

	// A stale echo: 412, sent once, with the lease in the SDK's error details.
	c.requests()
	_, err = sc.Beta.Environments.Work.Heartbeat(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: env.ID, ExpectedLastHeartbeat: anthropic.String("NO_HEARTBEAT")})
	c.wantAPIError(t, err, 412, "invalid_request_error")
	var ae *anthropic.Error
	errors.As(err, &ae)
	d := ae.Details.AsHeartbeatPreconditionFailed()
	cwExtras(t, "412 details", &d, "error_visibility")
	checkParsed(t, "412 details", &d)
	cur := d.CurrentState
	// lease_updated_at: the official server sends it; this SDK version doesn't declare it.
	cwExtras(t, "412 current_state", &cur, "lease_updated_at")
	checkParsed(t, "412 current_state", &cur)
	if ae.Details.ErrorCode != "heartbeat_precondition_failed" || cur.State != "active" || cur.LastHeartbeat != hb.LastHeartbeat || cur.LeaseExtended || cur.TTLSeconds != 30 {
		t.Errorf("412 details %s", ae.Details.RawJSON())
	}

	hb2 := must(sc.Beta.Environments.Work.Heartbeat(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: env.ID, ExpectedLastHeartbeat: anthropic.String(hb.LastHeartbeat), DesiredTTLSeconds: anthropic.Int(20)}))(t)
	checkParsed(t, "heartbeat echo", hb2)
	if hb2.TTLSeconds != 20 || hb2.LastHeartbeat == hb.LastHeartbeat || hb2.State != "active" {
		t.Errorf("second heartbeat %s", hb2.RawJSON())
	}

	// Admin views: get (secret null) and metadata.
	g := must(c.sdk.Beta.Environments.Work.Get(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: env.ID}))(t)
	cwCheckWork(t, "work get", g, "active", false)
	u := must(c.sdk.Beta.Environments.Work.Update(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkUpdateParams{EnvironmentID: env.ID,
		BetaSelfHostedWorkUpdateRequest: anthropic.BetaSelfHostedWorkUpdateRequestParam{Metadata: map[string]string{"k": "v"}}}))(t)
	cwCheckWork(t, "work update", u, "active", false)
	if u.Metadata["k"] != "v" {
		t.Errorf("metadata %v", u.Metadata)
	}
	items := drain(t, work.ListAutoPaging(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkListParams{Limit: anthropic.Int(1)}))
	if len(items) != 1 || items[0].ID != w.ID {
		t.Errorf("work list %d items", len(items))
	}
	for i := range items {
		cwCheckWork(t, "work list", &items[i], "active", false)
	}

	// Stop through the token: {} → stopping, force → stopped, then 409 once.
	sp := must(sc.Beta.Environments.Work.Stop(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: env.ID}))(t)
	cwCheckWork(t, "stop", sp, "stopping", false)
	force := anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: env.ID,
		BetaSelfHostedWorkStopRequest: anthropic.BetaSelfHostedWorkStopRequestParam{Force: anthropic.Bool(true)}}
	sp = must(sc.Beta.Environments.Work.Stop(callCtx(t), w.ID, force))(t)
	cwCheckWork(t, "force stop", sp, "stopped", false)
	c.requests()
	_, err = work.Stop(callCtx(t), w.ID, force)
	c.wantAPIError(t, err, 409, "invalid_request_error")
	// The stopped item's token no longer works.
	_, err = sc.Beta.Sessions.Get(callCtx(t), sess.ID, anthropic.BetaSessionGetParams{})
	c.wantAPIError(t, err, 401, "authentication_error")
	// Poll and ack take the environment key, not the admin key.
	_, err = c.sdk.Beta.Environments.Work.Poll(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkPollParams{})
	c.wantAPIError(t, err, 403, "permission_error")
}

func (c *compat) cwTestWorkPoller(t *testing.T) {
	env, key := c.cwNewEnv(t, "cw-poller")
	sess := must(c.sdk.Beta.Sessions.New(callCtx(t), anthropic.BetaSessionNewParams{EnvironmentID: env.ID}))(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The default poller (block_ms=999, AutoStop on) claims the item and acks it.
	p := environments.NewWorkPoller(ctx, c.sdk, environments.WorkPollerOptions{
		EnvironmentID: env.ID, EnvironmentKey: key, WorkerID: "cw-poller-1", Logger: quiet})
	if !p.Next() {
		t.Fatalf("WorkPoller.Next = false: %v", p.Err())
	}
	w := p.Current()
	cwCheckWork(t, "poller item", w, "queued", true)
	if w.Data.ID != sess.ID {
		t.Fatalf("poller claimed %s, want %s's item", w.RawJSON(), sess.ID)
	}
	cwSecretToken(t, w.Secret)
	g := must(c.sdk.Beta.Environments.Work.Get(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: env.ID}))(t)
	if g.State != "starting" {
		t.Errorf("after the poller's ack the item is %s, want starting", g.State)
	}
	// Close posts the deferred stop {} with the environment key.
	if err := p.Close(); err != nil {
		t.Fatalf("WorkPoller.Close: %v", err)
	}
	if err := p.Err(); err != nil {
		t.Errorf("WorkPoller.Err: %v", err)
	}
	g = must(c.sdk.Beta.Environments.Work.Get(callCtx(t), w.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: env.ID}))(t)
	if g.State != "stopping" || g.StopRequestedAt == "" {
		t.Errorf("after Close the item is %s (stop_requested_at %q), want stopping", g.State, g.StopRequestedAt)
	}

	// A draining, non-blocking poller ends cleanly on the empty queue
	// (the null answer decodes as no work).
	d := environments.NewWorkPoller(ctx, c.sdk, environments.WorkPollerOptions{
		EnvironmentID: env.ID, EnvironmentKey: key, Drain: true, BlockMs: param.Null[int64](), Logger: quiet})
	if d.Next() {
		t.Errorf("draining poller found %s on an empty queue", d.Current().RawJSON())
	}
	if err := d.Err(); err != nil {
		t.Errorf("draining poller: %v", err)
	}
	d.Close()
	ek := c.client(key)
	stats := must(ek.Beta.Environments.Work.Stats(callCtx(t), env.ID, anthropic.BetaEnvironmentWorkStatsParams{}))(t)
	if stats.WorkersPolling != 2 {
		t.Errorf("workers_polling %d after two pollers, want 2", stats.WorkersPolling)
	}

	// A poller with someone else's key fails fatally (a 403 is not retried).
	other, _ := c.cwNewEnv(t, "cw-poller-other")
	bad := environments.NewWorkPoller(ctx, c.sdk, environments.WorkPollerOptions{
		EnvironmentID: other.ID, EnvironmentKey: key, Logger: quiet})
	if bad.Next() {
		t.Error("a poller with the wrong key claimed work")
	}
	var ae *anthropic.Error
	if err := bad.Err(); !errors.As(err, &ae) || ae.StatusCode != 403 {
		t.Errorf("wrong-key poller error %v, want a 403", err)
	}
	bad.Close()
}
