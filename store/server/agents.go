package server

import (
	"encoding/json"
	"net/http"

	"github.com/memfs/memfs/store"
)

// Agents: /v1/agents as the SDK's BetaAgentService calls it (admin key).
// An update that changes something makes the next version; GET takes
// ?version= to read an older one.

type createAgentBody struct {
	Name              *string           `json:"name"`
	Description       *string           `json:"description"`
	System            *string           `json:"system"`
	Model             json.RawMessage   `json:"model"`
	Tools             json.RawMessage   `json:"tools"`
	Skills            json.RawMessage   `json:"skills"`
	MCPServers        json.RawMessage   `json:"mcp_servers"`
	Metadata          map[string]string `json:"metadata"`
	ExecutionIdentity json.RawMessage   `json:"execution_identity"`
	Multiagent        json.RawMessage   `json:"multiagent"`
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	var fields map[string]json.RawMessage
	if err := decodeBody(r, &fields); err != nil {
		return 0, nil, err
	}
	if err := knownAgentFields(fields, "create"); err != nil {
		return 0, nil, err
	}
	// The body is read once, as fields (checked) and then as the struct.
	var body createAgentBody
	b, _ := json.Marshal(fields)
	if err := json.Unmarshal(b, &body); err != nil {
		return 0, nil, store.Errorf(store.ErrInvalid, "request body is not valid JSON for this endpoint: %v", err)
	}
	if body.Name == nil {
		return 0, nil, store.Errorf(store.ErrInvalid, "name is required")
	}
	cfg := store.AgentConfig{Name: *body.Name, Metadata: body.Metadata}
	if body.Description != nil {
		cfg.Description = *body.Description
	}
	if body.System != nil {
		cfg.System = *body.System
	}
	var err error
	if cfg.Model, err = store.ParseAgentModel(body.Model); err != nil {
		return 0, nil, err
	}
	if cfg.Tools, err = store.ParseAgentArray("tools", body.Tools); err != nil {
		return 0, nil, err
	}
	if cfg.Skills, err = store.ParseAgentArray("skills", body.Skills); err != nil {
		return 0, nil, err
	}
	if cfg.MCPServers, err = store.ParseAgentArray("mcp_servers", body.MCPServers); err != nil {
		return 0, nil, err
	}
	if cfg.ExecutionIdentity, err = store.ParseExecutionIdentity(body.ExecutionIdentity); err != nil {
		return 0, nil, err
	}
	if cfg.Multiagent, err = store.ParseMultiagent(body.Multiagent); err != nil {
		return 0, nil, err
	}
	if err := store.ValidateAgentConfig(&cfg); err != nil {
		return 0, nil, err
	}
	a, err := s.b.CreateAgent(r.Context(), cfg)
	return http.StatusOK, a, err
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	version := q.intIn("version", 0, 1, 1<<53)
	if q.err != nil {
		return 0, nil, q.err
	}
	a, err := s.b.GetAgent(r.Context(), r.PathValue("agent_id"), version)
	return http.StatusOK, a, err
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	opts := store.ListAgentsOptions{
		Limit: q.limit(), Page: q.str("page"), IncludeArchived: q.boolean("include_archived"),
		CreatedGTE: q.time("created_at[gte]"), CreatedLTE: q.time("created_at[lte]"),
	}
	if q.err != nil {
		return 0, nil, q.err
	}
	page, err := s.b.ListAgents(r.Context(), opts)
	return http.StatusOK, page, err
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	// Decoded field by field: an omitted field is left alone and a null
	// one cleared, which one struct can't tell apart.
	var body map[string]json.RawMessage
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	upd, err := parseAgentUpdate(body)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.b.UpdateAgent(r.Context(), r.PathValue("agent_id"), upd)
	return http.StatusOK, a, err
}

// parseAgentUpdate reads BetaAgentUpdateParams: description and system
// are cleared by null or ""; name and model can't be cleared; tools,
// skills and mcp_servers are replaced whole (null or [] clears);
// metadata is a patch; execution_identity null restores the default;
// multiagent null clears it; version is a precondition (≥ 1).
func parseAgentUpdate(body map[string]json.RawMessage) (store.AgentUpdate, error) {
	var upd store.AgentUpdate
	str := func(field string) (*string, error) {
		raw, ok := body[field]
		if !ok {
			return nil, nil
		}
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, store.Errorf(store.ErrInvalid, "%s must be a string or null", field)
		}
		if v == nil {
			v = new(string)
		}
		return v, nil
	}
	arr := func(field string) (*[]json.RawMessage, error) {
		raw, ok := body[field]
		if !ok {
			return nil, nil
		}
		v, err := store.ParseAgentArray(field, raw)
		return &v, err
	}
	var err error
	if err := knownAgentFields(body, "update"); err != nil {
		return upd, err
	}
	if upd.Name, err = str("name"); err != nil {
		return upd, err
	}
	if raw, ok := body["name"]; ok && string(raw) == "null" {
		return upd, store.Errorf(store.ErrInvalid, "name can't be cleared")
	}
	if upd.Description, err = str("description"); err != nil {
		return upd, err
	}
	if upd.System, err = str("system"); err != nil {
		return upd, err
	}
	if raw, ok := body["model"]; ok {
		m, err := store.ParseAgentModel(raw)
		if err != nil {
			return upd, err
		}
		upd.Model = &m
	}
	if upd.Tools, err = arr("tools"); err != nil {
		return upd, err
	}
	if upd.Skills, err = arr("skills"); err != nil {
		return upd, err
	}
	if upd.MCPServers, err = arr("mcp_servers"); err != nil {
		return upd, err
	}
	if raw, ok := body["metadata"]; ok {
		if err := json.Unmarshal(raw, &upd.Metadata); err != nil {
			return upd, store.Errorf(store.ErrInvalid, "metadata must be an object of strings (null deletes a key)")
		}
		patch := map[string]string{}
		for k, v := range upd.Metadata {
			patch[k] = ""
			if v != nil {
				patch[k] = *v
			}
		}
		if len(patch) <= store.MaxMetadataPairs {
			if err := store.ValidateMetadata(patch); err != nil {
				return upd, err
			}
		}
	}
	if raw, ok := body["execution_identity"]; ok {
		if upd.ExecutionIdentity, err = store.ParseExecutionIdentity(raw); err != nil {
			return upd, err
		}
	}
	if raw, ok := body["multiagent"]; ok {
		if upd.Multiagent, err = store.ParseMultiagent(raw); err != nil {
			return upd, err
		}
	}
	if raw, ok := body["version"]; ok {
		var v int64
		if err := json.Unmarshal(raw, &v); err != nil || v < 1 {
			return upd, store.Errorf(store.ErrInvalid, "version must be an integer of at least 1")
		}
		upd.Version = &v
	}
	return upd, nil
}

func (s *Server) archiveAgent(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	a, err := s.b.ArchiveAgent(r.Context(), r.PathValue("agent_id"))
	return http.StatusOK, a, err
}

// knownAgentFields refuses a field BetaAgentNewParams (or, for an update,
// BetaAgentUpdateParams, which adds version) does not have: a misspelt
// field would otherwise be dropped without a word.
func knownAgentFields(body map[string]json.RawMessage, op string) error {
	for field := range body {
		switch field {
		case "name", "description", "system", "model", "tools", "skills", "mcp_servers", "metadata", "execution_identity", "multiagent":
		case "version":
			if op == "update" {
				continue
			}
			fallthrough
		default:
			return store.Errorf(store.ErrInvalid, "%s: unknown field of an agent %s", field, op)
		}
	}
	return nil
}
