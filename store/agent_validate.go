package store

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Parsing and checking agent fields as BetaAgentNewParams and
// BetaAgentUpdateParams (SDK v2.15.0) define them. Each error names the
// field; nothing is stored unless every field passes.

var (
	agentEfforts     = map[string]bool{"low": true, "medium": true, "high": true, "xhigh": true, "max": true}
	agentSpeeds      = map[string]bool{"standard": true, "fast": true}
	agentToolTypes   = map[string]bool{"agent_toolset_20260401": true, "mcp_toolset": true, "custom": true}
	agentSkillTypes  = map[string]bool{"anthropic": true, "custom": true}
	agentIdentityTyp = map[string]bool{"service_account": true, "aws_role": true}
)

// ParseAgentModel reads a model: a model id string, or a model_config
// object {id, effort?, speed?, inference_geo?} whose effort is a level
// string or {"type": level}. An omitted effort is "" here (a create
// resolves it to the default, an update keeps the stored one).
func ParseAgentModel(raw json.RawMessage) (AgentModel, error) {
	var m AgentModel
	if isNull(raw) {
		return m, invalid("invalid_model", "model is required")
	}
	var id string
	if json.Unmarshal(raw, &id) == nil {
		m.ID = id
	} else {
		var obj struct {
			ID           *string         `json:"id"`
			Effort       json.RawMessage `json:"effort"`
			Speed        *string         `json:"speed"`
			InferenceGeo *string         `json:"inference_geo"`
		}
		if err := strictUnmarshal(raw, &obj); err != nil {
			return m, invalid("invalid_model", "model must be a model id string or an object {id, effort, speed, inference_geo}: %v", err)
		}
		if obj.ID != nil {
			m.ID = *obj.ID
		}
		if !isNull(obj.Effort) {
			var level string
			if json.Unmarshal(obj.Effort, &level) != nil {
				var e AgentEffort
				if json.Unmarshal(obj.Effort, &e) != nil {
					return m, invalid("invalid_model", "model.effort must be a level string or {\"type\": level}")
				}
				level = e.Type
			}
			if !agentEfforts[level] {
				return m, invalid("invalid_model", "model.effort must be one of low, medium, high, xhigh, max, not %q", level)
			}
			m.Effort.Type = level
		}
		if obj.Speed != nil {
			if !agentSpeeds[*obj.Speed] {
				return m, invalid("invalid_model", "model.speed must be standard or fast, not %q", *obj.Speed)
			}
			m.Speed = *obj.Speed
		}
		m.InferenceGeo = obj.InferenceGeo
	}
	if strings.TrimSpace(m.ID) == "" {
		return m, invalid("invalid_model", "model.id is required")
	}
	if m.Speed == "" {
		m.Speed = defaultSpeed
	}
	return m, nil
}

// ParseAgentArray reads tools, skills or mcp_servers: an array of objects
// (null is the empty array).
func ParseAgentArray(field string, raw json.RawMessage) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	if isNull(raw) {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, invalid("invalid_"+field, "%s must be an array of objects", field)
	}
	for i, el := range out {
		var obj map[string]json.RawMessage
		if json.Unmarshal(el, &obj) != nil || obj == nil {
			return nil, invalid("invalid_"+field, "%s[%d] must be an object", field, i)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, el); err == nil {
			out[i] = c.Bytes()
		}
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	return out, nil
}

// ParseExecutionIdentity reads an execution_identity: null or omitted is
// the default, {"type":"service_account"}; aws_role needs role_arn.
func ParseExecutionIdentity(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return json.RawMessage(`{"type":"service_account"}`), nil
	}
	var ei struct {
		Type    string `json:"type"`
		RoleARN string `json:"role_arn"`
	}
	if err := strictUnmarshal(raw, &ei); err != nil || !agentIdentityTyp[ei.Type] {
		return nil, invalid("invalid_execution_identity", `execution_identity must be {"type":"service_account"} or {"type":"aws_role","role_arn":…}`)
	}
	if ei.Type == "aws_role" {
		if ei.RoleARN == "" {
			return nil, invalid("invalid_execution_identity", "execution_identity.role_arn is required for aws_role")
		}
		b, _ := json.Marshal(ei)
		return b, nil
	}
	return json.RawMessage(`{"type":"service_account"}`), nil
}

// ParseMultiagent reads a multiagent configuration: null, or an object
// with a type (kept as sent).
func ParseMultiagent(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return json.RawMessage("null"), nil
	}
	var obj struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Type == "" {
		return nil, invalid("invalid_multiagent", "multiagent must be null or an object with a type")
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return nil, invalid("invalid_multiagent", "multiagent is not valid JSON")
	}
	return c.Bytes(), nil
}

