package test

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memfs/memfs/test/harness"
)

// TestSDKAgentsCompat drives /v1/agents of a real memfs serve through the
// official Go SDK's own client and types, on both backends: create, get,
// update (a new version), list and archive parse into
// BetaManagedAgentsAgent with every field present, and a session created
// with the agent (by id, or by {type, id, version}) answers the full
// agent, whose skills, tools and mcp_servers an SDK walks.
func TestSDKAgentsCompat(t *testing.T) {
	onBothBackends(t, func(t *testing.T, db string) {
		c := newCompat(t, harness.StartServe(t, harness.ServeOptions{DB: db}))
		c.testAgents(t)
	})
}

func (c *compat) testAgents(t *testing.T) {
	ctx := callCtx(t)
	agents := &c.sdk.Beta.Agents
	a := must(agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:   "writer",
		Model:  anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-5-5"},
		System: anthropic.String("be brief"),
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}},
			{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "docs"}},
		},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: "https://mcp.example/docs"}},
		Skills:     []anthropic.BetaManagedAgentsSkillParamsUnion{{OfAnthropic: &anthropic.BetaManagedAgentsAnthropicSkillParams{SkillID: "xlsx"}}},
		Metadata:   map[string]string{"team": "a"},
	}))(t)
	checkParsed(t, "agent create", a, "ArchivedAt", "Multiagent")
	checkParsed(t, "agent model", &a.Model, "InferenceGeo")
	if a.Type != "agent" || a.Version != 1 || a.Name != "writer" || a.Model.ID != "claude-sonnet-5-5" || a.Model.Effort.Type != "high" ||
		a.Model.Speed != "standard" || a.ExecutionIdentity.Type != "service_account" || len(a.Tools) != 2 || len(a.MCPServers) != 1 ||
		len(a.Skills) != 1 || a.Skills[0].SkillID != "xlsx" || a.Skills[0].Version != "latest" || a.Metadata["team"] != "a" {
		t.Errorf("agent create answered %s", a.RawJSON())
	}

	up := must(agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: anthropic.String("editor"), Version: anthropic.Int(1)}))(t)
	checkParsed(t, "agent update", up, "ArchivedAt", "Multiagent")
	if up.Version != 2 || up.Name != "editor" || len(up.Tools) != 2 {
		t.Errorf("agent update answered %s", up.RawJSON())
	}
	c.requests() // count from here: an error is answered once, not retried
	_, err := agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: anthropic.String("x"), Version: anthropic.Int(1)})
	c.wantAPIError(t, err, 409, "invalid_request_error")
	v1 := must(agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: anthropic.Int(1)}))(t)
	cur := must(agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{}))(t)
	if v1.Version != 1 || v1.Name != "writer" || cur.Version != 2 || cur.Name != "editor" {
		t.Errorf("get version 1 %s, current %s", v1.RawJSON(), cur.RawJSON())
	}
	c.requests()
	_, err = agents.Get(ctx, "agent_nope", anthropic.BetaAgentGetParams{})
	c.wantAPIError(t, err, 404, "not_found_error")
	other := must(agents.New(ctx, anthropic.BetaAgentNewParams{Name: "other", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "m"}}))(t)
	if other.Tools == nil || other.Skills == nil || other.MCPServers == nil {
		t.Errorf("an agent without tools, skills, servers: %s; want empty arrays", other.RawJSON())
	}
	listed := drain(t, agents.ListAutoPaging(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(1)}))
	if len(listed) != 2 || listed[0].ID != other.ID || listed[1].ID != a.ID || listed[1].Version != 2 {
		t.Errorf("listed %d agents, want other then writer at version 2", len(listed))
	}

	// Sessions made with the agent: the id pins the latest version, the
	// reference the version it names.
	env, _ := c.cwNewEnv(t, "agents")
	byID := must(c.sdk.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}}))(t)
	byRef := must(c.sdk.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfBetaManagedAgentsAgents: &anthropic.BetaManagedAgentsAgentParams{ID: a.ID, Version: anthropic.Int(1)}}}))(t)
	got := must(c.sdk.Beta.Sessions.Get(ctx, byRef.ID, anthropic.BetaSessionGetParams{}))(t)
	for _, tc := range []struct {
		what    string
		s       *anthropic.BetaManagedAgentsSession
		name    string
		version int64
	}{{"by id", byID, "editor", 2}, {"by reference", byRef, "writer", 1}, {"by reference, read back", got, "writer", 1}} {
		sa := tc.s.Agent
		checkParsed(t, "session agent "+tc.what, &sa, "Multiagent")
		if sa.ID != a.ID || sa.Type != "agent" || sa.Name != tc.name || sa.Version != tc.version || sa.Model.ID != "claude-sonnet-5-5" {
			t.Errorf("session %s: agent %s, want %s at version %d", tc.what, sa.RawJSON(), tc.name, tc.version)
		}
		var skills, tools, servers []string
		for _, s := range sa.Skills {
			skills = append(skills, s.Type+":"+s.SkillID)
		}
		for _, tl := range sa.Tools {
			tools = append(tools, tl.Type)
		}
		for _, m := range sa.MCPServers {
			servers = append(servers, m.Name+"="+m.URL)
		}
		equalSlices(t, "session "+tc.what+" skills", skills, []string{"anthropic:xlsx"})
		equalSlices(t, "session "+tc.what+" tools", tools, []string{"agent_toolset_20260401", "mcp_toolset"})
		equalSlices(t, "session "+tc.what+" mcp_servers", servers, []string{"docs=https://mcp.example/docs"})
	}
	c.requests()
	_, err = c.sdk.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String("agent_nope")}})
	c.wantAPIError(t, err, 404, "not_found_error")

	arch := must(agents.Archive(ctx, other.ID, anthropic.BetaAgentArchiveParams{}))(t)
	if arch.ArchivedAt.IsZero() {
		t.Errorf("archive answered %s", arch.RawJSON())
	}
	c.requests()
	_, err = c.sdk.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env.ID,
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(other.ID)}})
	c.wantAPIError(t, err, 400, "invalid_request_error")
	live := drain(t, agents.ListAutoPaging(ctx, anthropic.BetaAgentListParams{}))
	all := drain(t, agents.ListAutoPaging(ctx, anthropic.BetaAgentListParams{IncludeArchived: anthropic.Bool(true)}))
	if len(live) != 1 || len(all) != 2 {
		t.Errorf("%d live and %d agents in all after an archive, want 1 and 2", len(live), len(all))
	}
}

func equalSlices(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s = %q, want %q", what, got, want)
			return
		}
	}
}
