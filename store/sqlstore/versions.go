package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/memfs/memfs/store"
)

const versionColumns = `n, id, store_id, memory_id, operation, path, content, sha, size, created_at, actor_type, actor_id, redacted_at, redacted_by_type, redacted_by_id`

func actorOf(typ, id string) *store.Actor {
	switch typ {
	case store.ActorAPI:
		a := store.APIActor(id)
		return &a
	case store.ActorSession:
		a := store.SessionActor(id)
		return &a
	}
	return nil
}

func scanVersion(r rowScanner, full bool) (*store.Version, int64, error) {
	var v store.Version
	var n, created int64
	var path, content, sha, rbType, rbID sql.NullString
	var size, redacted sql.NullInt64
	var aType, aID string
	if err := r.Scan(&n, &v.ID, &v.MemoryStoreID, &v.MemoryID, &v.Operation, &path, &content, &sha, &size, &created, &aType, &aID, &redacted, &rbType, &rbID); err != nil {
		return nil, 0, err
	}
	v.Type = store.TypeMemoryVersion
	v.CreatedAt = micros(created)
	v.CreatedBy = actorOf(aType, aID)
	v.RedactedAt = nullMicros(redacted)
	if rbType.Valid {
		v.RedactedBy = actorOf(rbType.String, rbID.String)
	}
	if path.Valid {
		v.Path = &path.String
	}
	if sha.Valid {
		v.ContentSHA256 = &sha.String
	}
	if size.Valid {
		v.ContentSizeBytes = &size.Int64
	}
	if full && content.Valid {
		v.Content = &content.String
	}
	return &v, n, nil
}

// ListVersions lists a store's versions newest first.
func (db *DB) ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error) {
	var page store.Page[store.Version]
	if _, err := db.GetStore(ctx, storeID); err != nil {
		return page, err
	}
	tok, err := decodeToken(opts.Page)
	if err != nil {
		return page, err
	}
	limit := clampLimit(opts.Limit, opts.Full)
	where := []string{"store_id = ?"}
	args := []any{storeID}
	add := func(cond string, v any) { where, args = append(where, cond), append(args, v) }
	if tok.N > 0 {
		add("n < ?", tok.N)
	}
	if opts.MemoryID != "" {
		add("memory_id = ?", opts.MemoryID)
	}
	if opts.Operation != "" {
		add("operation = ?", opts.Operation)
	}
	if opts.SessionID != "" {
		add("actor_type = '"+store.ActorSession+"' AND actor_id = ?", opts.SessionID)
	}
	if opts.APIKeyID != "" {
		add("actor_type = '"+store.ActorAPI+"' AND actor_id = ?", opts.APIKeyID)
	}
	if opts.CreatedGTE != nil {
		add("created_at >= ?", opts.CreatedGTE.UnixMicro())
	}
	if opts.CreatedLTE != nil {
		add("created_at <= ?", opts.CreatedLTE.UnixMicro())
	}
	args = append(args, limit+1)
	rows, err := db.sql.QueryContext(ctx, db.d.q(qVersionsSelect+strings.Join(where, " AND ")+qVersionsOrder), args...)
	if err != nil {
		return page, mapErr(err)
	}
	defer rows.Close()
	var lastN int64
	for rows.Next() {
		v, n, err := scanVersion(rows, opts.Full)
		if err != nil {
			return page, mapErr(err)
		}
		if len(page.Data) == limit {
			page.NextPage = encodeToken(pageToken{N: lastN})
			break
		}
		page.Data = append(page.Data, *v)
		lastN = n
	}
	return page, mapErr(rows.Err())
}

// GetVersion reads one version with its content.
func (db *DB) GetVersion(ctx context.Context, storeID, versionID string) (*store.Version, error) {
	v, _, err := scanVersion(db.sql.QueryRowContext(ctx, db.d.q(qGetVersion), storeID, versionID), true)
	if errors.Is(err, sql.ErrNoRows) {
		if _, serr := db.GetStore(ctx, storeID); serr != nil {
			return nil, serr
		}
		return nil, store.Errorf(store.ErrNotFound, "memory version %s not found", versionID)
	}
	return v, mapErr(err)
}

// RedactVersion wipes a version's path, content and hash, and the same
// fields of its change-feed row. Redacting twice is a no-op.
func (db *DB) RedactVersion(ctx context.Context, storeID, versionID string, by store.Actor) (*store.Version, error) {
	err := db.writeTx(ctx, storeID, func(tx *sql.Tx, _ *lockedStore) error {
		v, _, err := scanVersion(tx.QueryRowContext(ctx, db.d.q(qGetVersion), storeID, versionID), false)
		if errors.Is(err, sql.ErrNoRows) {
			return store.Errorf(store.ErrNotFound, "memory version %s not found", versionID)
		}
		if err != nil {
			return mapErr(err)
		}
		if v.RedactedAt != nil {
			return nil
		}
		var head string
		err = tx.QueryRowContext(ctx, db.d.q(`SELECT version_id FROM memories WHERE id = ?`), v.MemoryID).Scan(&head)
		if err == nil && head == versionID {
			return &store.Error{Kind: store.ErrInvalid, Code: "cannot_redact_head_version",
				Message: "version " + versionID + " is the current version of memory " + v.MemoryID + "; update or delete the memory first"}
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return mapErr(err)
		}
		byID := by.APIKeyID
		if by.Type == store.ActorSession {
			byID = by.SessionID
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE memory_versions SET path = NULL, content = NULL, sha = NULL, size = NULL, redacted_at = ?, redacted_by_type = ?, redacted_by_id = ? WHERE id = ?`),
			db.now(), by.Type, byID, versionID); err != nil {
			return mapErr(err)
		}
		_, err = tx.ExecContext(ctx, db.d.q(qRedactChange), storeID, versionID)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetVersion(ctx, storeID, versionID)
}
