package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/memfs/memfs/store"
)

// queuePrefix starts the NOTIFY payloads of work queues.
const queuePrefix = "queue:"

// queueKey is the queueWaiters key, and the NOTIFY payload, of an
// environment's work queue.
func queueKey(envID string) string { return queuePrefix + envID }

const workColumns = `n, id, environment_id, data_type, data_id, state, metadata, created_at, acknowledged_at, started_at, latest_heartbeat_at, stop_requested_at, stopped_at`

func scanWork(r rowScanner) (*store.Work, int64, error) {
	var w store.Work
	var n, created int64
	var meta string
	var acked, started, hb, stopReq, stopped sql.NullInt64
	if err := r.Scan(&n, &w.ID, &w.EnvironmentID, &w.Data.Type, &w.Data.ID, &w.State, &meta, &created, &acked, &started, &hb, &stopReq, &stopped); err != nil {
		return nil, 0, err
	}
	w.Type = store.TypeWork
	if json.Unmarshal([]byte(meta), &w.Metadata) != nil || w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	w.CreatedAt = micros(created)
	w.AcknowledgedAt, w.StartedAt, w.LatestHeartbeatAt = nullMicros(acked), nullMicros(started), nullMicros(hb)
	w.StopRequestedAt, w.StoppedAt = nullMicros(stopReq), nullMicros(stopped)
	return &w, n, nil
}

func workNotFound(id string) error {
	return store.Errorf(store.ErrNotFound, "work item %s not found", id)
}

// lockWork reads a work item of an environment for update in tx.
func (db *DB) lockWork(ctx context.Context, tx *sql.Tx, envID, workID string) (*store.Work, error) {
	w, _, err := scanWork(tx.QueryRowContext(ctx, db.d.q(`SELECT `+workColumns+` FROM work_items WHERE id = ? AND environment_id = ?`+db.d.forUpdate), workID, envID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, workNotFound(workID)
	}
	return w, mapErr(err)
}

// enqueued wakes one work poll of envID after an enqueue committed. On
// PostgreSQL the enqueue's NOTIFY reaches this process's own listener
// too, which wakes one: waking here as well would wake two per enqueue.
func (db *DB) enqueued(envID string) {
	if db.d.notify == "" {
		db.queue.wake(queueKey(envID))
	}
}

// EnqueueHealthcheck queues a healthcheck item.
func (db *DB) EnqueueHealthcheck(ctx context.Context, envID string) (*store.Work, error) {
	if _, err := db.GetEnvironment(ctx, envID); err != nil {
		return nil, err
	}
	id := store.NewID(store.PrefixHealthcheck)
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		return db.enqueue(ctx, tx, envID, "healthcheck", id, db.now())
	})
	if err != nil {
		return nil, err
	}
	db.enqueued(envID)
	var wid string
	if err := db.sql.QueryRowContext(ctx, db.d.q(`SELECT id FROM work_items WHERE data_id = ?`), id).Scan(&wid); err != nil {
		return nil, mapErr(err)
	}
	return db.GetWork(ctx, envID, wid)
}

// Poll claims the oldest item offered to a worker: queued and not claimed
// within ReclaimAfter (a claim not acknowledged in time is offered again),
// or whose lease lapsed (no heartbeat within its TTL; an acknowledged item
// never heartbeated lapses one TTL after its ack). A lapsed item is offered
// as queued again (a stopping one stays stopping) with no lease, so the
// next worker takes the lease with NO_HEARTBEAT.
func (db *DB) Poll(ctx context.Context, in store.PollInput) (*store.Work, error) {
	var id string
	now := db.now()
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		if in.WorkerID != "" {
			if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO workers (environment_id, worker_id, last_poll_at) VALUES (?, ?, ?) ON CONFLICT (environment_id, worker_id) DO UPDATE SET last_poll_at = excluded.last_poll_at`),
				in.EnvironmentID, in.WorkerID, now); err != nil {
				return mapErr(err)
			}
		}
		reclaim := now - in.ReclaimAfter.Microseconds()
		var state string
		err := tx.QueryRowContext(ctx, db.d.q(qPoll+db.d.forUpdate),
			in.EnvironmentID, store.WorkQueued, reclaim,
			store.WorkStarting, store.WorkActive, store.WorkStopping, now,
			store.WorkStarting, now).Scan(&id, &state)
		if errors.Is(err, sql.ErrNoRows) {
			id = ""
			return nil
		}
		if err != nil {
			return mapErr(err)
		}
		if state != store.WorkStopping {
			state = store.WorkQueued
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, claimed_at = ?, last_heartbeat = NULL, lease_expires_at = NULL WHERE id = ?`), state, now, id); err != nil {
			return mapErr(err)
		}
		if in.TokenHash != nil {
			// A claim revokes the tokens of earlier claims: a worker whose
			// lease lapsed must not keep writing beside the new one.
			if _, err := tx.ExecContext(ctx, db.d.q(qRevokeScopeKeys), store.KeyKindSession, id); err != nil {
				return mapErr(err)
			}
			if _, err := db.insertKey(ctx, tx, store.KeyKindSession, id, in.TokenHash); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || id == "" {
		return nil, err
	}
	// Hand the wake on: this claim may have taken another item than the
	// one this poll was woken for (queuewake.go, step 4).
	db.queue.wake(queueKey(in.EnvironmentID))
	return db.GetWork(ctx, in.EnvironmentID, id)
}

