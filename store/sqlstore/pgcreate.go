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

// Creates on PostgreSQL run in groups: concurrent creates into one store
// go to the database together, one network round trip and one commit for
// the group, the store lock taken once. See "Grouped writes" in
// doc.go for why it is shaped this way.

// pgLockStore takes the store row's lock. It returns nothing the create
// needs: it exists so that pgCreate, a statement of its own, takes its
// snapshot only once the lock is held and sees every write committed by
// the store's previous lock holder.
const pgLockStore = `SELECT 1 FROM memory_stores WHERE id = $1 FOR UPDATE`

// pgCreate checks and writes a create in one statement: the store's state,
// the first memory in its way (the path itself, else the first memory
// below it, else one at an ancestor, as checkPathFree reports them; each
// a seek of UNIQUE (store_id, path), as in qPathTaken), and, only when
// nothing refuses it, the version row, the change-feed row numbered
// last_seq + 1, the memory, the store's counters and the NOTIFY. Its
// timestamp is now, or the store's last change's if that is later: now
// is read before the lock, and created_at must follow seq order as for
// every other write (the feed is pruned by time, from its start). Every
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
		(SELECT id, path, 0 AS k FROM memories WHERE store_id = $1 AND path = $4)
		UNION ALL
		(SELECT id, path, 1 AS k FROM memories WHERE store_id = $1 AND path >= $12 AND path < $13 ORDER BY path LIMIT 1)
		UNION ALL
		(SELECT id, path, 2 AS k FROM memories WHERE store_id = $1 AND path = ANY($14::text[]) LIMIT 1)
	) h ORDER BY k LIMIT 1
), ok AS (
	SELECT last_seq + 1 AS seq,
		GREATEST($8::bigint, COALESCE((SELECT mc.created_at FROM memory_changes mc WHERE mc.store_id = $1 AND mc.seq = st.last_seq), 0)) AS ts
	FROM st WHERE NOT archived AND memory_count < $11 AND NOT EXISTS (SELECT 1 FROM hit)
), ver AS (
	INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, sha, size, created_at, actor_type, actor_id)
	SELECT $3, $1, $2, 'created', $4, $5, $6, $7, ts, $9, $10 FROM ok
), chg AS (
	INSERT INTO memory_changes (store_id, seq, operation, memory_id, path, previous_path, sha, size, version_id, actor_type, actor_id, created_at)
	SELECT $1, seq, 'created', $2, $4, NULL, $6, $7, $3, $9, $10, ts FROM ok
), mem AS (
	INSERT INTO memories (id, store_id, version_id, path, content, sha, size, created_at, updated_at)
	SELECT $2, $1, $3, $4, $5, $6, $7, ts, ts FROM ok
), upd AS (
	UPDATE memory_stores SET last_seq = ok.seq, memory_count = memory_count + 1 FROM ok WHERE id = $1
), ntf AS (
	SELECT pg_notify('` + notifyChannel + `', $1) FROM ok
)
SELECT st.archived, hit.id, hit.path, ok.seq, ok.ts, (SELECT count(*) FROM ntf)
FROM st LEFT JOIN hit ON true LEFT JOIN ok ON true`

// runCreates runs a group of creates into one store as one pipeline with
// one Sync, so as one implicit transaction: the store lock, then pgCreate
// once per create. Each pgCreate reads the writes of those before it, so
// the group behaves as its creates one after another; a create refused
// (conflict, cap) writes nothing and refuses only itself. An error of the
// database rolls the whole group back and is every member's outcome.
func (db *DB) runCreates(ctx context.Context, storeID string, reqs []*groupReq[*store.Memory]) {
	type outcome struct {
		archived       bool
		hitID, hitPath sql.NullString
		seq, ts        sql.NullInt64
		notified       int64
		storeFound     bool
	}
	outs := make([]outcome, len(reqs))
	var b pgx.Batch
	b.Queue(pgLockStore, storeID)
	for i, r := range reqs {
		a := r.arg.(*createArg)
		actorType, actorID := actorColumns(a.in.Actor)
		o := &outs[i]
		b.Queue(pgCreate, storeID, a.id, a.vid, a.in.Path, []byte(a.in.Content), store.SHA256Hex(a.in.Content), int64(len(a.in.Content)),
			a.now, actorType, actorID, int64(db.opts.MaxMemoriesPerStore), a.in.Path+"/", subtreeEnd(a.in.Path), ancestors(a.in.Path)).
			QueryRow(func(row pgx.Row) error {
				err := row.Scan(&o.archived, &o.hitID, &o.hitPath, &o.seq, &o.ts, &o.notified)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // no such store
				}
				o.storeFound = err == nil
				return err
			})
	}
	err := db.sendBatch(ctx, &b)
	created := false
	for i, r := range reqs {
		a, o := r.arg.(*createArg), outs[i]
		switch {
		case err != nil:
			r.err = err
		case !o.storeFound:
			r.err = notFoundStore(storeID)
		case o.archived:
			r.err = archivedErr(storeID)
		case o.hitID.Valid:
			r.err = store.PathConflict(a.in.Path, o.hitID.String, o.hitPath.String)
		case !o.seq.Valid:
			r.err = limitErr(storeID)
		default:
			r.res = newMemory(a.id, storeID, a.vid, a.in.Path, a.in.Content, o.ts.Int64)
			created = true
		}
	}
	if created {
		db.hub.notify(storeID)
	}
}

// sendBatch sends b on one pooled connection and reads every result.
func (db *DB) sendBatch(ctx context.Context, b *pgx.Batch) error {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return mapErr(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres connection is a %T, not a pgx connection", dc)
		}
		return pc.Conn().SendBatch(ctx, b).Close()
	})
	return mapErr(err)
}
