package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/memfs/memfs/store"
)

// A create on PostgreSQL is one network round trip: two statements sent
// together in one pipeline and one implicit transaction (pgx.Batch, one
// Sync), committed by the server when the second one ends. See "Creates on
// PostgreSQL" in doc.go for why it is shaped this way.

// pgLockStore takes the store row's lock. It returns nothing the create
// needs: it exists so that pgCreate, a statement of its own, takes its
// snapshot only once the lock is held and sees every write committed by
// the store's previous lock holder.
const pgLockStore = `SELECT 1 FROM memory_stores WHERE id = $1 FOR UPDATE`

// pgCreate checks and writes a create in one statement: the store's state,
// the first memory in its way (the path itself or a memory below it first,
// then one at an ancestor, as checkPathFree reports them), and, only when
// nothing refuses it, the version row, the change-feed row numbered
// last_seq + 1, the memory, the store's counters and the NOTIFY. Every
// CTE reads the statement's snapshot; the writes (ver, chg, mem, upd) run
// whether or not the final SELECT reads them, and write nothing when ok is
// empty.
//
// $1 store, $2 memory id, $3 version id, $4 path, $5 content, $6 sha,
// $7 size, $8 now, $9 actor type, $10 actor id, $11 the cap,
// $12 path + "/", $13 subtreeEnd(path), $14 the ancestors of path.
const pgCreate = `WITH st AS (
	SELECT last_seq, memory_count, archived_at IS NOT NULL AS archived FROM memory_stores WHERE id = $1
), hit AS (
	SELECT id, path FROM (
		(SELECT id, path, 0 AS k FROM memories WHERE store_id = $1 AND (path = $4 OR (path >= $12 AND path < $13)) ORDER BY path LIMIT 1)
		UNION ALL
		(SELECT id, path, 1 AS k FROM memories WHERE store_id = $1 AND path = ANY($14::text[]) LIMIT 1)
	) h ORDER BY k LIMIT 1
), ok AS (
	SELECT last_seq + 1 AS seq FROM st WHERE NOT archived AND memory_count < $11 AND NOT EXISTS (SELECT 1 FROM hit)
), ver AS (
	INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, sha, size, created_at, actor_type, actor_id)
	SELECT $3, $1, $2, 'created', $4, $5, $6, $7, $8, $9, $10 FROM ok
), chg AS (
	INSERT INTO memory_changes (store_id, seq, operation, memory_id, path, previous_path, sha, size, version_id, actor_type, actor_id, created_at)
	SELECT $1, seq, 'created', $2, $4, NULL, $6, $7, $3, $9, $10, $8 FROM ok
), mem AS (
	INSERT INTO memories (id, store_id, version_id, path, content, sha, size, created_at, updated_at)
	SELECT $2, $1, $3, $4, $5, $6, $7, $8, $8 FROM ok
), upd AS (
	UPDATE memory_stores SET last_seq = ok.seq, memory_count = memory_count + 1 FROM ok WHERE id = $1
), ntf AS (
	SELECT pg_notify('` + notifyChannel + `', $1) FROM ok
)
SELECT st.archived, hit.id, hit.path, ok.seq, (SELECT count(*) FROM ntf)
FROM st LEFT JOIN hit ON true LEFT JOIN ok ON true`

// createPostgres is CreateMemory on PostgreSQL: the same checks in the
// same order (store, archived, path, cap) and the same rows as the
// generic writeTx path, in one round trip.
func (db *DB) createPostgres(ctx context.Context, storeID, id string, in store.CreateMemoryInput) (*store.Memory, error) {
	vid := store.NewID(store.PrefixVersion)
	sha, size := store.SHA256Hex(in.Content), int64(len(in.Content))
	actorType, actorID := actorColumns(in.Actor)
	now := db.now()
	var b pgx.Batch
	b.Queue(pgLockStore, storeID)
	var (
		archived       bool
		hitID, hitPath sql.NullString
		seq            sql.NullInt64
		notified       int64
		storeFound     bool
	)
	b.Queue(pgCreate, storeID, id, vid, in.Path, []byte(in.Content), sha, size, now, actorType, actorID,
		int64(db.opts.MaxMemoriesPerStore), in.Path+"/", subtreeEnd(in.Path), ancestors(in.Path)).
		QueryRow(func(r pgx.Row) error {
			err := r.Scan(&archived, &hitID, &hitPath, &seq, &notified)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // no such store
			}
			storeFound = err == nil
			return err
		})
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres connection is a %T, not a pgx connection", dc)
		}
		return pc.Conn().SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return nil, mapErr(err)
	}
	switch {
	case !storeFound:
		return nil, notFoundStore(storeID)
	case archived:
		return nil, archivedErr(storeID)
	case hitID.Valid:
		return nil, store.PathConflict(in.Path, hitID.String, hitPath.String)
	case !seq.Valid:
		return nil, limitErr(storeID)
	}
	db.hub.notify(storeID)
	return newMemory(id, storeID, vid, in.Path, in.Content, now), nil
}