// Ack acknowledges a claimed item: queued → starting.
func (db *DB) Ack(ctx context.Context, envID, workID string) (*store.Work, error) {
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		w, err := db.lockWork(ctx, tx, envID, workID)
		if err != nil {
			return err
		}
		switch w.State {
		case store.WorkStopped:
			return store.Errorf(store.ErrConflict, "work item %s is stopped", workID)
		case store.WorkQueued:
			_, err = tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, acknowledged_at = ? WHERE id = ?`), store.WorkStarting, db.now(), workID)
		}
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetWork(ctx, envID, workID)
}

// Heartbeat renews an item's lease when expected matches the last
// heartbeat (NO_HEARTBEAT to take a free lease). The first heartbeat moves
// the item to active. A stopping or stopped item is not compared: it
// answers its state (a stopping item's lease is still extended, so its
// worker can finish the teardown).
func (db *DB) Heartbeat(ctx context.Context, envID, workID string, in store.HeartbeatInput) (*store.Heartbeat, error) {
	var hb store.Heartbeat
	ttl := in.TTL
	if ttl <= 0 {
		ttl = store.DefaultLeaseTTL
	}
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		var state string
		var last sql.NullString
		var lastAt sql.NullInt64
		var ttlSec int64
		err := tx.QueryRowContext(ctx, db.d.q(`SELECT state, last_heartbeat, latest_heartbeat_at, lease_ttl FROM work_items WHERE id = ? AND environment_id = ?`+db.d.forUpdate), workID, envID).Scan(&state, &last, &lastAt, &ttlSec)
		if errors.Is(err, sql.ErrNoRows) {
			return workNotFound(workID)
		}
		if err != nil {
			return mapErr(err)
		}
		hb = store.Heartbeat{Type: store.TypeWorkHeartbeat, State: state, LastHeartbeat: last.String, TTLSeconds: int(ttlSec)}
		if state == store.WorkStopped {
			return nil
		}
		if state != store.WorkStopping {
			cur := store.NoHeartbeat
			if last.Valid {
				cur = last.String
			}
			if in.Expected != cur {
				cs := store.HeartbeatState{State: state, TTLSeconds: int(ttlSec)}
				if last.Valid {
					cs.LastHeartbeat, cs.LeaseUpdatedAt = &last.String, nullMicros(lastAt)
				}
				return &store.HeartbeatError{Expected: in.Expected, Current: cs}
			}
		}
		nowT := db.opts.Now().UTC()
		now := nowT.UnixMicro()
		stamp := nowT.Format("2006-01-02T15:04:05.000000Z")
		if stamp == last.String {
			stamp = nowT.Add(time.Microsecond).Format("2006-01-02T15:04:05.000000Z")
		}
		newState := state
		if state == store.WorkQueued || state == store.WorkStarting {
			newState = store.WorkActive
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, last_heartbeat = ?, latest_heartbeat_at = ?, lease_expires_at = ?, lease_ttl = ?, started_at = COALESCE(started_at, ?) WHERE id = ?`),
			newState, stamp, now, now+ttl.Microseconds(), int64(ttl.Seconds()), now, workID); err != nil {
			return mapErr(err)
		}
		hb = store.Heartbeat{Type: store.TypeWorkHeartbeat, LastHeartbeat: stamp, LeaseExtended: true, State: newState, TTLSeconds: int(ttl.Seconds())}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &hb, nil
}

// StopWork stops an item: force → stopped, else → stopping. A stopped
// item answers ErrConflict.
func (db *DB) StopWork(ctx context.Context, envID, workID string, force bool) (*store.Work, error) {
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		w, err := db.lockWork(ctx, tx, envID, workID)
		if err != nil {
			return err
		}
		if w.State == store.WorkStopped {
			return store.Errorf(store.ErrConflict, "work item %s is already stopped", workID)
		}
		now := db.now()
		if force {
			_, err = tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, stop_requested_at = COALESCE(stop_requested_at, ?), stopped_at = ? WHERE id = ?`), store.WorkStopped, now, now, workID)
		} else {
			_, err = tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, stop_requested_at = COALESCE(stop_requested_at, ?) WHERE id = ?`), store.WorkStopping, now, workID)
		}
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetWork(ctx, envID, workID)
}