// ParseAgentRef reads a session's agent: the agent id string (its latest
// version) or {"type":"agent","id":…,"version":…} (version ≥ 1, or
// omitted for the latest). ok is false when no agent was given.
func ParseAgentRef(raw json.RawMessage) (ref AgentRef, ok bool, err error) {
	if isNull(raw) {
		return ref, false, nil
	}
	var id string
	if json.Unmarshal(raw, &id) == nil {
		if id == "" {
			return ref, false, invalid("invalid_agent", "agent must be an agent id or {\"type\":\"agent\",\"id\":…,\"version\":…}, not an empty string")
		}
		return AgentRef{ID: id}, true, nil
	}
	var obj struct {
		Type    *string `json:"type"`
		ID      string  `json:"id"`
		Version *int64  `json:"version"`
	}
	if err := strictUnmarshal(raw, &obj); err != nil {
		return ref, false, invalid("invalid_agent", "agent must be an agent id or {\"type\":\"agent\",\"id\":…,\"version\":…}: %v", err)
	}
	if obj.Type != nil && *obj.Type != TypeAgent {
		return ref, false, invalid("invalid_agent", "agent.type must be \"agent\", not %q (memfs serve has no agents with overrides)", *obj.Type)
	}
	if obj.ID == "" {
		return ref, false, invalid("invalid_agent", "agent.id is required")
	}
	ref.ID = obj.ID
	if obj.Version != nil {
		if *obj.Version < 1 {
			return ref, false, invalid("invalid_agent", "agent.version must be at least 1, not %d", *obj.Version)
		}
		ref.Version = *obj.Version
	}
	return ref, true, nil
}

// ValidateAgentConfig checks a whole agent version and fills in defaults:
// a name, a model (effort high and speed standard unless given), tools,
// skills and MCP servers of known types, every MCP server (unique names,
// at most 20) used by an mcp_toolset and every mcp_toolset naming one,
// at most 256 tools, metadata within its limits.
func ValidateAgentConfig(c *AgentConfig) error {
	*c = c.normalized()
	if strings.TrimSpace(c.Name) == "" {
		return invalid("invalid_name", "name is required and can't be empty")
	}
	if len(c.Name) > 256 {
		return invalid("invalid_name", "name is %d bytes; the limit is 256", len(c.Name))
	}
	if strings.TrimSpace(c.Model.ID) == "" {
		return invalid("invalid_model", "model is required")
	}
	if c.Model.Effort.Type == "" {
		c.Model.Effort.Type = defaultEffort
	}
	if c.Model.Speed == "" {
		c.Model.Speed = defaultSpeed
	}
	if err := ValidateMetadata(c.Metadata); err != nil {
		return err
	}
	if len(c.MCPServers) > MaxAgentMCPServers {
		return invalid("too_many_mcp_servers", "an agent can have at most %d MCP servers, not %d", MaxAgentMCPServers, len(c.MCPServers))
	}
	servers := map[string]bool{}
	for i, raw := range c.MCPServers {
		var s struct{ Type, Name, URL string }
		_ = json.Unmarshal(raw, &s)
		if s.Type != "url" || s.Name == "" || s.URL == "" {
			return invalid("invalid_mcp_servers", `mcp_servers[%d] must be {"type":"url","name":…,"url":…}`, i)
		}
		if servers[s.Name] {
			return invalid("invalid_mcp_servers", "mcp_servers[%d]: the name %q is used twice; names must be unique", i, s.Name)
		}
		servers[s.Name] = true
	}
	if len(c.Tools) > MaxAgentTools {
		return invalid("too_many_tools", "an agent can have at most %d tools, not %d", MaxAgentTools, len(c.Tools))
	}
	used := map[string]bool{}
	for i, raw := range c.Tools {
		var t struct {
			Type          string `json:"type"`
			Name          string `json:"name"`
			MCPServerName string `json:"mcp_server_name"`
		}
		_ = json.Unmarshal(raw, &t)
		if !agentToolTypes[t.Type] {
			return invalid("invalid_tools", "tools[%d].type must be agent_toolset_20260401, mcp_toolset or custom, not %q", i, t.Type)
		}
		switch t.Type {
		case "custom":
			if t.Name == "" {
				return invalid("invalid_tools", "tools[%d]: a custom tool needs a name", i)
			}
		case "mcp_toolset":
			if !servers[t.MCPServerName] {
				return invalid("invalid_tools", "tools[%d]: mcp_server_name %q names no server of mcp_servers", i, t.MCPServerName)
			}
			used[t.MCPServerName] = true
		}
	}
	for name := range servers {
		if !used[name] {
			return invalid("invalid_mcp_servers", "MCP server %q is not referenced by an mcp_toolset in tools", name)
		}
	}
	for i, raw := range c.Skills {
		var s struct {
			Type    string `json:"type"`
			SkillID string `json:"skill_id"`
		}
		_ = json.Unmarshal(raw, &s)
		if !agentSkillTypes[s.Type] || s.SkillID == "" {
			return invalid("invalid_skills", `skills[%d] must be {"type":"anthropic"|"custom","skill_id":…,"version"?}`, i)
		}
		// The SDK's skill has a version: an omitted one is the latest.
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && isNull(obj["version"]) {
			obj["version"] = json.RawMessage(`"latest"`)
			c.Skills[i], _ = json.Marshal(obj)
		}
	}
	return nil
}

// strictUnmarshal decodes an object refusing fields v does not have.
func strictUnmarshal(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}
