package syncqueue

import (
	"context"
	"errors"
	"time"

	"github.com/memfs/memfs/store"
)

// The overlay brings the store's changes down onto the mount as they
// commit. Against memfs serve it follows the store's change feed with long
// polls, so a change made elsewhere shows within about a second whatever
// the sync interval, at the cost of one idle request per PollWait. Against
// a server without the feed it follows the memory versions created since
// the last one seen, every interval (versions.go), or, without those too,
// lists the store (basic view) every interval and fetches only what
// changed. A cursor the server no longer keeps (410)
// means listing again, then following from the new head.

// DefaultPollWait is how long one long poll waits for a change.
const DefaultPollWait = 25 * time.Second

// overlayBackoffCap bounds the overlay's wait between failed polls.
const overlayBackoffCap = 30 * time.Second

// overlayBackoff is the overlay's backoff after a failed poll: from a
// second, doubling, capped at the sync interval (and at
// overlayBackoffCap). While nothing is pending the overlay's polls are the
// only requests, so the cap is what keeps "store recovered" within an
// interval of the store's return.
func overlayBackoff(interval time.Duration) retryDelay {
	return newBackoff(time.Second, min(interval, overlayBackoffCap))
}

// follow runs the overlay until ctx ends.
func (e *Engine) follow(ctx context.Context) {
	bo := overlayBackoff(e.opts.Interval)
	var follows string
	e.locked(func() { follows = e.follows })
	// lastStep paces the steps without the feed: listing starts at
	// once, the versions an interval after the mount's own listing.
	var lastStep, lastList time.Time
	if follows == FollowsVersions {
		lastStep, lastList = time.Now(), time.Now()
	}
	needList := false
	for ctx.Err() == nil {
		e.mergeLater()
		if follows != FollowsFeed {
			if wait := e.opts.Interval - time.Since(lastStep); wait > 0 {
				if !sleepCtx(ctx, wait) {
					return
				}
			}
			lastStep = time.Now()
			if follows == FollowsVersions && !needList && time.Since(lastList) < versionsSafetyNet {
				next, err := e.applyVersions(ctx, e.mark)
				switch {
				case ctx.Err() != nil:
					return
				case err == nil:
					e.mark = next
				case versionsRefused(err):
					e.log.WithField("versions", err.Error()).Info("following the store by listing it every interval: the server refused its memory versions")
					e.locked(func() { e.follows = FollowsListing })
					follows, lastStep = FollowsListing, time.Time{}
					continue
				default:
					// Whatever was half applied, the next step
					// lists the whole store.
					needList = true
				}
				e.report(err)
				continue
			}
			// The mark stays: the versions listed next begin before
			// this listing, so nothing that commits meanwhile is missed.
			err := e.reconcile(ctx, false)
			if err == nil {
				lastList, needList = lastStep, false
			}
			e.report(err)
			continue
		}
		var cursor int64
		e.locked(func() { cursor = e.cursor })
		// The loop retries with its own backoff: one attempt per poll,
		// so a store that goes away is reported at once. While it is
		// away the poll does not wait for changes: a store that is back
		// answers at once, and "store recovered" is not held back by a
		// long poll.
		wait := e.opts.PollWait
		if e.outage.isDown() {
			wait = 0
		}
		page, err := e.opts.Store.Changes(store.WithCallerRetries(ctx), e.opts.StoreID, cursor, 1000, wait)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrFeedUnsupported):
			// The feed went away (a server restarted without it, or a
			// credential it no longer covers): list from now on; a
			// store that is gone is told by the listing.
			e.log.WithField("feed", err.Error()).Info("following the store by listing it every interval: the server refused its change feed")
			e.locked(func() { e.follows = FollowsListing })
			follows = FollowsListing
			continue
		case errors.Is(err, store.ErrGone):
			e.log.Info("the change feed no longer holds this mount's cursor: listing the store again")
			err = e.reconcile(ctx, true)
		case err == nil:
			e.outage.ok()
			err = e.applyPage(ctx, page)
		}
		if err != nil {
			// The cursor did not move: the same changes come again.
			e.report(err)
			if !sleepCtx(ctx, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
	}
}

// report tells the outage reporter how an overlay step went. A failure on
// this host (the journal or conflict log can't be written) is no outage:
// it is logged on its own, at debug after the first time in a row.
func (e *Engine) report(err error) {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	e.reportHeld(err)
}

// reportHeld is report with syncMu held.
func (e *Engine) reportHeld(err error) {
	switch {
	case err == nil:
		e.outage.ok()
	case isLocal(err):
		e.localWait(err)
	default:
		e.outage.fail(err)
	}
}

// localWait logs that remote changes wait on this host's disk, once per
// streak (status shows it meanwhile). Called with syncMu held.
func (e *Engine) localWait(err error) {
	first := !e.remoteBlocked
	e.remoteBlocked = true
	l := e.log.WithError(err)
	if first {
		l.Warn("a change from the store waits: a local version it would replace can't be kept yet (is the state dir full?); retried")
	} else {
		l.Debug("a change from the store still waits")
	}
}

// applyPage merges one page of the feed: the latest change of each memory,
// fetched once (without syncMu). The cursor moves only when every change
// was applied or set aside (a busy memory's: busy.go).
func (e *Engine) applyPage(ctx context.Context, page store.ChangePage) error {
	last := map[string]store.Change{}
	var order []string
	for _, c := range page.Data {
		if _, seen := last[c.MemoryID]; !seen {
			order = append(order, c.MemoryID)
		}
		last[c.MemoryID] = c
	}
	items := make([]newsItem, len(order))
	for i, id := range order {
		c := last[id]
		items[i] = newsItem{id: id, deleted: c.Operation == store.OpDeleted, path: c.Path}
		if c.ContentSHA256 != nil {
			items[i].sha = *c.ContentSHA256
		}
	}
	if err := e.mergeNews(ctx, items); err != nil {
		return err
	}
	e.locked(func() { e.cursor, e.remoteBlocked = page.NextCursor, false })
	return nil
}

// settledWithoutFetch reports whether a memory the store holds at path
// with sha needs no fetch: it is what this mount agrees on already (often
// our own upload), or exactly the bytes of the local file's pending change
// there (adopted).
//
// REQUIRES: e.syncMu held.
func (e *Engine) settledWithoutFetch(id, path, sha string) bool {
	if k, ok := e.ms.known[id]; ok && k.sha == sha && k.path == path {
		return true
	}
	return e.adoptSame(id, path, sha)
}

// reconcile lists the store (basic view) and merges every memory whose
// path or sha differs from what this mount agreed on, and every memory
// that disappeared. With fromHead it first takes the feed's head, so the
// feed can be followed from there afterwards.
//
// A listing is never taken for a deletion: a memory this mount knows and
// the listing did not show is looked up on its own, and only a 404 for it
// removes the local file. A failed or partial listing (an error, a
// server that ends a listing early) costs a request per missing memory,
// never a file.
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
	var missing []string
	e.locked(func() {
		for id := range e.ms.known {
			if _, ok := listed[id]; !ok {
				missing = append(missing, id)
			}
		}
	})
	var items []newsItem
	for id, st := range listed {
		items = append(items, newsItem{id: id, path: st.path, sha: st.sha})
	}
	for _, id := range missing {
		// Fetched: a 404 is a deletion, anything else merges.
		items = append(items, newsItem{id: id})
	}
	if err := e.mergeNews(ctx, items); err != nil {
		return err
	}
	if fromHead {
		e.locked(func() { e.cursor = head })
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
