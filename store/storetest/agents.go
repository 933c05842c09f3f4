package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

var agentTests = []test{
	{"CreateGet", testAgentCreateGet},
	{"UpdateMakesVersions", testAgentUpdate},
	{"ListArchive", testAgentListArchive},
	{"SessionAgent", testSessionAgent},
	{"DefaultAgentRace", testDefaultAgentRace},
}

// agentConfig is a validated agent with a tool, a skill and an MCP
// server, as the server hands it to a backend.
func agentConfig(t *testing.T, name string) store.AgentConfig {
	t.Helper()
	cfg := store.AgentConfig{Name: name, System: "be brief", Model: store.AgentModel{ID: "claude-sonnet-5-5"},
		Tools: []json.RawMessage{
			json.RawMessage(`{"type":"agent_toolset_20260401"}`),
			json.RawMessage(`{"type":"mcp_toolset","mcp_server_name":"docs"}`),
		},
		Skills:     []json.RawMessage{json.RawMessage(`{"type":"anthropic","skill_id":"xlsx"}`)},
		MCPServers: []json.RawMessage{json.RawMessage(`{"type":"url","name":"docs","url":"https://mcp.example/docs"}`)},
		Metadata:   map[string]string{"team": "a"}}
	if err := store.ValidateAgentConfig(&cfg); err != nil {
		t.Fatalf("ValidateAgentConfig: %v", err)
	}
	return cfg
}

func newAgent(t *testing.T, b store.Backend, name string) *store.Agent {
	t.Helper()
	a, err := b.CreateAgent(t.Context(), agentConfig(t, name))
	ok(t, err, "CreateAgent "+name)
	return a
}

func agentJSON(a *store.Agent) string { b, _ := json.Marshal(a); return string(b) }

func testAgentCreateGet(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	a := newAgent(t, b, "writer")
	if a.Type != store.TypeAgent || a.Version != 1 || a.ArchivedAt != nil || a.Name != "writer" || len(a.Tools) != 2 ||
		len(a.Skills) != 1 || len(a.MCPServers) != 1 || a.Model.Effort.Type != "high" || a.Model.Speed != "standard" ||
		string(a.ExecutionIdentity) != `{"type":"service_account"}` || string(a.Multiagent) != "null" || a.Metadata["team"] != "a" {
		t.Errorf("created %s, want version 1 with its tools, skills, server, default effort, speed and identity", agentJSON(a))
	}
	got, err := b.GetAgent(ctx, a.ID, 0)
	ok(t, err, "GetAgent")
	v1, err := b.GetAgent(ctx, a.ID, 1)
	ok(t, err, "GetAgent version 1")
	if agentJSON(got) != agentJSON(a) || agentJSON(v1) != agentJSON(a) {
		t.Errorf("GetAgent:\n got  %s\n v1   %s\n want %s", agentJSON(got), agentJSON(v1), agentJSON(a))
	}
	_, err = b.GetAgent(ctx, a.ID, 2)
	wantErr(t, err, store.ErrNotFound, "GetAgent of a version not made")
	_, err = b.GetAgent(ctx, "agent_nope", 0)
	wantErr(t, err, store.ErrNotFound, "GetAgent unknown")

	// Nothing given is still arrays, an object and null on the wire.
	bare := store.AgentConfig{Name: "bare", Model: store.AgentModel{ID: "m"}}
	if err := store.ValidateAgentConfig(&bare); err != nil {
		t.Fatal(err)
	}
	e, err := b.CreateAgent(ctx, bare)
	ok(t, err, "CreateAgent bare")
	var wire map[string]json.RawMessage
	_ = json.Unmarshal([]byte(agentJSON(e)), &wire)
	for k, want := range map[string]string{"tools": "[]", "skills": "[]", "mcp_servers": "[]", "metadata": "{}", "multiagent": "null", "archived_at": "null"} {
		if string(wire[k]) != want {
			t.Errorf("bare agent %s = %s, want %s", k, wire[k], want)
		}
	}
}

