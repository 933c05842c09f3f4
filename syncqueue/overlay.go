package syncqueue

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/memfs/memfs/store"
)

// The overlay brings the store's changes down onto the mount as they
// commit. Against memfs serve it follows the store's change feed with long
// polls, so a change made elsewhere shows within about a second whatever
// the sync interval, at the cost of one idle request per PollWait. Against
// a server without the feed it lists the store (basic view) every interval
// and fetches only what changed. A cursor the server no longer keeps (410)
// means listing again, then following from the new head.

// DefaultPollWait is how long one long poll waits for a change.
const DefaultPollWait = 25 * time.Second

// follow runs the overlay until ctx ends.
func (e *Engine) follow(ctx context.Context) {
	backoff := time.Second
	feed := e.cursor > 0
	var lastList time.Time
	for ctx.Err() == nil {
		if !feed {
			if wait := e.opts.Interval - time.Since(lastList); wait > 0 {
				if !sleepCtx(ctx, wait) {
					return
				}
			}
			lastList = time.Now()
			if err := e.reconcile(ctx, false); err != nil {
				e.outage.fail(err)
			} else {
				e.outage.ok()
			}
			continue
		}
		page, err := e.opts.Store.Changes(ctx, e.opts.StoreID, e.cursor, 1000, e.opts.PollWait)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrFeedUnsupported):
			e.log.Info("the store service has no change feed: listing the store every interval instead")
			feed = false
			continue
		case errors.Is(err, store.ErrGone):
			e.log.Info("the change feed no longer holds this mount's cursor: listing the store again")
			if err := e.reconcile(ctx, true); err != nil {
				e.outage.fail(err)
				sleepCtx(ctx, jitter(backoff))
				backoff = min(backoff*2, 30*time.Second)
			}
			continue
		case err != nil:
			e.outage.fail(err)
			if !sleepCtx(ctx, jitter(backoff)) {
				return
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		e.outage.ok()
		if err := e.applyPage(ctx, page); err != nil {
			e.outage.fail(err)
			sleepCtx(ctx, jitter(backoff))
			continue // the cursor did not move: the same changes come again
		}
	}
}

// applyPage merges one page of the feed: the latest change of each memory,
// fetched once. The cursor moves only when every change was applied.
func (e *Engine) applyPage(ctx context.Context, page store.ChangePage) error {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	last := map[string]store.Change{}
	var order []string
	for _, c := range page.Data {
		if _, seen := last[c.MemoryID]; !seen {
			order = append(order, c.MemoryID)
		}
		last[c.MemoryID] = c
	}
	for _, id := range order {
		c := last[id]
		if c.Operation != store.OpDeleted && c.ContentSHA256 != nil {
			if k, ok := e.ms.known[id]; ok && k.sha == *c.ContentSHA256 && k.path == c.Path {
				continue // what we already agree on (often our own upload)
			}
			if e.adoptSame(id, c.Path, *c.ContentSHA256) {
				continue // the same bytes as our pending change: nothing to fetch
			}
		}
		var err error
		if c.Operation == store.OpDeleted {
			err = e.applyRemote(id, nil)
		} else {
			err = e.resolve(ctx, id)
		}
		if err != nil {
			return err
		}
	}
	e.cursor = page.NextCursor
	return nil
}

// reconcile lists the store (basic view) and merges every memory whose
// path or sha differs from what this mount agreed on, and every memory
// that disappeared. With fromHead it first takes the feed's head, so the
// feed can be followed from there afterwards.
func (e *Engine) reconcile(ctx context.Context, fromHead bool) error {
	var head int64
	if fromHead {
		p, err := e.opts.Store.Changes(ctx, e.opts.StoreID, 0, 1, 0)
		if err != nil {
			return err
		}
		head = p.NextCursor
	}
	listed := map[string]memState{}
	opts := store.ListMemoriesOptions{Limit: store.MaxListLimit}
	for {
		p, err := e.opts.Store.ListMemories(ctx, e.opts.StoreID, opts)
		if err != nil {
			return err
		}
		for _, it := range p.Data {
			if it.Memory != nil {
				listed[it.Memory.ID] = memState{path: it.Memory.Path, sha: it.Memory.ContentSHA256}
			}
		}
		if p.NextPage == "" {
			break
		}
		opts.Page = p.NextPage
	}
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	for id, st := range listed {
		if k, ok := e.ms.known[id]; ok && k == st {
			continue
		}
		if e.adoptSame(id, st.path, st.sha) {
			continue
		}
		if err := e.resolve(ctx, id); err != nil {
			return err
		}
	}
	for id := range e.ms.known {
		if _, ok := listed[id]; !ok {
			if err := e.applyRemote(id, nil); err != nil {
				return err
			}
		}
	}
	if fromHead {
		e.cursor = head
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter spreads d over [d/2, d).
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
