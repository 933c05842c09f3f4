package client

import (
	"context"
	"errors"
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
// store again. A server without the feed is ErrFeedUnsupported.
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
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return p, err
	}
	// A 404 is an unknown store, or a server without this route: ask
	// about the store to tell them apart.
	if _, serr := c.GetStore(ctx, storeID); serr != nil {
		return store.ChangePage{}, serr
	}
	return store.ChangePage{}, fmt.Errorf("%w: GET %s answered 404 (%v)", ErrFeedUnsupported, storePath(storeID, "changes"), err)
}
