package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/memfs/memfs/store"
)

// MaxChangesLimit caps one page of the change feed.
const MaxChangesLimit = 1000

// Changes reads the feed after a cursor.
func (db *DB) Changes(ctx context.Context, storeID string, after int64, limit int) (store.ChangePage, error) {
	page := store.ChangePage{Data: []store.Change{}}
	var head, pruned int64
	err := db.sql.QueryRowContext(ctx, db.d.q(`SELECT last_seq, pruned_seq FROM memory_stores WHERE id = ?`), storeID).Scan(&head, &pruned)
	if errors.Is(err, sql.ErrNoRows) {
		return page, notFoundStore(storeID)
	}
	if err != nil {
		return page, mapErr(err)
	}
	if after <= 0 {
		page.NextCursor = head
		return page, nil
	}
	if after < pruned {
		return page, &store.Error{Kind: store.ErrGone, Code: "cursor_expired",
			Message: "the change feed no longer holds changes after this cursor; list the store again and follow the feed from its head"}
	}
	if after > head {
		return page, store.Errorf(store.ErrInvalid, "cursor %d is ahead of this store's head %d", after, head)
	}
	if limit <= 0 || limit > MaxChangesLimit {
		limit = MaxChangesLimit
	}
	page.NextCursor = after
	rows, err := db.sql.QueryContext(ctx, db.d.q(qFeedPage),
		storeID, after, limit+1)
	if err != nil {
		return page, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c store.Change
		var path, prev, sha sql.NullString
		var size sql.NullInt64
		var aType, aID string
		if err := rows.Scan(&c.Seq, &c.Operation, &c.MemoryID, &path, &prev, &sha, &size, &c.MemoryVersionID, &aType, &aID); err != nil {
			return page, mapErr(err)
		}
		if len(page.Data) == limit {
			page.HasMore = true
			break
		}
		c.Path, c.PreviousPath = path.String, prev.String
		if sha.Valid {
			c.ContentSHA256 = &sha.String
		}
		if size.Valid {
			c.ContentSizeBytes = &size.Int64
		}
		c.CreatedBy = actorOf(aType, aID)
		page.Data = append(page.Data, c)
		page.NextCursor = c.Seq
	}
	return page, mapErr(rows.Err())
}

// Subscribe returns a channel closed at the store's next commit.
func (db *DB) Subscribe(storeID string) (<-chan struct{}, func()) {
	return db.hub.subscribe(storeID)
}

// PruneChanges drops change-feed rows committed before cutoff and records,
// per store, the highest seq dropped: a cursor below it gets ErrGone.
func (db *DB) PruneChanges(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		c := cutoff.UnixMicro()
		if _, err := tx.ExecContext(ctx, db.d.q(qPruneMark), c); err != nil {
			return mapErr(err)
		}
		res, err := tx.ExecContext(ctx, db.d.q(qPruneDelete), c)
		if err != nil {
			return mapErr(err)
		}
		n, err = res.RowsAffected()
		return mapErr(err)
	})
	return n, err
}
