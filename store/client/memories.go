package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/memfs/memfs/store"
)

// createMemoryBody is the body of POST .../memories.
type createMemoryBody struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// updateMemoryBody is the body of POST .../memories/{id}.
type updateMemoryBody struct {
	Content      *string       `json:"content,omitempty"`
	Path         *string       `json:"path,omitempty"`
	Precondition *precondition `json:"precondition,omitempty"`
}

// precondition is {type:"content_sha256", content_sha256}.
type precondition struct {
	Type          string `json:"type"`
	ContentSHA256 string `json:"content_sha256"`
}

// SHA256 is the content_sha256 of content: lowercase hex SHA-256 of its
// exact bytes.
func SHA256(content string) string {
	h := sha256.Sum256([]byte(content))
	return hex.EncodeToString(h[:])
}

// CreateMemory creates a memory at path. It never overwrites: a taken path
// is store.ErrPathConflict (with ConflictingMemoryID and ConflictingPath)
// — except when the memory at exactly that path holds exactly content,
// which is taken to be this client's own earlier attempt whose answer was
// lost, and is returned as a success. The memory is returned in the basic
// view (Content nil).
func (c *Client) CreateMemory(ctx context.Context, storeID, path, content string) (*store.Memory, error) {
	var m store.Memory
	err := c.do(ctx, request{method: http.MethodPost, path: storePath(storeID, "memories"),
		query: url.Values{"view": {store.ViewBasic}},
		body:  createMemoryBody{Path: path, Content: content}}, &m)
	if err == nil {
		return &m, nil
	}
	var se *store.Error
	if !errors.Is(err, store.ErrPathConflict) || !errors.As(err, &se) ||
		se.ConflictingPath != path || se.ConflictingMemoryID == "" {
		return nil, err
	}
	if got, gerr := c.GetMemory(ctx, storeID, se.ConflictingMemoryID); gerr == nil &&
		got.Path == path && got.ContentSHA256 == SHA256(content) {
		got.Content = nil
		return got, nil
	}
	return nil, err
}

// GetMemory reads a memory with its content.
func (c *Client) GetMemory(ctx context.Context, storeID, memoryID string) (*store.Memory, error) {
	var m store.Memory
	err := c.do(ctx, request{method: http.MethodGet, path: storePath(storeID, "memories", url.PathEscape(memoryID)),
		query: url.Values{"view": {store.ViewFull}}}, &m)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// UpdateMemory changes a memory's content and/or path (a rename keeps the
// id); nil fields of in are left alone and in.Actor is ignored (the server
// attributes the write to the credential). With in.ExpectedSHA256 set, the
// update applies only if the memory's content_sha256 still equals it, else
// store.ErrPreconditionFailed — except when the memory already holds
// exactly in.Content (at in.Path, when given), which is taken to be this
// client's own earlier attempt whose answer was lost, and is returned as a
// success. A memory deleted meanwhile is store.ErrNotFound. The memory is
// returned in the basic view (Content nil).
func (c *Client) UpdateMemory(ctx context.Context, storeID, memoryID string, in store.UpdateMemoryInput) (*store.Memory, error) {
	body := updateMemoryBody{Content: in.Content, Path: in.Path}
	if in.ExpectedSHA256 != nil {
		body.Precondition = &precondition{Type: "content_sha256", ContentSHA256: *in.ExpectedSHA256}
	}
	var m store.Memory
	err := c.do(ctx, request{method: http.MethodPost, path: storePath(storeID, "memories", url.PathEscape(memoryID)),
		query: url.Values{"view": {store.ViewBasic}}, body: body}, &m)
	if err == nil {
		return &m, nil
	}
	if !errors.Is(err, store.ErrPreconditionFailed) || in.ExpectedSHA256 == nil || in.Content == nil {
		return nil, err
	}
	if got, gerr := c.GetMemory(ctx, storeID, memoryID); gerr == nil &&
		got.ContentSHA256 == SHA256(*in.Content) && (in.Path == nil || got.Path == *in.Path) {
		got.Content = nil
		return got, nil
	}
	return nil, err
}

// DeleteMemory deletes a memory; with expectedSHA256 set, only if its
// content_sha256 still equals it (else store.ErrPreconditionFailed). A
// memory that is already gone is store.ErrNotFound, even when it was an
// earlier attempt of this very call that deleted it.
func (c *Client) DeleteMemory(ctx context.Context, storeID, memoryID string, expectedSHA256 *string) error {
	q := url.Values{}
	if expectedSHA256 != nil {
		q.Set("expected_content_sha256", *expectedSHA256)
	}
	return c.do(ctx, request{method: http.MethodDelete, path: storePath(storeID, "memories", url.PathEscape(memoryID)),
		query: q}, &store.DeletedObject{})
}

// ListMemories reads one page of a store's memories in the server's order
// (path order on memfs serve). With opts.Depth 1, memories deeper than one
// level below opts.PathPrefix come back as memory_prefix items. Follow
// NextPage by passing it back as opts.Page, or use AllMemories.
func (c *Client) ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	q := url.Values{"view": {view(opts.Full)}}
	setStr(q, "path_prefix", opts.PathPrefix)
	if opts.Depth > 0 {
		q.Set("depth", strconv.Itoa(opts.Depth))
	}
	setInt(q, "limit", opts.Limit)
	setStr(q, "page", opts.Page)
	// Decoded as memories, then turned into items: a full page is mostly
	// content, and its bytes are scanned twice (validated, decoded), not
	// again by Page's and MemoryListItem's UnmarshalJSON.
	var wire store.PageWire[store.Memory]
	if err := c.do(ctx, request{method: http.MethodGet, path: storePath(storeID, "memories"), query: q}, &wire); err != nil {
		return store.Page[store.MemoryListItem]{}, err
	}
	raw := wire.Page()
	p := store.Page[store.MemoryListItem]{Data: make([]store.MemoryListItem, len(raw.Data)), NextPage: raw.NextPage}
	for i := range raw.Data {
		p.Data[i] = store.ListItemOf(&raw.Data[i])
	}
	return p, nil
}
