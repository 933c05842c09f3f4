package test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/memfs/memfs/store"
)

// TestSessionsCreateAgent: `memfs sessions create` names an agent in
// every session it creates, as the hosted API requires: memfs's default
// agent (metadata memfs=default), made by the first run and reused by
// the next, or --agent. A proxy in front of a real memfs serve records
// the session creates the command sends; the sessions answer the agent
// as a full object.
func TestSessionsCreateAgent(t *testing.T) {
	t.Parallel()
	e := newWkEnvAt(t, nil)
	target, err := url.Parse(e.serve.URL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent []map[string]json.RawMessage // GUARDED_BY(mu): the bodies of POST /v1/sessions
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/sessions" {
			b, _ := io.ReadAll(r.Body)
			var body map[string]json.RawMessage
			_ = json.Unmarshal(b, &body)
			mu.Lock()
			sent = append(sent, body)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	create := func(extra ...string) (code int, sess store.Session, stderr string) {
		t.Helper()
		args := append([]string{"sessions", "create", "--json", "--environment", e.envID, "--api-url", proxy.URL, "--api-key", e.serve.AdminKey}, extra...)
		code, stdout, stderr := wkRun(t, nil, args...)
		if code == 0 {
			if err := json.Unmarshal([]byte(stdout), &sess); err != nil {
				t.Fatalf("memfs sessions create --json printed %q: %v", stdout, err)
			}
		}
		return code, sess, stderr
	}
	agentOf := func(s store.Session) (id string, version int64) {
		var a struct {
			Type       string            `json:"type"`
			ID         string            `json:"id"`
			Version    int64             `json:"version"`
			Skills     []json.RawMessage `json:"skills"`
			Tools      []json.RawMessage `json:"tools"`
			MCPServers []json.RawMessage `json:"mcp_servers"`
		}
		if err := json.Unmarshal(s.Agent, &a); err != nil || a.Type != "agent" || a.Skills == nil || a.Tools == nil || a.MCPServers == nil {
			t.Errorf("session %s agent %s: want a full agent object", s.ID, s.Agent)
		}
		return a.ID, a.Version
	}

	code, first, stderr := create()
	if code != 0 {
		t.Fatalf("memfs sessions create: exit %d: %s", code, stderr)
	}
	code, second, stderr := create()
	if code != 0 {
		t.Fatalf("memfs sessions create again: exit %d: %s", code, stderr)
	}
	id1, _ := agentOf(first)
	id2, _ := agentOf(second)
	def, err := e.admin.GetAgent(t.Context(), id1)
	if err != nil || id1 != id2 || def.Metadata[store.DefaultAgentMetaKey] != store.DefaultAgentMetaVal {
		t.Errorf("two runs: agents %s and %s (%+v, %v); want one default agent, reused", id1, id2, def, err)
	}
	page, err := e.admin.ListAgents(t.Context(), 100, "")
	if err != nil || len(page.Data) != 1 {
		t.Errorf("agents after two runs: %+v, %v; want the one default agent", page.Data, err)
	}

	mine, err := e.admin.CreateAgent(t.Context(), map[string]any{"name": "mine", "model": "claude-sonnet-5-5"})
	if err != nil {
		t.Fatal(err)
	}
	code, third, stderr := create("--agent", mine.ID)
	if id, v := agentOf(third); code != 0 || id != mine.ID || v != 1 {
		t.Errorf("--agent %s: exit %d, agent %s version %d: %s", mine.ID, code, id, v, stderr)
	}
	code, _, stderr = create("--agent", "agent_nope")
	if code != 1 || !strings.Contains(stderr, "agent agent_nope not found") || strings.Contains(stderr, "<nil>") {
		t.Errorf("--agent agent_nope: exit %d, stderr %q; want exit 1 saying the agent is not found", code, stderr)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{`"` + id1 + `"`, `"` + id1 + `"`, `"` + mine.ID + `"`, `"agent_nope"`}
	if len(sent) != len(want) {
		t.Fatalf("the command sent %d session creates, want %d", len(sent), len(want))
	}
	for i, body := range sent {
		if string(body["agent"]) != want[i] {
			t.Errorf("session create %d sent agent %s, want %s", i+1, body["agent"], want[i])
		}
	}
}
