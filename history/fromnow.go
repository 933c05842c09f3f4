package history

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/memfs/memfs/store"
)

// concurrency bounds the parallel requests of a snapshot, as the sync
// engine's default does.
const concurrency = 8

// fromNow builds the store as it was at at from the store now: every
// memory no version after at names is as it was then; each one a version
// after at names is looked up (its last version at or before at: absent
// if there is none, or a deletion). ok is false, with nothing built, when
// more than a twentieth of the memories (at least 100) changed since:
// the full versions listing is then the cheaper way.
//
// The versions after at are listed after the store is: a change made
// while it is listed has its version among them, so its memory is looked
// up rather than taken from the listing.
func fromNow(ctx context.Context, src Source, storeID string, at time.Time) (Snapshot, bool, error) {
	now, err := listNow(ctx, src, storeID)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("list the memories of %s: %w", storeID, err)
	}
	budget := max(100, len(now)/20)
	since, complete, err := versionsAfter(ctx, src, storeID, at, budget)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("list the versions of %s since %s: %w", storeID, at.Format(time.RFC3339), err)
	}
	changed := map[string]bool{}
	for _, v := range since {
		changed[v.MemoryID] = true
	}
	if !complete || len(changed) > budget {
		return Snapshot{}, false, nil
	}
	snap := Snapshot{At: at, Versions: len(since)}
	for i := range now {
		if !changed[now[i].ID] {
			snap.Entries = append(snap.Entries, entryOf(&now[i]))
		}
	}
	var mu sync.Mutex
	var then []store.Version
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for id := range changed {
		g.Go(func() error {
			v, err := versionAt(gctx, src, storeID, id, at, false)
			if errors.Is(err, store.ErrNotFound) {
				return nil // made after at
			}
			if err != nil {
				return fmt.Errorf("read memory %s as it was: %w", id, err)
			}
			mu.Lock()
			defer mu.Unlock()
			then = append(then, *v)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Snapshot{}, false, err
	}
	snap.Versions += len(then)
	past := SnapshotOf(then, at)
	taken := map[string]bool{}
	for _, e := range snap.Entries {
		taken[e.Path] = true
	}
	for _, e := range past.Entries {
		if !taken[e.Path] {
			snap.Entries = append(snap.Entries, e)
		}
	}
	snap.Redacted = past.Redacted
	sort.Slice(snap.Entries, func(i, j int) bool { return snap.Entries[i].Path < snap.Entries[j].Path })
	return snap, true, nil
}

// listNow lists every memory of the store (basic view): the root at depth
// 1, then each top-level directory, concurrency of them at once, as a
// mount's load does.
func listNow(ctx context.Context, src Source, storeID string) ([]store.Memory, error) {
	var out []store.Memory
	var prefixes []string
	if err := listMemories(ctx, src, storeID, store.ListMemoriesOptions{Depth: 1}, func(it store.MemoryListItem) {
		if it.Memory != nil {
			out = append(out, *it.Memory)
		} else {
			prefixes = append(prefixes, it.Prefix)
		}
	}); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, p := range prefixes {
		g.Go(func() error {
			return listMemories(gctx, src, storeID, store.ListMemoriesOptions{PathPrefix: p}, func(it store.MemoryListItem) {
				if it.Memory != nil {
					mu.Lock()
					out = append(out, *it.Memory)
					mu.Unlock()
				}
			})
		})
	}
	return out, g.Wait()
}

// listMemories calls fn with every item of a listing, following next_page.
func listMemories(ctx context.Context, src Source, storeID string, opts store.ListMemoriesOptions, fn func(store.MemoryListItem)) error {
	opts.Limit = store.MaxListLimit
	for {
		p, err := src.ListMemories(ctx, storeID, opts)
		if err != nil {
			return err
		}
		for _, it := range p.Data {
			fn(it)
		}
		if p.NextPage == "" {
			return nil
		}
		opts.Page = p.NextPage
	}
}
