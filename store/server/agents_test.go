package server_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/memfs/memfs/store"
)

// agentBody is an agent create as the SDK sends it: a model_config, a
// toolset, an MCP server with its toolset and a skill.
func agentBody(name string) map[string]any {
	return map[string]any{
		"name": name, "model": map[string]any{"id": "claude-sonnet-5-5", "effort": "low"}, "system": "be brief",
		"tools": []any{map[string]any{"type": "agent_toolset_20260401"},
			map[string]any{"type": "mcp_toolset", "mcp_server_name": "docs"}},
		"mcp_servers": []any{map[string]any{"type": "url", "name": "docs", "url": "https://mcp.example/docs"}},
		"skills":      []any{map[string]any{"type": "anthropic", "skill_id": "xlsx"}},
		"metadata":    map[string]any{"team": "a"},
	}
}

// TestAgents drives /v1/agents over HTTP: the wire shape of
// BetaManagedAgentsAgent, versions, list and archive, and each refusal
// in the error envelope, on both databases.
func TestAgents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s, _ := startWorkServer(t, dsn)
		var raw map[string]any
		s.request(t, "POST", "/v1/agents", agentBody("writer")).decode(t, &raw)
		wantKeys := []string{"archived_at", "created_at", "description", "execution_identity", "id", "mcp_servers", "metadata",
			"model", "multiagent", "name", "skills", "system", "tools", "type", "updated_at", "version"}
		if got := keysOf(raw); !slices.Equal(got, wantKeys) {
			t.Errorf("agent fields %q, want %q", got, wantKeys)
		}
		model, _ := raw["model"].(map[string]any)
		effort, _ := model["effort"].(map[string]any)
		if raw["type"] != "agent" || raw["version"] != 1.0 || raw["archived_at"] != nil || raw["multiagent"] != nil ||
			effort["type"] != "low" || model["speed"] != "standard" || raw["description"] != "" {
			t.Errorf("created %v", raw)
		}
		id, _ := raw["id"].(string)

		var up store.Agent
		s.request(t, "POST", "/v1/agents/"+id, map[string]any{"name": "editor", "version": 1, "description": nil, "metadata": map[string]any{"team": nil}}).decode(t, &up)
		if up.Version != 2 || up.Name != "editor" || len(up.Metadata) != 0 || len(up.Tools) != 2 {
			t.Errorf("updated %+v, want version 2 named editor, metadata emptied, tools kept", up)
		}
		var v1, cur store.Agent
		s.request(t, "GET", "/v1/agents/"+id+"?version=1", nil).decode(t, &v1)
		s.request(t, "GET", "/v1/agents/"+id+"?beta=true", nil).decode(t, &cur)
		if v1.Version != 1 || v1.Name != "writer" || cur.Version != 2 || cur.Name != "editor" {
			t.Errorf("version 1 %+v, current %+v", v1, cur)
		}
		var list struct {
			Data     []store.Agent `json:"data"`
			NextPage *string       `json:"next_page"`
		}
		s.request(t, "POST", "/v1/agents", agentBody("second")).decode(t, &store.Agent{})
		s.request(t, "GET", "/v1/agents?limit=1", nil).decode(t, &list)
		if len(list.Data) != 1 || list.Data[0].Name != "second" || list.NextPage == nil {
			t.Fatalf("first page %+v, want the newest agent and a next page", list)
		}
		s.request(t, "GET", "/v1/agents?limit=1&page="+*list.NextPage, nil).decode(t, &list)
		if len(list.Data) != 1 || list.Data[0].ID != id || list.Data[0].Version != 2 {
			t.Errorf("second page %+v, want the first agent at version 2", list)
		}
		var arch store.Agent
		s.request(t, "POST", "/v1/agents/"+id+"/archive", nil).decode(t, &arch)
		if arch.ArchivedAt == nil {
			t.Errorf("archived %+v", arch)
		}
		s.request(t, "GET", "/v1/agents", nil).decode(t, &list)
		if len(list.Data) != 1 || list.Data[0].Name != "second" {
			t.Errorf("live agents %+v, want the second only", list.Data)
		}

		for _, tc := range []struct {
			what, method, path string
			body               any
			status             int
			typ                string
		}{
			{"no name", "POST", "/v1/agents", map[string]any{"model": "m"}, 400, "invalid_request_error"},
			{"a name not a string", "POST", "/v1/agents", map[string]any{"name": 7, "model": "m"}, 400, "invalid_request_error"},
			{"a misspelt field", "POST", "/v1/agents", map[string]any{"name": "n", "model": "m", "tool": []any{}}, 400, "invalid_request_error"},
			{"a version in a create", "POST", "/v1/agents", map[string]any{"name": "n", "model": "m", "version": 3}, 400, "invalid_request_error"},
			{"no model", "POST", "/v1/agents", map[string]any{"name": "n"}, 400, "invalid_request_error"},
			{"an unknown effort", "POST", "/v1/agents", map[string]any{"name": "n", "model": map[string]any{"id": "m", "effort": "huge"}}, 400, "invalid_request_error"},
			{"tools an object", "POST", "/v1/agents", map[string]any{"name": "n", "model": "m", "tools": map[string]any{}}, 400, "invalid_request_error"},
			{"an unknown tool type", "POST", "/v1/agents", map[string]any{"name": "n", "model": "m", "tools": []any{map[string]any{"type": "bash"}}}, 400, "invalid_request_error"},
			{"an MCP server no toolset uses", "POST", "/v1/agents", map[string]any{"name": "n", "model": "m",
				"mcp_servers": []any{map[string]any{"type": "url", "name": "x", "url": "https://x"}}}, 400, "invalid_request_error"},
			{"an unknown agent", "GET", "/v1/agents/agent_nope", nil, 404, "not_found_error"},
			{"a version not made", "GET", "/v1/agents/" + id + "?version=7", nil, 404, "not_found_error"},
			{"version 0", "GET", "/v1/agents/" + id + "?version=0", nil, 400, "invalid_request_error"},
			{"an update of an archived agent", "POST", "/v1/agents/" + id, map[string]any{"name": "x"}, 400, "invalid_request_error"},
			{"a stale version", "POST", "/v1/agents/" + list.Data[0].ID, map[string]any{"name": "x", "version": 5}, 409, "invalid_request_error"},
			{"a name cleared", "POST", "/v1/agents/" + list.Data[0].ID, map[string]any{"name": nil}, 400, "invalid_request_error"},
			{"an unknown field", "POST", "/v1/agents/" + list.Data[0].ID, map[string]any{"colour": "red"}, 400, "invalid_request_error"},
			{"archive an unknown agent", "POST", "/v1/agents/agent_nope/archive", nil, 404, "not_found_error"},
		} {
			wantError(t, tc.what, s.request(t, tc.method, tc.path, tc.body), tc.status, tc.typ)
		}

		_, envKey := s.newEnv(t, "agents")
		wantError(t, "an environment key creating an agent", s.requestWith(t, "POST", "/v1/agents", agentBody("x"), bearer(envKey)), 403, "permission_error")
	})
}

