package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/memfs/memfs/store"
)

// MaxWait is the longest change-feed long poll the API allows.
const MaxWait = 30 * time.Second

// Changes reads a store's change feed (the memfs extension): up to limit
// changes committed after the cursor after, in seq order (limit 0: the
// server's default). after 0 returns no changes and the current head as
// NextCursor. With wait > 0 and nothing newer than after, the server holds
// the request until something commits or wait (at most MaxWait) ends; the
// attempt timeout is lengthened by wait.
//
// A cursor older than what the server keeps is store.ErrGone: list the
// store again. A server that refuses the route (ExtensionRefused: 400,
// 403, 404, 405, 501) is ErrFeedUnsupported, probed without asking about the
// store itself (a session token may not cover GET /v1/memory_stores/{id}).
func (c *Client) Changes(ctx context.Context, storeID string, after int64, limit int, wait time.Duration) (store.ChangePage, error) {
	if wait < 0 || wait > MaxWait {
		return store.ChangePage{}, store.Errorf(store.ErrInvalid, "change feed wait %s is outside 0 to %s", wait, MaxWait)
	}
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	setInt(q, "limit", limit)
	if wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	var p store.ChangePage
	err := c.do(ctx, request{method: http.MethodGet, path: storePath(storeID, "changes"), query: q, extraTimeout: wait}, &p)
	if err != nil && store.ExtensionRefused(err) {
		// The feed is optional: a server without it answers 404 (no
		// route), 405, 501, or 400/403 (a route or a credential it does
		// not know here). All mean "not here"; the status's own kind
		// still matches (errors.Is), for a caller that follows the feed
		// already and sees its store go.
		return store.ChangePage{}, fmt.Errorf("%w: GET %s answered %d: %w", ErrFeedUnsupported, storePath(storeID, "changes"), store.Status(err), err)
	}
	return p, err
}