func testAgentUpdate(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	a := newAgent(t, b, "writer")
	name, one, five := "editor", int64(1), int64(5)
	up, err := b.UpdateAgent(ctx, a.ID, store.AgentUpdate{Name: &name, Version: &one, Metadata: map[string]*string{"team": nil, "x": &name}})
	ok(t, err, "UpdateAgent")
	if up.Version != 2 || up.Name != "editor" || up.Metadata["team"] != "" || up.Metadata["x"] != "editor" || len(up.Tools) != 2 || !up.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("updated %s, want version 2 named editor, metadata patched, the rest kept", agentJSON(up))
	}
	old, err := b.GetAgent(ctx, a.ID, 1)
	ok(t, err, "GetAgent version 1")
	if old.Name != "writer" || old.Version != 1 {
		t.Errorf("version 1 after the update: %s", agentJSON(old))
	}
	same, err := b.UpdateAgent(ctx, a.ID, store.AgentUpdate{Name: &name})
	ok(t, err, "UpdateAgent that changes nothing")
	if same.Version != 2 {
		t.Errorf("an update that changes nothing made version %d", same.Version)
	}
	_, err = b.UpdateAgent(ctx, a.ID, store.AgentUpdate{Name: &name, Version: &five})
	wantErr(t, err, store.ErrConflict, "UpdateAgent with a stale version")
	none := []json.RawMessage{}
	_, err = b.UpdateAgent(ctx, a.ID, store.AgentUpdate{Tools: &none})
	wantErr(t, err, store.ErrInvalid, "UpdateAgent dropping the toolset its MCP server needs")
	cleared, err := b.UpdateAgent(ctx, a.ID, store.AgentUpdate{Tools: &none, MCPServers: &none, Skills: &none})
	ok(t, err, "UpdateAgent clearing tools, servers and skills")
	if cleared.Version != 3 || len(cleared.Tools)+len(cleared.MCPServers)+len(cleared.Skills) != 0 || cleared.Tools == nil {
		t.Errorf("cleared %s, want version 3 with empty arrays", agentJSON(cleared))
	}
	_, err = b.UpdateAgent(ctx, "agent_nope", store.AgentUpdate{Name: &name})
	wantErr(t, err, store.ErrNotFound, "UpdateAgent unknown")
}

func testAgentListArchive(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	a1, a2, a3 := newAgent(t, b, "one"), newAgent(t, b, "two"), newAgent(t, b, "three")
	name := "two, again"
	_, err := b.UpdateAgent(ctx, a2.ID, store.AgentUpdate{Name: &name})
	ok(t, err, "UpdateAgent")
	list := func(includeArchived bool) []string {
		var names []string
		page := ""
		for range maxPages {
			p, err := b.ListAgents(ctx, store.ListAgentsOptions{Limit: 1, Page: page, IncludeArchived: includeArchived})
			ok(t, err, "ListAgents")
			if len(p.Data) > 1 {
				t.Fatalf("ListAgents limit 1 returned %d", len(p.Data))
			}
			for _, a := range p.Data {
				names = append(names, a.Name)
			}
			if page = p.NextPage; page == "" {
				break
			}
		}
		return names
	}
	equalStrings(t, "agents, newest first, at their current versions", list(false), []string{"three", "two, again", "one"})
	arch, err := b.ArchiveAgent(ctx, a3.ID)
	ok(t, err, "ArchiveAgent")
	if arch.ArchivedAt == nil || arch.Version != 1 {
		t.Errorf("archived %s, want archived_at set, version kept", agentJSON(arch))
	}
	again, err := b.ArchiveAgent(ctx, a3.ID)
	ok(t, err, "ArchiveAgent again")
	if !again.ArchivedAt.Equal(*arch.ArchivedAt) || !again.UpdatedAt.Equal(arch.UpdatedAt) {
		t.Errorf("a second archive changed the agent: %s then %s", agentJSON(arch), agentJSON(again))
	}
	equalStrings(t, "live agents", list(false), []string{"two, again", "one"})
	equalStrings(t, "all agents", list(true), []string{"three", "two, again", "one"})
	_, err = b.UpdateAgent(ctx, a3.ID, store.AgentUpdate{Name: &name})
	wantErr(t, err, store.ErrInvalid, "UpdateAgent of an archived agent")
	_, err = b.ArchiveAgent(ctx, "agent_nope")
	wantErr(t, err, store.ErrNotFound, "ArchiveAgent unknown")
	after := a1.CreatedAt.Add(time.Microsecond)
	p, err := b.ListAgents(ctx, store.ListAgentsOptions{Limit: 10, CreatedLTE: &a1.CreatedAt})
	ok(t, err, "ListAgents created_at[lte]")
	if len(p.Data) != 1 || p.Data[0].ID != a1.ID {
		t.Errorf("created_at[lte] the first: %d agents", len(p.Data))
	}
	p, err = b.ListAgents(ctx, store.ListAgentsOptions{Limit: 10, CreatedGTE: &after, IncludeArchived: true})
	ok(t, err, "ListAgents created_at[gte]")
	for _, a := range p.Data {
		if a.ID == a1.ID {
			t.Errorf("created_at[gte] after the first listed it")
		}
	}
}

