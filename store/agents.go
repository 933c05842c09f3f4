package store

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// Agents (docs/api.md, "Agents"): the SDK's BetaAgentService (v2.15.0,
// betaagent.go), routes /v1/agents under the managed-agents-2026-04-01
// beta. An agent is versioned: it starts at version 1 and every update
// that changes something makes the next version; a session snapshots the
// version it was created with (BetaManagedAgentsSessionAgent).
//
// memfs keeps an agent's tools, skills and mcp_servers as the JSON the
// client sent, checked for their shape (ValidateAgentConfig): memfs runs
// no model, so it stores an agent to answer it back, as the hosted API
// would, to the SDKs and workers that read it.

// Agent object type, id prefix and the default agent memfs serve answers
// for a session created without one.
const (
	TypeAgent         = "agent"
	PrefixAgent       = "agent_"
	DefaultAgentID    = "agent_memfs_default"
	DefaultAgentName  = "memfs"
	DefaultAgentModel = "claude-sonnet-5-5"
	// DefaultAgentMetaKey marks the default agent memfs's commands make or
	// reuse (metadata memfs=default), on memfs serve and the hosted API alike.
	DefaultAgentMetaKey = "memfs"
	DefaultAgentMetaVal = "default"
	MaxAgentMCPServers  = 20
	MaxAgentTools       = 256
	defaultEffort       = "high"
	defaultSpeed        = "standard"
)

// AgentEffort is a model's effort level, {"type": level} on the wire.
type AgentEffort struct {
	Type string `json:"type"`
}

// AgentModel is BetaManagedAgentsModelConfig: the model and how it runs.
// Effort and Speed are always present (defaults high and standard).
type AgentModel struct {
	ID           string      `json:"id"`
	Effort       AgentEffort `json:"effort"`
	InferenceGeo *string     `json:"inference_geo"`
	Speed        string      `json:"speed"`
}

// AgentConfig is what one version of an agent says: everything but its
// id, version and timestamps. Tools, Skills and MCPServers are never nil.
type AgentConfig struct {
	Name              string            `json:"name"`
	Description       string            `json:"description"`
	System            string            `json:"system"`
	Model             AgentModel        `json:"model"`
	Tools             []json.RawMessage `json:"tools"`
	Skills            []json.RawMessage `json:"skills"`
	MCPServers        []json.RawMessage `json:"mcp_servers"`
	Metadata          map[string]string `json:"metadata"`
	ExecutionIdentity json.RawMessage   `json:"execution_identity"`
	Multiagent        json.RawMessage   `json:"multiagent"`
}

