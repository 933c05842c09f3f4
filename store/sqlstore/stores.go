package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/memfs/memfs/store"
)

const storeColumns = `n, id, name, description, metadata, created_at, updated_at, archived_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanStore(r rowScanner) (*store.Store, int64, error) {
	var s store.Store
	var n, created, updated int64
	var archived sql.NullInt64
	var meta string
	if err := r.Scan(&n, &s.ID, &s.Name, &s.Description, &meta, &created, &updated, &archived); err != nil {
		return nil, 0, err
	}
	s.Type = store.TypeMemoryStore
	s.CreatedAt, s.UpdatedAt, s.ArchivedAt = micros(created), micros(updated), nullMicros(archived)
	if err := json.Unmarshal([]byte(meta), &s.Metadata); err != nil || s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	return &s, n, nil
}

func notFoundStore(id string) error {
	return store.Errorf(store.ErrNotFound, "memory store %s not found", id)
}

// CreateStore inserts a store. Its change-feed head starts at 1, not 0:
// after=0 means "tell me the head", so a client that starts following a
// fresh store must be given a cursor (1) that its first change comes after.
func (db *DB) CreateStore(ctx context.Context, in store.CreateStoreInput) (*store.Store, error) {
	meta := in.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	mb, _ := json.Marshal(meta)
	id := store.NewID(store.PrefixStore)
	now := db.now()
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		_, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at, last_seq) VALUES (?, ?, ?, ?, ?, ?, 1)`),
			id, in.Name, db.d.text(in.Description), string(mb), now, now)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetStore(ctx, id)
}

// GetStore reads a store.
func (db *DB) GetStore(ctx context.Context, id string) (*store.Store, error) {
	s, _, err := scanStore(db.sql.QueryRowContext(ctx, db.d.q(`SELECT `+storeColumns+` FROM memory_stores WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFoundStore(id)
	}
	return s, mapErr(err)
}

// UpdateStore patches name, description and metadata. An archived store
// can't be changed (ErrForbidden).
func (db *DB) UpdateStore(ctx context.Context, id string, in store.UpdateStoreInput) (*store.Store, error) {
	err := db.writeTx(ctx, id, func(tx *sql.Tx, st *lockedStore) error {
		if st.archived {
			return store.Errorf(store.ErrForbidden, "memory store %s is archived and can't be changed", id)
		}
		cur, _, err := scanStore(tx.QueryRowContext(ctx, db.d.q(`SELECT `+storeColumns+` FROM memory_stores WHERE id = ?`), id))
		if err != nil {
			return mapErr(err)
		}
		if in.Name != nil {
			cur.Name = *in.Name
		}
		if in.Description != nil {
			cur.Description = *in.Description
		}
		for k, v := range in.Metadata {
			if v == nil {
				delete(cur.Metadata, k)
			} else {
				cur.Metadata[k] = *v
			}
		}
		if err := store.ValidateMetadata(cur.Metadata); err != nil {
			return err
		}
		mb, _ := json.Marshal(cur.Metadata)
		_, err = tx.ExecContext(ctx, db.d.q(`UPDATE memory_stores SET name = ?, description = ?, metadata = ?, updated_at = ? WHERE id = ?`),
			cur.Name, db.d.text(cur.Description), string(mb), db.now(), id)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetStore(ctx, id)
}

// ListStores lists newest first.
func (db *DB) ListStores(ctx context.Context, opts store.ListStoresOptions) (store.Page[store.Store], error) {
	var page store.Page[store.Store]
	tok, err := decodeToken(opts.Page)
	if err != nil {
		return page, err
	}
	limit := clampLimit(opts.Limit, false)
	var where []string
	var args []any
	if tok.N > 0 {
		where, args = append(where, "n < ?"), append(args, tok.N)
	}
	if !opts.IncludeArchived {
		where = append(where, "archived_at IS NULL")
	}
	if opts.CreatedGTE != nil {
		where, args = append(where, "created_at >= ?"), append(args, opts.CreatedGTE.UnixMicro())
	}
	if opts.CreatedLTE != nil {
		where, args = append(where, "created_at <= ?"), append(args, opts.CreatedLTE.UnixMicro())
	}
	q := `SELECT ` + storeColumns + ` FROM memory_stores`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY n DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := db.sql.QueryContext(ctx, db.d.q(q), args...)
	if err != nil {
		return page, mapErr(err)
	}
	defer rows.Close()
	var lastN int64
	for rows.Next() {
		s, n, err := scanStore(rows)
		if err != nil {
			return page, mapErr(err)
		}
		if len(page.Data) == limit {
			page.NextPage = encodeToken(pageToken{N: lastN})
			break
		}
		page.Data = append(page.Data, *s)
		lastN = n
	}
	return page, mapErr(rows.Err())
}

// ArchiveStore archives a store (idempotent).
func (db *DB) ArchiveStore(ctx context.Context, id string) (*store.Store, error) {
	err := db.writeTx(ctx, id, func(tx *sql.Tx, st *lockedStore) error {
		if st.archived {
			return nil
		}
		now := db.now()
		_, err := tx.ExecContext(ctx, db.d.q(`UPDATE memory_stores SET archived_at = ?, updated_at = ? WHERE id = ?`), now, now, id)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetStore(ctx, id)
}

// DeleteStore removes a store with its memories, versions and changes.
func (db *DB) DeleteStore(ctx context.Context, id string) error {
	err := db.writeTx(ctx, id, func(tx *sql.Tx, _ *lockedStore) error {
		for _, t := range []string{"memory_changes", "memory_versions", "memories"} {
			if _, err := tx.ExecContext(ctx, db.d.q(`DELETE FROM `+t+` WHERE store_id = ?`), id); err != nil {
				return mapErr(err)
			}
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`DELETE FROM memory_stores WHERE id = ?`), id); err != nil {
			return mapErr(err)
		}
		// Wake long polls on the store in every process: they answer 404.
		if db.d.notify != "" {
			if _, err := tx.ExecContext(ctx, db.d.q(db.d.notify), id); err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
	if err == nil {
		db.hub.notify(id)
	}
	return err
}