func testSessionAgent(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	a := newAgent(t, b, "writer")
	create := func(ref *store.AgentRef) (*store.Session, error) {
		return b.CreateSession(ctx, store.CreateSessionInput{EnvironmentID: env.ID, Agent: ref, MemoryRoot: memoryRoot})
	}
	latest, err := create(&store.AgentRef{ID: a.ID})
	ok(t, err, "CreateSession with an agent id")
	if string(latest.Agent) != string(a.SessionView()) {
		t.Errorf("session agent %s, want %s", latest.Agent, a.SessionView())
	}
	var view map[string]any
	if err := json.Unmarshal(latest.Agent, &view); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"metadata", "created_at", "updated_at", "archived_at"} {
		if _, has := view[k]; has {
			t.Errorf("a session's agent has %s; BetaManagedAgentsSessionAgent has not", k)
		}
	}
	name := "editor"
	a2, err := b.UpdateAgent(ctx, a.ID, store.AgentUpdate{Name: &name})
	ok(t, err, "UpdateAgent")
	pinned, err := create(&store.AgentRef{ID: a.ID, Version: 1})
	ok(t, err, "CreateSession with {id, version 1}")
	now, err := create(&store.AgentRef{ID: a.ID})
	ok(t, err, "CreateSession with the id after an update")
	if string(pinned.Agent) != string(a.SessionView()) || string(now.Agent) != string(a2.SessionView()) {
		t.Errorf("pinned %s / latest %s, want version 1 and version 2", pinned.Agent, now.Agent)
	}
	got, err := b.GetSession(ctx, latest.ID)
	ok(t, err, "GetSession")
	if string(got.Agent) != string(a.SessionView()) {
		t.Errorf("a session made before the update reads %s, want its snapshot of version 1", got.Agent)
	}

	_, err = create(&store.AgentRef{ID: "agent_nope"})
	wantErr(t, err, store.ErrNotFound, "CreateSession with an unknown agent")
	_, err = create(&store.AgentRef{ID: a.ID, Version: 9})
	wantErr(t, err, store.ErrNotFound, "CreateSession with an unknown version")
	gone := newAgent(t, b, "gone")
	_, err = b.ArchiveAgent(ctx, gone.ID)
	ok(t, err, "ArchiveAgent")
	_, err = create(&store.AgentRef{ID: gone.ID})
	wantErr(t, err, store.ErrInvalid, "CreateSession with an archived agent")
	sessions, err := b.ListSessions(ctx, 100, "")
	ok(t, err, "ListSessions")
	if len(sessions.Data) != 3 {
		t.Errorf("refused creates left %d sessions, want 3", len(sessions.Data))
	}

	// Without an agent: the default one, made once, a full object.
	d1, err := create(nil)
	ok(t, err, "CreateSession without an agent")
	d2, err := create(nil)
	ok(t, err, "CreateSession without an agent, again")
	def, err := b.GetAgent(ctx, store.DefaultAgentID, 0)
	ok(t, err, "GetAgent default")
	if string(d1.Agent) != string(def.SessionView()) || string(d2.Agent) != string(def.SessionView()) || def.Version != 1 ||
		def.Metadata[store.DefaultAgentMetaKey] != store.DefaultAgentMetaVal {
		t.Errorf("sessions without an agent: %s, %s; default agent %s", d1.Agent, d2.Agent, agentJSON(def))
	}
	var full struct {
		Type       string            `json:"type"`
		ID         string            `json:"id"`
		Tools      []json.RawMessage `json:"tools"`
		Skills     []json.RawMessage `json:"skills"`
		MCPServers []json.RawMessage `json:"mcp_servers"`
	}
	if err := json.Unmarshal(d1.Agent, &full); err != nil || full.Type != "agent" || full.Tools == nil || full.Skills == nil || full.MCPServers == nil {
		t.Errorf("default session agent %s (%v), want an agent with empty arrays", d1.Agent, err)
	}
}

// testDefaultAgentRace: sessions created at once without an agent make
// the default agent once; every one of them answers it.
func testDefaultAgentRace(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	const n = 8
	agents := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := b.CreateSession(t.Context(), store.CreateSessionInput{EnvironmentID: env.ID, MemoryRoot: memoryRoot})
			if errs[i] = err; err == nil {
				agents[i] = string(s.Agent)
			}
		}()
	}
	wg.Wait()
	def, err := b.GetAgent(t.Context(), store.DefaultAgentID, 0)
	ok(t, err, "GetAgent default")
	for i := range n {
		ok(t, errs[i], "CreateSession without an agent, at once")
		if agents[i] != string(def.SessionView()) {
			t.Errorf("session %d agent %s, want %s", i, agents[i], def.SessionView())
		}
	}
	p, err := b.ListAgents(t.Context(), store.ListAgentsOptions{Limit: 100, IncludeArchived: true})
	ok(t, err, "ListAgents")
	if len(p.Data) != 1 || def.Version != 1 {
		t.Errorf("%d agents after the race (default at version %d), want the default agent once", len(p.Data), def.Version)
	}
}