// TestSessionAgentObject: a session answers its agent as the full object
// of the version it was created with, from the id or the {type, id,
// version} reference, with skills, tools and mcp_servers arrays; an
// unknown agent is a 404 that creates nothing.
func TestSessionAgentObject(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s, _ := startWorkServer(t, dsn)
		env, _ := s.newEnv(t, "env")
		var a store.Agent
		s.request(t, "POST", "/v1/agents", agentBody("writer")).decode(t, &a)
		s.request(t, "POST", "/v1/agents/"+a.ID, map[string]any{"name": "editor"}).decode(t, &store.Agent{})
		type sessionAgent struct {
			Type       string            `json:"type"`
			ID         string            `json:"id"`
			Name       string            `json:"name"`
			Version    int64             `json:"version"`
			Skills     []json.RawMessage `json:"skills"`
			Tools      []json.RawMessage `json:"tools"`
			MCPServers []json.RawMessage `json:"mcp_servers"`
		}
		create := func(agent any) sessionAgent {
			t.Helper()
			var sess struct {
				ID    string       `json:"id"`
				Agent sessionAgent `json:"agent"`
			}
			s.request(t, "POST", "/v1/sessions", map[string]any{"environment_id": env.ID, "agent": agent}).decode(t, &sess)
			var again struct {
				Agent sessionAgent `json:"agent"`
			}
			s.request(t, "GET", "/v1/sessions/"+sess.ID, nil).decode(t, &again)
			if g, c := mustJSON(again.Agent), mustJSON(sess.Agent); g != c {
				t.Errorf("session get %+v, create %+v", again.Agent, sess.Agent)
			}
			return sess.Agent
		}
		for _, tc := range []struct {
			what    string
			agent   any
			name    string
			version int64
		}{
			{"the id", a.ID, "editor", 2},
			{"a reference without a version", map[string]any{"type": "agent", "id": a.ID}, "editor", 2},
			{"a reference to version 1", map[string]any{"type": "agent", "id": a.ID, "version": 1}, "writer", 1},
		} {
			got := create(tc.agent)
			if got.Type != "agent" || got.ID != a.ID || got.Name != tc.name || got.Version != tc.version ||
				len(got.Skills) != 1 || len(got.Tools) != 2 || len(got.MCPServers) != 1 {
				t.Errorf("created with %s: agent %+v, want %s at version %d with its skill, tools and server", tc.what, got, tc.name, tc.version)
			}
		}
		for _, tc := range []struct {
			what   string
			agent  any
			status int
			typ    string
		}{
			{"an unknown agent id", "agent_nope", 404, "not_found_error"},
			{"an unknown version", map[string]any{"type": "agent", "id": a.ID, "version": 9}, 404, "not_found_error"},
			{"version 0", map[string]any{"type": "agent", "id": a.ID, "version": 0}, 400, "invalid_request_error"},
			{"an empty id", "", 400, "invalid_request_error"},
			{"a number", 7, 400, "invalid_request_error"},
			{"another type", map[string]any{"type": "agent_with_overrides", "id": a.ID}, 400, "invalid_request_error"},
		} {
			wantError(t, "a session with "+tc.what, s.request(t, "POST", "/v1/sessions", map[string]any{"environment_id": env.ID, "agent": tc.agent}), tc.status, tc.typ)
		}
		var sessions struct {
			Data []json.RawMessage `json:"data"`
		}
		s.request(t, "GET", "/v1/sessions", nil).decode(t, &sessions)
		if len(sessions.Data) != 3 {
			t.Errorf("refused creates left %d sessions, want 3", len(sessions.Data))
		}
		def := create(nil)
		if def.ID != store.DefaultAgentID || def.Skills == nil || def.Tools == nil || def.MCPServers == nil {
			t.Errorf("a session without an agent: %+v, want the default agent with empty arrays", def)
		}
	})
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
