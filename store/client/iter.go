package client

import (
	"context"
	"iter"
	"path"
	"strings"

	"github.com/memfs/memfs/store"
)

// pageSize is the page size the helpers below ask for: the API's maximum
// (a full-view memory listing is clamped to 20 by the server).
const pageSize = store.MaxListLimit

// pages yields every item of a paged listing; fetch reads the page whose
// token it is given. Iteration stops at the first error, which is yielded.
func pages[T any](fetch func(page string) (store.Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			p, err := fetch(token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.Data {
				if !yield(it, nil) {
					return
				}
			}
			if p.NextPage == "" || p.NextPage == token {
				return
			}
			token = p.NextPage
		}
	}
}

func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for it, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// Stores iterates over every store matching opts, following next_page
// (opts.Page is the first page; opts.Limit 0 asks for 100 a page).
func (c *Client) Stores(ctx context.Context, opts store.ListStoresOptions) iter.Seq2[store.Store, error] {
	if opts.Limit == 0 {
		opts.Limit = pageSize
	}
	first := opts.Page
	return pages(func(page string) (store.Page[store.Store], error) {
		opts.Page = first
		if page != "" {
			opts.Page = page
		}
		return c.ListStores(ctx, opts)
	})
}

// AllStores returns every store matching opts, following next_page.
func (c *Client) AllStores(ctx context.Context, opts store.ListStoresOptions) ([]store.Store, error) {
	return collect(c.Stores(ctx, opts))
}

// MemoryItems iterates over every memory (and, with opts.Depth 1, every
// memory_prefix) matching opts, following next_page.
func (c *Client) MemoryItems(ctx context.Context, storeID string, opts store.ListMemoriesOptions) iter.Seq2[store.MemoryListItem, error] {
	if opts.Limit == 0 {
		opts.Limit = pageSize
	}
	first := opts.Page
	return pages(func(page string) (store.Page[store.MemoryListItem], error) {
		opts.Page = first
		if page != "" {
			opts.Page = page
		}
		return c.ListMemories(ctx, storeID, opts)
	})
}

// AllMemoryItems returns every memory and memory_prefix item matching opts.
func (c *Client) AllMemoryItems(ctx context.Context, storeID string, opts store.ListMemoriesOptions) ([]store.MemoryListItem, error) {
	return collect(c.MemoryItems(ctx, storeID, opts))
}

// AllMemories returns every memory matching opts, following next_page;
// memory_prefix items (opts.Depth 1) are left out.
func (c *Client) AllMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) ([]store.Memory, error) {
	var out []store.Memory
	for it, err := range c.MemoryItems(ctx, storeID, opts) {
		if err != nil {
			return nil, err
		}
		if it.Memory != nil {
			out = append(out, *it.Memory)
		}
	}
	return out, nil
}

// Versions iterates over every version matching opts, newest first,
// following next_page; stop ranging to stop fetching.
func (c *Client) Versions(ctx context.Context, storeID string, opts store.ListVersionsOptions) iter.Seq2[store.Version, error] {
	if opts.Limit == 0 {
		opts.Limit = pageSize
	}
	first := opts.Page
	return pages(func(page string) (store.Page[store.Version], error) {
		opts.Page = first
		if page != "" {
			opts.Page = page
		}
		return c.ListVersions(ctx, storeID, opts)
	})
}

// MemoryByPath finds the memory at exactly path (basic view: Content nil)
// by listing the direct children of its directory, or returns
// store.ErrNotFound. A path that is a directory of memories is not a
// memory: store.ErrNotFound too.
func (c *Client) MemoryByPath(ctx context.Context, storeID, p string) (*store.Memory, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, err
	}
	dir := path.Dir(p)
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	for it, err := range c.MemoryItems(ctx, storeID, store.ListMemoriesOptions{PathPrefix: dir, Depth: 1}) {
		if err != nil {
			return nil, err
		}
		if it.Memory != nil && it.Memory.Path == p {
			return it.Memory, nil
		}
	}
	return nil, store.Errorf(store.ErrNotFound, "no memory at path %q", p)
}
