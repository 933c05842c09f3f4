package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/memfs/memfs/store"
)

// Environments, sessions and the work queue. Poll and Ack take the
// environment key; a session's own calls (GetSession, Heartbeat,
// StopWork, the memory endpoints) take its session token: build one
// Client per credential.

// CreateEnvironmentInput are the fields of a new environment.
type CreateEnvironmentInput struct {
	Name        string            `json:"name"`
	Description *string           `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Config      json.RawMessage   `json:"config,omitempty"`
}

// CreateEnvironment creates an environment; its EnvironmentKey is
// returned only now.
func (c *Client) CreateEnvironment(ctx context.Context, in CreateEnvironmentInput) (*store.Environment, error) {
	if in.Config == nil {
		in.Config = json.RawMessage(`{"type":"self_hosted"}`)
	}
	var e store.Environment
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/environments", body: in}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// GetEnvironment reads an environment.
func (c *Client) GetEnvironment(ctx context.Context, envID string) (*store.Environment, error) {
	var e store.Environment
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/environments/" + url.PathEscape(envID)}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// SessionResourceInput attaches a memory store to a new session.
type SessionResourceInput struct {
	Type          string  `json:"type"`
	MemoryStoreID string  `json:"memory_store_id"`
	Access        string  `json:"access,omitempty"`
	Instructions  *string `json:"instructions,omitempty"`
}

// CreateSessionInput are the fields of a new session.
type CreateSessionInput struct {
	// Agent is the agent id the session runs (its latest version); the
	// hosted API requires one (see EnsureDefaultAgent).
	Agent         string                 `json:"agent,omitempty"`
	EnvironmentID string                 `json:"environment_id"`
	Title         *string                `json:"title,omitempty"`
	Resources     []SessionResourceInput `json:"resources,omitempty"`
}

// CreateSession creates a session, which queues its work item.
func (c *Client) CreateSession(ctx context.Context, in CreateSessionInput) (*store.Session, error) {
	for i := range in.Resources {
		if in.Resources[i].Type == "" {
			in.Resources[i].Type = store.ResourceMemoryStore
		}
	}
	var s store.Session
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/sessions", body: in}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// GetSession reads a session.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*store.Session, error) {
	var s store.Session
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/sessions/" + url.PathEscape(sessionID)}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ArchiveSession ends a session; its work item moves to stopping.
func (c *Client) ArchiveSession(ctx context.Context, sessionID string) (*store.Session, error) {
	var s store.Session
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/sessions/" + url.PathEscape(sessionID) + "/archive"}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func workPath(envID string, parts ...string) string {
	p := "/v1/environments/" + url.PathEscape(envID) + "/work"
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// PollWork claims the next work item, waiting up to block (at most 999
// ms; 0 answers at once). It returns nil when there is none. workerID is
// sent as Anthropic-Worker-ID.
func (c *Client) PollWork(ctx context.Context, envID, workerID string, block time.Duration) (*store.Work, error) {
	q := url.Values{}
	if ms := block.Milliseconds(); ms > 0 {
		q.Set("block_ms", strconv.FormatInt(min(ms, 999), 10))
	}
	var w *store.Work
	err := c.do(ctx, request{method: http.MethodGet, path: workPath(envID, "poll"), query: q,
		header: http.Header{"Anthropic-Worker-ID": []string{workerID}}, extraTimeout: block}, &w)
	return w, err
}

// AckWork acknowledges a claimed item.
func (c *Client) AckWork(ctx context.Context, envID, workID string) (*store.Work, error) {
	var w store.Work
	if err := c.do(ctx, request{method: http.MethodPost, path: workPath(envID, workID, "ack")}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// Heartbeat renews a work item's lease; expected is NO_HEARTBEAT or the
// previous answer's LastHeartbeat. A mismatch is ErrPreconditionFailed
// (HTTP 412).
func (c *Client) Heartbeat(ctx context.Context, envID, workID, expected string, ttl time.Duration) (*store.Heartbeat, error) {
	q := url.Values{"expected_last_heartbeat": []string{expected}}
	if ttl > 0 {
		q.Set("desired_ttl_seconds", strconv.Itoa(int(ttl.Seconds())))
	}
	var hb store.Heartbeat
	if err := c.do(ctx, request{method: http.MethodPost, path: workPath(envID, workID, "heartbeat"), query: q}, &hb); err != nil {
		return nil, err
	}
	return &hb, nil
}

// StopWork stops a work item: force → stopped, else → stopping. An item
// already stopped is ErrConflict.
func (c *Client) StopWork(ctx context.Context, envID, workID string, force bool) (*store.Work, error) {
	var w store.Work
	if err := c.do(ctx, request{method: http.MethodPost, path: workPath(envID, workID, "stop"), body: map[string]bool{"force": force}}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// EnqueueHealthcheck queues a healthcheck item (memfs extension).
func (c *Client) EnqueueHealthcheck(ctx context.Context, envID string) (*store.Work, error) {
	var w store.Work
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/environments/" + url.PathEscape(envID) + "/healthcheck"}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}
