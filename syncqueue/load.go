package syncqueue

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"

	"github.com/memfs/memfs/store"
)

// LoadProgress is how far listing a store at mount has come. The engine
// reports it after every page of memories the store answers, and once more
// with Done when the listing ends (not when it fails). The API has no
// memory count, so there is no total: Memories and Bytes are what was
// listed so far. The content comes after the mount (lazy.go); Status
// shows how much of it has arrived.
type LoadProgress struct {
	StoreID  string
	Memories int
	// Bytes is the size of the content listed so far.
	Bytes int64
	// Elapsed is the real time since the load began.
	Elapsed time.Duration
	Done    bool
}

// load lists every memory of the store in the basic view (path, size,
// sha: no content), reporting progress to EngineOptions.OnLoad, and logs
// one summary line at info: memories, bytes, seconds.
func (e *Engine) load(ctx context.Context) ([]store.Memory, error) {
	start := time.Now()
	var mu sync.Mutex
	p := LoadProgress{StoreID: e.opts.StoreID}
	page := func(ms []store.Memory) {
		mu.Lock()
		defer mu.Unlock()
		p.Memories += len(ms)
		for _, m := range ms {
			p.Bytes += m.ContentSizeBytes
		}
		if e.opts.OnLoad != nil {
			p.Elapsed = time.Since(start)
			e.opts.OnLoad(p)
		}
	}
	files, err := listStore(ctx, e.opts.Store, e.opts.StoreID, e.opts.Concurrency, false, page)
	if err != nil {
		return nil, err
	}
	p.Elapsed, p.Done = time.Since(start), true
	if e.opts.OnLoad != nil {
		e.opts.OnLoad(p)
	}
	e.log.WithFields(logrus.Fields{"memories": p.Memories, "bytes": p.Bytes,
		"seconds": math.Round(p.Elapsed.Seconds()*100) / 100}).Info("memory store loaded")
	return files, nil
}

// listStore lists every memory, with its content when full. It calls page
// with each page's memories (from several goroutines, one call at a
// time) and returns the memories only in the basic view: the full view's
// content is page's to keep or drop. It lists the root at depth 1, then
// each top-level directory's subtree, up to concurrency of them at once:
// the store's keyset pages are sequential within one listing (at most 20
// memories a page in the full view, 100 in the basic one), so splitting
// by directory is what lets a large store load in parallel. A store whose
// memories sit at its root lists one page at a time.
func listStore(ctx context.Context, st Store, storeID string, concurrency int, full bool, page func([]store.Memory)) ([]store.Memory, error) {
	list := func(ctx context.Context, opts store.ListMemoriesOptions, fn func(store.MemoryListItem)) error {
		opts.Full, opts.Limit = full, store.MaxListLimit
		if full {
			opts.Limit = store.MaxFullViewListLimit
		}
		for {
			p, err := st.ListMemories(ctx, storeID, opts)
			if err != nil {
				return err
			}
			var got []store.Memory
			for _, it := range p.Data {
				if isMemory(it, full) {
					got = append(got, *it.Memory)
				}
				fn(it)
			}
			page(got)
			if p.NextPage == "" {
				return nil
			}
			opts.Page = p.NextPage
		}
	}
	var out []store.Memory
	var prefixes []string
	err := list(ctx, store.ListMemoriesOptions{Depth: 1}, func(it store.MemoryListItem) {
		if isMemory(it, full) && !full {
			out = append(out, *it.Memory)
		} else if it.Prefix != "" {
			prefixes = append(prefixes, it.Prefix)
		}
	})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, p := range prefixes {
		g.Go(func() error {
			var got []store.Memory
			err := list(gctx, store.ListMemoriesOptions{PathPrefix: p}, func(it store.MemoryListItem) {
				if isMemory(it, full) && !full {
					got = append(got, *it.Memory)
				}
			})
			mu.Lock()
			defer mu.Unlock()
			out = append(out, got...)
			return err
		})
	}
	return out, g.Wait()
}

// isMemory reports whether a listing item is a memory (with its content
// in the full view).
func isMemory(it store.MemoryListItem, full bool) bool {
	return it.Memory != nil && (!full || it.Memory.Content != nil)
}
