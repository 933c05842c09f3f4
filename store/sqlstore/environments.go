package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/memfs/memfs/store"
)

const envColumns = `n, id, name, description, metadata, config, scope, created_at, updated_at, archived_at`

func scanEnvironment(r rowScanner) (*store.Environment, int64, error) {
	var e store.Environment
	var n, created, updated int64
	var desc sql.NullString
	var meta, config string
	var archived sql.NullInt64
	if err := r.Scan(&n, &e.ID, &e.Name, &desc, &meta, &config, &e.Scope, &created, &updated, &archived); err != nil {
		return nil, 0, err
	}
	e.Type = store.TypeEnvironment
	if desc.Valid {
		e.Description = &desc.String
	}
	if json.Unmarshal([]byte(meta), &e.Metadata) != nil || e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.Config = json.RawMessage(config)
	e.CreatedAt, e.UpdatedAt, e.ArchivedAt = micros(created), micros(updated), nullMicros(archived)
	return &e, n, nil
}

// CreateEnvironment inserts an environment and its key's hash.
func (db *DB) CreateEnvironment(ctx context.Context, in store.CreateEnvironmentInput) (*store.Environment, error) {
	id := store.NewID(store.PrefixEnvironment)
	meta := in.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	mb, _ := json.Marshal(meta)
	config := in.Config
	if len(config) == 0 {
		config = json.RawMessage(`{"type":"self_hosted"}`)
	}
	scope := in.Scope
	if scope == "" {
		scope = "organization"
	}
	now := db.now()
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		var desc any
		if in.Description != nil {
			desc = *in.Description
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO environments (id, name, description, metadata, config, scope, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			id, in.Name, desc, string(mb), string(config), scope, now, now); err != nil {
			return mapErr(err)
		}
		_, err := db.insertKey(ctx, tx, store.KeyKindEnvironment, id, in.KeyHash)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.GetEnvironment(ctx, id)
}

// GetEnvironment reads an environment.
func (db *DB) GetEnvironment(ctx context.Context, id string) (*store.Environment, error) {
	e, _, err := scanEnvironment(db.sql.QueryRowContext(ctx, db.d.q(`SELECT `+envColumns+` FROM environments WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.Errorf(store.ErrNotFound, "environment %s not found", id)
	}
	return e, mapErr(err)
}

// ListEnvironments lists newest first.
func (db *DB) ListEnvironments(ctx context.Context, limit int, page string, includeArchived bool) (store.Page[store.Environment], error) {
	q := `SELECT ` + envColumns + ` FROM environments WHERE n < ?`
	if !includeArchived {
		q += ` AND archived_at IS NULL`
	}
	return listNewestFirst(ctx, db, q, limit, page, func(r rowScanner) (store.Environment, int64, error) {
		e, n, err := scanEnvironment(r)
		if err != nil {
			return store.Environment{}, 0, err
		}
		return *e, n, nil
	})
}

// ArchiveEnvironment archives an environment (idempotent).
func (db *DB) ArchiveEnvironment(ctx context.Context, id string) (*store.Environment, error) {
	now := db.now()
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		res, err := tx.ExecContext(ctx, db.d.q(`UPDATE environments SET archived_at = COALESCE(archived_at, ?), updated_at = ? WHERE id = ?`), now, now, id)
		if err != nil {
			return mapErr(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return mapErr(err) // not "no such row": a failed count says nothing
		}
		if n == 0 {
			return store.Errorf(store.ErrNotFound, "environment %s not found", id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return db.GetEnvironment(ctx, id)
}

// listNewestFirst runs a keyset query whose first placeholder is the
// "n < ?" bound (newest first), scanning rows with scan.
func listNewestFirst[T any](ctx context.Context, db *DB, q string, limit int, page string, scan func(rowScanner) (T, int64, error), args ...any) (store.Page[T], error) {
	var out store.Page[T]
	tok, err := decodeToken(page)
	if err != nil {
		return out, err
	}
	limit = clampLimit(limit, false)
	bound := int64(1) << 62
	if tok.N > 0 {
		bound = tok.N
	}
	rows, err := db.sql.QueryContext(ctx, db.d.q(q+` ORDER BY n DESC LIMIT ?`), append(append([]any{bound}, args...), limit+1)...)
	if err != nil {
		return out, mapErr(err)
	}
	defer rows.Close()
	var lastN int64
	for rows.Next() {
		v, n, err := scan(rows)
		if err != nil {
			return out, mapErr(err)
		}
		if len(out.Data) == limit {
			out.NextPage = encodeToken(pageToken{N: lastN})
			break
		}
		out.Data = append(out.Data, v)
		lastN = n
	}
	return out, mapErr(rows.Err())
}
