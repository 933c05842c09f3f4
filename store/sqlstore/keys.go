package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/memfs/memfs/store"
)

// CreateAPIKey records a key's hash.
func (db *DB) CreateAPIKey(ctx context.Context, kind string, hash []byte) (string, error) {
	id := store.NewID(store.PrefixAPIKey)
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		_, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO api_keys (id, kind, hash, created_at) VALUES (?, ?, ?, ?)`), id, kind, hash, db.now())
		return mapErr(err)
	})
	return id, err
}

// LookupAPIKey finds a key by hash.
func (db *DB) LookupAPIKey(ctx context.Context, hash []byte) (*store.APIKey, error) {
	var k store.APIKey
	var created int64
	err := db.sql.QueryRowContext(ctx, db.d.q(`SELECT id, kind, scope_id, created_at FROM api_keys WHERE hash = ?`), hash).Scan(&k.ID, &k.Kind, &k.ScopeID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.Errorf(store.ErrUnauthorized, "invalid API key")
	}
	if err != nil {
		return nil, mapErr(err)
	}
	k.CreatedAt = micros(created)
	return &k, nil
}

// CountAPIKeys counts keys of a kind.
func (db *DB) CountAPIKeys(ctx context.Context, kind string) (int, error) {
	var n int
	err := db.sql.QueryRowContext(ctx, db.d.q(qCountKeys), kind).Scan(&n)
	return n, mapErr(err)
}

// insertKey records a scoped key inside a write transaction.
func (db *DB) insertKey(ctx context.Context, tx *sql.Tx, kind, scope string, hash []byte) (string, error) {
	id := store.NewID(store.PrefixAPIKey)
	_, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO api_keys (id, kind, hash, created_at, scope_id) VALUES (?, ?, ?, ?, ?)`), id, kind, hash, db.now(), scope)
	return id, mapErr(err)
}
