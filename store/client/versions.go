package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/memfs/memfs/store"
)

// ListVersions reads one page of a store's memory versions, newest first,
// filtered by opts. Follow NextPage by passing it back as opts.Page, or
// range over Versions.
func (c *Client) ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error) {
	q := url.Values{"view": {view(opts.Full)}}
	setStr(q, "memory_id", opts.MemoryID)
	setStr(q, "operation", opts.Operation)
	setStr(q, "session_id", opts.SessionID)
	setStr(q, "api_key_id", opts.APIKeyID)
	setTime(q, "created_at[gte]", opts.CreatedGTE)
	setTime(q, "created_at[lte]", opts.CreatedLTE)
	setInt(q, "limit", opts.Limit)
	setStr(q, "page", opts.Page)
	var p store.Page[store.Version]
	err := c.do(ctx, request{method: http.MethodGet, path: storePath(storeID, "memory_versions"), query: q}, &p)
	return p, err
}

// GetVersion reads one memory version with its content (nil once
// redacted, and on a deleted version).
func (c *Client) GetVersion(ctx context.Context, storeID, versionID string) (*store.Version, error) {
	var v store.Version
	err := c.do(ctx, request{method: http.MethodGet, path: storePath(storeID, "memory_versions", url.PathEscape(versionID)),
		query: url.Values{"view": {store.ViewFull}}}, &v)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// RedactVersion wipes a version's path, content and hash for ever. The
// head version of a live memory cannot be redacted (store.ErrInvalid).
func (c *Client) RedactVersion(ctx context.Context, storeID, versionID string) (*store.Version, error) {
	var v store.Version
	err := c.do(ctx, request{method: http.MethodPost,
		path: storePath(storeID, "memory_versions", url.PathEscape(versionID), "redact")}, &v)
	if err != nil {
		return nil, err
	}
	return &v, nil
}
