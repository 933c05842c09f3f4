package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/memfs/memfs/store"
)

// createStoreBody is the body of POST /v1/memory_stores.
type createStoreBody struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// updateStoreBody is the body of POST /v1/memory_stores/{id}; a nil
// metadata value is sent as null, which removes the key.
type updateStoreBody struct {
	Name        *string            `json:"name,omitempty"`
	Description *string            `json:"description,omitempty"`
	Metadata    map[string]*string `json:"metadata,omitempty"`
}

// CreateStore creates a memory store.
func (c *Client) CreateStore(ctx context.Context, in store.CreateStoreInput) (*store.Store, error) {
	var s store.Store
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/memory_stores",
		body: createStoreBody{Name: in.Name, Description: in.Description, Metadata: in.Metadata}}, &s)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// GetStore reads a memory store.
func (c *Client) GetStore(ctx context.Context, storeID string) (*store.Store, error) {
	var s store.Store
	if err := c.do(ctx, request{method: http.MethodGet, path: storePath(storeID)}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UpdateStore changes a store's name, description or metadata; nil fields
// are left alone, and a nil metadata value removes that key.
func (c *Client) UpdateStore(ctx context.Context, storeID string, in store.UpdateStoreInput) (*store.Store, error) {
	var s store.Store
	err := c.do(ctx, request{method: http.MethodPost, path: storePath(storeID),
		body: updateStoreBody{Name: in.Name, Description: in.Description, Metadata: in.Metadata}}, &s)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// ListStores reads one page of stores, newest first. Follow NextPage by
// passing it back as opts.Page, or use AllStores.
func (c *Client) ListStores(ctx context.Context, opts store.ListStoresOptions) (store.Page[store.Store], error) {
	q := url.Values{}
	setInt(q, "limit", opts.Limit)
	setStr(q, "page", opts.Page)
	if opts.IncludeArchived {
		q.Set("include_archived", strconv.FormatBool(true))
	}
	setTime(q, "created_at[gte]", opts.CreatedGTE)
	setTime(q, "created_at[lte]", opts.CreatedLTE)
	var p store.Page[store.Store]
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/memory_stores", query: q}, &p)
	return p, err
}

// ArchiveStore archives a store: it becomes read-only for ever.
func (c *Client) ArchiveStore(ctx context.Context, storeID string) (*store.Store, error) {
	var s store.Store
	if err := c.do(ctx, request{method: http.MethodPost, path: storePath(storeID, "archive")}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteStore deletes a store with all its memories and versions.
func (c *Client) DeleteStore(ctx context.Context, storeID string) (*store.DeletedObject, error) {
	var d store.DeletedObject
	if err := c.do(ctx, request{method: http.MethodDelete, path: storePath(storeID)}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
