package syncqueue

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/sirupsen/logrus"
)

// Following a store through its memory versions: against a server without
// the change feed (the hosted API), the overlay lists, every interval, the
// versions created at or after the newest one it has seen (created_at[gte],
// by the server's own timestamps, never this host's clock) and fetches only
// the memories they name; a deleted memory's version says it is gone. At
// idle that is one request per interval, whatever the store's size. A full
// listing is taken at mount, after a failed step and every
// versionsSafetyNet, for what a timestamp could miss (a version committed
// after a later one).

// versionsSafetyNet is how often a mount that follows the versions lists
// the whole store anyway.
const versionsSafetyNet = 10 * time.Minute

// versionMark is how far following the versions has got: the newest
// created_at seen (zero: from the first version), and the ids of the
// versions created at it, which the next gte listing reads again.
type versionMark struct {
	at   time.Time
	seen map[string]bool
}

// markOf is the mark after the versions vs (newest first).
func markOf(vs []store.Version) versionMark {
	m := versionMark{seen: map[string]bool{}}
	for _, v := range vs {
		switch {
		case v.CreatedAt.After(m.at):
			m.at, m.seen = v.CreatedAt, map[string]bool{v.ID: true}
		case v.CreatedAt.Equal(m.at):
			m.seen[v.ID] = true
		}
	}
	return m
}

// newVersions decides one step (pure): from the versions listed since
// mark (newest first), the newest unseen version of each memory, newest
// first, and the mark to list from next. Versions already seen at the
// mark's timestamp (gte reads them again) are dropped.
func newVersions(mark versionMark, listed []store.Version) (latest []store.Version, next versionMark) {
	var fresh []store.Version
	for _, v := range listed {
		if v.CreatedAt.Before(mark.at) || v.CreatedAt.Equal(mark.at) && mark.seen[v.ID] {
			continue
		}
		fresh = append(fresh, v)
	}
	if len(fresh) == 0 {
		return nil, mark
	}
	next = markOf(fresh)
	if next.at.Equal(mark.at) {
		for id := range mark.seen {
			next.seen[id] = true
		}
	}
	done := map[string]bool{}
	for _, v := range fresh {
		if !done[v.MemoryID] {
			done[v.MemoryID] = true
			latest = append(latest, v)
		}
	}
	return latest, next
}

// versionsRefused reports whether err is a server's refusal of the
// versions listing (400, 401, 403, 404, 405, 501): a server, or a
// credential, without it; the overlay lists the store instead.
func versionsRefused(err error) bool {
	return store.ExtensionRefused(err) || store.Status(err) == http.StatusUnauthorized
}

// versionsHead reads the newest version: the mark to follow from.
func (e *Engine) versionsHead(ctx context.Context) (versionMark, error) {
	p, err := e.opts.Store.ListVersions(ctx, e.opts.StoreID, store.ListVersionsOptions{Limit: 1})
	if err != nil {
		return versionMark{}, err
	}
	return markOf(p.Data), nil
}

// applyVersions lists the versions created since mark and merges the
// memories they name; it returns the next mark, which moves only when
// every one was applied.
func (e *Engine) applyVersions(ctx context.Context, mark versionMark) (versionMark, error) {
	opts := store.ListVersionsOptions{Limit: store.MaxListLimit}
	if !mark.at.IsZero() {
		at := mark.at
		opts.CreatedGTE = &at
	}
	var listed []store.Version
	for {
		p, err := e.opts.Store.ListVersions(ctx, e.opts.StoreID, opts)
		if err != nil {
			return mark, err
		}
		listed = append(listed, p.Data...)
		if p.NextPage == "" {
			break
		}
		opts.Page = p.NextPage
	}
	latest, next := newVersions(mark, listed)
	items := make([]newsItem, len(latest))
	for i, v := range latest {
		items[i] = newsItem{id: v.MemoryID, deleted: v.Operation == store.OpDeleted}
		if v.Path != nil && v.ContentSHA256 != nil {
			items[i].path, items[i].sha = *v.Path, *v.ContentSHA256
		}
	}
	if err := e.mergeNews(ctx, items, batchEnd{unblock: true}); err != nil {
		return mark, err
	}
	return next, nil
}

// probeVersions chooses, once the feed is refused (feedErr), between the
// versions and listing, and says which in one info line.
func (e *Engine) probeVersions(ctx context.Context, feedErr error) error {
	mark, err := e.versionsHead(ctx)
	switch {
	case err == nil:
		e.follows, e.mark = FollowsVersions, mark
		e.log.WithField("feed", feedErr.Error()).Info("following the store through its memory versions every interval: the server refused its change feed")
	case versionsRefused(err):
		e.follows = FollowsListing
		e.log.WithFields(logrus.Fields{"feed": feedErr.Error(), "versions": err.Error()}).Info("following the store by listing it every interval: the server refused its change feed and its memory versions")
	default:
		return fmt.Errorf("list the memory versions of %s: %w", e.opts.StoreID, err)
	}
	return nil
}