// Agent is an agent at one version (wire type agent, the SDK's
// BetaManagedAgentsAgent).
type Agent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	AgentConfig
	Version    int64      `json:"version"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	ArchivedAt *time.Time `json:"archived_at"`
}

// sessionAgent is BetaManagedAgentsSessionAgent: the agent as a session
// shows it, without metadata and timestamps.
type sessionAgent struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	Name              string            `json:"name"`
	Description       string            `json:"description"`
	System            string            `json:"system"`
	Model             AgentModel        `json:"model"`
	Tools             []json.RawMessage `json:"tools"`
	Skills            []json.RawMessage `json:"skills"`
	MCPServers        []json.RawMessage `json:"mcp_servers"`
	ExecutionIdentity json.RawMessage   `json:"execution_identity"`
	Multiagent        json.RawMessage   `json:"multiagent"`
	Version           int64             `json:"version"`
}

// SessionView is the agent as a session created with it answers it.
func (a *Agent) SessionView() json.RawMessage {
	c := a.AgentConfig.normalized()
	b, _ := json.Marshal(sessionAgent{ID: a.ID, Type: TypeAgent, Name: c.Name, Description: c.Description, System: c.System,
		Model: c.Model, Tools: c.Tools, Skills: c.Skills, MCPServers: c.MCPServers,
		ExecutionIdentity: c.ExecutionIdentity, Multiagent: c.Multiagent, Version: a.Version})
	return b
}

// normalized fills what a stored config may lack with its empty value, so
// the wire always has arrays, an object and a null where the SDK wants them.
func (c AgentConfig) normalized() AgentConfig {
	if c.Tools == nil {
		c.Tools = []json.RawMessage{}
	}
	if c.Skills == nil {
		c.Skills = []json.RawMessage{}
	}
	if c.MCPServers == nil {
		c.MCPServers = []json.RawMessage{}
	}
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	if isNull(c.ExecutionIdentity) {
		c.ExecutionIdentity = json.RawMessage(`{"type":"service_account"}`)
	}
	if len(c.Multiagent) == 0 {
		c.Multiagent = json.RawMessage("null")
	}
	return c
}

// Normalize returns the agent with every array, object and null in place.
func (a Agent) Normalize() Agent {
	a.Type = TypeAgent
	a.AgentConfig = a.AgentConfig.normalized()
	return a
}

// DefaultAgentConfig is the agent memfs's commands make when there is no
// default agent yet (and memfs serve, for a session created without one).
func DefaultAgentConfig() AgentConfig {
	return AgentConfig{
		Name:        DefaultAgentName,
		Description: "memfs's default agent, made by memfs for sessions created without one",
		Model:       AgentModel{ID: DefaultAgentModel, Effort: AgentEffort{Type: defaultEffort}, Speed: defaultSpeed},
		Metadata:    map[string]string{DefaultAgentMetaKey: DefaultAgentMetaVal},
	}.normalized()
}

// AgentRef names the agent a session is created with: an id (Version 0:
// the latest version) or {type:"agent", id, version}.
type AgentRef struct {
	ID      string
	Version int64
}

// AgentUpdate changes an agent (BetaAgentUpdateParams). A nil field is
// left alone; Tools, Skills and MCPServers replace the whole array (an
// empty one clears it); Metadata is a patch (a nil value deletes the
// key); Multiagent "null" clears it. Version, when set, must equal the
// agent's current version.
type AgentUpdate struct {
	Name              *string
	Description       *string
	System            *string
	Model             *AgentModel
	Tools             *[]json.RawMessage
	Skills            *[]json.RawMessage
	MCPServers        *[]json.RawMessage
	Metadata          map[string]*string
	ExecutionIdentity json.RawMessage
	Multiagent        json.RawMessage
	Version           *int64
}

// ListAgentsOptions filter and page an agent listing (newest first).
type ListAgentsOptions struct {
	Limit           int
	Page            string
	IncludeArchived bool
	CreatedGTE      *time.Time
	CreatedLTE      *time.Time
}

// AgentBackend keeps agents and their versions.
type AgentBackend interface {
	CreateAgent(ctx context.Context, cfg AgentConfig) (*Agent, error)
	// GetAgent reads an agent at a version (0: its current one).
	GetAgent(ctx context.Context, id string, version int64) (*Agent, error)
	ListAgents(ctx context.Context, opts ListAgentsOptions) (Page[Agent], error)
	// UpdateAgent applies an update (ApplyAgentUpdate); one that changes
	// something makes the next version, one that changes nothing returns
	// the agent as it is.
	UpdateAgent(ctx context.Context, id string, upd AgentUpdate) (*Agent, error)
	ArchiveAgent(ctx context.Context, id string) (*Agent, error)
}

// setIf sets *dst to *src when an update gives src.
func setIf[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}

// ApplyAgentUpdate is the pure rule of an agent update: the version cur
// becomes, and whether it differs from cur. The result is validated
// (ValidateAgentConfig) as a create is.
func ApplyAgentUpdate(cur AgentConfig, upd AgentUpdate) (AgentConfig, bool, error) {
	next := cur.normalized()
	next.Metadata = make(map[string]string, len(cur.Metadata))
	for k, v := range cur.Metadata {
		next.Metadata[k] = v
	}
	setIf(&next.Name, upd.Name)
	setIf(&next.Description, upd.Description)
	setIf(&next.System, upd.System)
	if upd.Model != nil {
		m := *upd.Model
		if m.Effort.Type == "" { // omitted: the stored effort stays
			m.Effort = cur.Model.Effort
		}
		next.Model = m
	}
	setIf(&next.Tools, upd.Tools)
	setIf(&next.Skills, upd.Skills)
	setIf(&next.MCPServers, upd.MCPServers)
	for k, v := range upd.Metadata {
		if v == nil {
			delete(next.Metadata, k)
		} else {
			next.Metadata[k] = *v
		}
	}
	if upd.ExecutionIdentity != nil {
		next.ExecutionIdentity = upd.ExecutionIdentity
	}
	if upd.Multiagent != nil {
		next.Multiagent = upd.Multiagent
	}
	next = next.normalized()
	if err := ValidateAgentConfig(&next); err != nil {
		return cur, false, err
	}
	a, _ := json.Marshal(cur.normalized())
	b, _ := json.Marshal(next)
	return next, !bytes.Equal(a, b), nil
}

func isNull(b json.RawMessage) bool {
	return len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null"
}
