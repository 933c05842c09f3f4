package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/memfs/memfs/store"
)

// Agents (/v1/agents, admin key). memfs's commands create sessions with
// the default agent (EnsureDefaultAgent), so that a session made by
// memfs names an agent on memfs serve and the hosted API alike.

// CreateAgent creates an agent from its fields as the SDK sends them
// (BetaAgentNewParams): name and model are required.
func (c *Client) CreateAgent(ctx context.Context, params map[string]any) (*store.Agent, error) {
	var a store.Agent
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/agents", body: params}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// GetAgent reads an agent at its current version.
func (c *Client) GetAgent(ctx context.Context, agentID string) (*store.Agent, error) {
	var a store.Agent
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/agents/" + url.PathEscape(agentID)}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListAgents reads one page of live agents, newest first.
func (c *Client) ListAgents(ctx context.Context, limit int, page string) (store.Page[store.Agent], error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if page != "" {
		q.Set("page", page)
	}
	var p store.Page[store.Agent]
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/agents", query: q}, &p)
	return p, err
}

// EnsureDefaultAgent returns the id of the default agent memfs's commands
// create sessions with: the newest live agent whose metadata has
// memfs=default, made (named memfs) when there is none. A race of two
// first runs makes two; both work, and the newer is reused from then on.
func (c *Client) EnsureDefaultAgent(ctx context.Context) (string, error) {
	page := ""
	for {
		p, err := c.ListAgents(ctx, store.MaxListLimit, page)
		if err != nil {
			return "", err
		}
		for _, a := range p.Data {
			if a.ArchivedAt == nil && a.Metadata[store.DefaultAgentMetaKey] == store.DefaultAgentMetaVal {
				return a.ID, nil
			}
		}
		if p.NextPage == "" {
			break
		}
		page = p.NextPage
	}
	cfg := store.DefaultAgentConfig()
	a, err := c.CreateAgent(ctx, map[string]any{"name": cfg.Name, "description": cfg.Description,
		"model": map[string]any{"id": cfg.Model.ID}, "metadata": cfg.Metadata})
	if err != nil {
		return "", err
	}
	return a.ID, nil
}
