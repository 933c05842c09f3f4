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

// follow runs the overlay's poller until ctx ends. It keeps no merge
// state: what the feed, the versions or a listing tell goes to the owner
// as a batch (owner.go), and the poller waits until it is merged.
func (e *Engine) follow(ctx context.Context) {
	// The poller's copies of how the mount follows the store and of the
	// feed's cursor, as Open left them: the owner's change only by what
	// the poller hands it.
	p := &poller{follows: e.follows, cursor: e.cursor, bo: overlayBackoff(e.opts.Interval)}
	// lastStep paces the steps without the feed: listing starts at
	// once, the versions an interval after the mount's own listing.
	if p.follows == FollowsVersions {
		p.lastStep, p.lastList = time.Now(), time.Now()
	}
	for ctx.Err() == nil {
		e.tell(stepping{})
		next := e.pollFeed
		if p.follows != FollowsFeed {
			next = e.pollSlow
		}
		if !next(ctx, p) {
			return
		}
	}
}

// poller is where the overlay's poller stands.
type poller struct {
	follows            string
	cursor             int64
	lastStep, lastList time.Time
	needList           bool
	bo                 retryDelay
}

// pollSlow takes one step without the feed, an interval after the last:
// the versions created since the last seen, or a listing of the store. It
// reports false once ctx has ended.
func (e *Engine) pollSlow(ctx context.Context, p *poller) bool {
	if wait := e.opts.Interval - time.Since(p.lastStep); wait > 0 {
		if !sleepCtx(ctx, wait) {
			return false
		}
	}
	p.lastStep = time.Now()
	if p.follows == FollowsVersions && !p.needList && time.Since(p.lastList) < versionsSafetyNet {
		next, err := e.applyVersions(ctx, e.mark)
		switch {
		case ctx.Err() != nil:
			return false
		case err == nil:
			e.mark = next
		case versionsRefused(err):
			e.log.WithField("versions", err.Error()).Info("following the store by listing it every interval: the server refused its memory versions")
			e.tell(followsSet{FollowsListing})
			p.follows, p.lastStep = FollowsListing, time.Time{}
			return true
		default:
			// Whatever was half applied, the next step
			// lists the whole store.
			p.needList = true
		}
		e.report(err)
		return true
	}
	// The mark stays: the versions listed next begin before
	// this listing, so nothing that commits meanwhile is missed.
	_, err := e.reconcile(ctx, false)
	if err == nil {
		p.lastList, p.needList = p.lastStep, false
	}
	e.report(err)
	return true
}

// pollFeed makes one long poll of the change feed and has what it brings
// merged. It reports false once ctx has ended.
func (e *Engine) pollFeed(ctx context.Context, p *poller) bool {
	// The loop retries with its own backoff: one attempt per poll,
	// so a store that goes away is reported at once. While it is
	// away the poll does not wait for changes: a store that is back
	// answers at once, and "store recovered" is not held back by a
	// long poll.
	wait := e.opts.PollWait
	if e.outage.isDown() {
		wait = 0
	}
	page, err := e.opts.Store.Changes(store.WithCallerRetries(ctx), e.opts.StoreID, p.cursor, 1000, wait)
	switch {
	case ctx.Err() != nil:
		return false
	case errors.Is(err, store.ErrFeedUnsupported):
		// The feed went away (a server restarted without it, or a
		// credential it no longer covers): list from now on; a
		// store that is gone is told by the listing.
		e.log.WithField("feed", err.Error()).Info("following the store by listing it every interval: the server refused its change feed")
		e.tell(followsSet{FollowsListing})
		p.follows = FollowsListing
		return true
	case errors.Is(err, store.ErrGone):
		e.log.Info("the change feed no longer holds this mount's cursor: listing the store again")
		var head int64
		if head, err = e.reconcile(ctx, true); err == nil {
			p.cursor = head
		}
	case err == nil:
		e.outage.ok()
		if err = e.applyPage(ctx, page); err == nil {
			p.cursor = page.NextCursor
		}
	}
	if err != nil {
		// The cursor did not move: the same changes come again.
		e.report(err)
		return sleepCtx(ctx, p.bo.next())
	}
	p.bo.reset()
	return true
}

// report tells the outage reporter how an overlay step went. A failure on
// this host (the journal or conflict log can't be written) is no outage:
// it is logged on its own, at debug after the first time in a row.
func (e *Engine) report(err error) {
	e.tell(reported{err})
}

// reportHeld is report on the owner.
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
// streak (status shows it meanwhile).
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
// fetched once, on the owner. The cursor moves only when every change was
// applied, or set aside as ours (a busy memory's: busy.go).
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
	return e.mergeNews(ctx, items, batchEnd{setCursor: true, cursor: page.NextCursor, unblock: true})
}

// settledWithoutFetch reports whether a memory the store holds at path
// with sha needs no fetch: it is what this mount agrees on already (often
// our own upload), or exactly the bytes of the local file's pending change
// there (adopted).
func (e *Engine) settledWithoutFetch(id, path, sha string) bool {
	if k, ok := e.ms.known[id]; ok && k.sha == sha && k.path == path {
		return true
	}
	return e.adoptSame(id, path, sha)
}

// reconcile lists the store (basic view) and merges every memory whose
// path or sha differs from what this mount agreed on, and every memory
// that disappeared. With fromHead it first takes the feed's head, so the
// feed can be followed from there afterwards, and returns it.
//
// A listing is never taken for a deletion: a memory this mount knows and
// the listing did not show is looked up on its own, and only a 404 for it
// removes the local file. A failed or partial listing (an error, a
// server that ends a listing early) costs a request per missing memory,
// never a file.
func (e *Engine) reconcile(ctx context.Context, fromHead bool) (head int64, err error) {
	if fromHead {
		p, err := e.opts.Store.Changes(ctx, e.opts.StoreID, 0, 1, 0)
		if err != nil {
			return 0, err
		}
		head = p.NextCursor
	}
	var items []newsItem
	opts := store.ListMemoriesOptions{Limit: store.MaxListLimit}
	for {
		p, err := e.opts.Store.ListMemories(ctx, e.opts.StoreID, opts)
		if err != nil {
			return 0, err
		}
		for _, it := range p.Data {
			if it.Memory != nil {
				items = append(items, newsItem{id: it.Memory.ID, path: it.Memory.Path, sha: it.Memory.ContentSHA256})
			}
		}
		if p.NextPage == "" {
			break
		}
		opts.Page = p.NextPage
	}
	return head, e.mergeNews(ctx, items, batchEnd{listing: true, setCursor: fromHead, cursor: head})
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