// GetWork reads an item of an environment.
func (db *DB) GetWork(ctx context.Context, envID, workID string) (*store.Work, error) {
	w, _, err := scanWork(db.sql.QueryRowContext(ctx, db.d.q(`SELECT `+workColumns+` FROM work_items WHERE id = ? AND environment_id = ?`), workID, envID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, workNotFound(workID)
	}
	return w, mapErr(err)
}

// FindWork reads an item by id alone.
func (db *DB) FindWork(ctx context.Context, workID string) (*store.Work, error) {
	w, _, err := scanWork(db.sql.QueryRowContext(ctx, db.d.q(`SELECT `+workColumns+` FROM work_items WHERE id = ?`), workID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, workNotFound(workID)
	}
	return w, mapErr(err)
}

// WorkOfSession returns the latest work item of a session.
func (db *DB) WorkOfSession(ctx context.Context, sessionID string) (*store.Work, error) {
	w, _, err := scanWork(db.sql.QueryRowContext(ctx, db.d.q(`SELECT `+workColumns+` FROM work_items WHERE data_id = ? ORDER BY n DESC LIMIT 1`), sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.Errorf(store.ErrNotFound, "no work item for session %s", sessionID)
	}
	return w, mapErr(err)
}

// UpdateWorkMetadata merges a metadata patch (a nil value removes the key).
func (db *DB) UpdateWorkMetadata(ctx context.Context, envID, workID string, patch map[string]*string) (*store.Work, error) {
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		w, err := db.lockWork(ctx, tx, envID, workID)
		if err != nil {
			return err
		}
		for k, v := range patch {
			if v == nil {
				delete(w.Metadata, k)
			} else {
				w.Metadata[k] = *v
			}
		}
		if err := store.ValidateMetadata(w.Metadata); err != nil {
			return err
		}
		mb, _ := json.Marshal(w.Metadata)
		_, err = tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET metadata = ? WHERE id = ?`), string(mb), workID)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetWork(ctx, envID, workID)
}

// ListWork lists an environment's items newest first.
func (db *DB) ListWork(ctx context.Context, envID string, limit int, page string) (store.Page[store.Work], error) {
	return listNewestFirst(ctx, db, qListWork, limit, page, func(r rowScanner) (store.Work, int64, error) {
		w, n, err := scanWork(r)
		if err != nil {
			return store.Work{}, 0, err
		}
		return *w, n, nil
	}, envID)
}

// WorkStats counts the queue: depth (queued, not claimed recently),
// pending (claimed, not acknowledged), the oldest queued item, and workers
// that polled in the last 30 s.
func (db *DB) WorkStats(ctx context.Context, envID string) (*store.WorkQueueStats, error) {
	if _, err := db.GetEnvironment(ctx, envID); err != nil {
		return nil, err
	}
	now := db.now()
	reclaim := now - store.DefaultReclaimAfter.Microseconds()
	st := &store.WorkQueueStats{Type: store.TypeWorkQueueStats}
	var oldest sql.NullInt64
	err := db.sql.QueryRowContext(ctx, db.d.q(qWorkStats), reclaim, reclaim, envID, store.WorkQueued).Scan(&st.Depth, &st.Pending, &oldest)
	if err != nil {
		return nil, mapErr(err)
	}
	st.OldestQueuedAt = nullMicros(oldest)
	err = db.sql.QueryRowContext(ctx, db.d.q(`SELECT COUNT(*) FROM workers WHERE environment_id = ? AND last_poll_at > ?`), envID, now-30*time.Second.Microseconds()).Scan(&st.WorkersPolling)
	return st, mapErr(err)
}

// SubscribeQueue returns a channel that receives a value when this waiter
// is the one woken: an enqueue (by this process, or on PostgreSQL by any
// process: enqueue's NOTIFY reaches the listener) or a claim in this
// process wakes the oldest waiter of the environment that holds no wake,
// not all of them (queuewake.go says why no item is stranded). A lease or
// claim lapsing wakes nobody; pollers find those on their next poll. The
// release function must be called on every exit path, received or not:
// it passes a wake the waiter did not receive to the next waiter.
func (db *DB) SubscribeQueue(envID string) (<-chan struct{}, func()) {
	return db.queue.subscribe(queueKey(envID))
}
