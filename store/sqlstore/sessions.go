package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/memfs/memfs/store"
)

const sessionColumns = `s.n, s.id, s.environment_id, s.title, s.metadata, s.agent, s.vault_ids, s.resources, s.created_at, s.updated_at, s.archived_at,
	(SELECT w.state FROM work_items w WHERE w.data_id = s.id ORDER BY w.n DESC LIMIT 1)`

func scanSession(r rowScanner) (*store.Session, int64, error) {
	var s store.Session
	var n, created, updated int64
	var title, agent, state sql.NullString
	var meta, vaults, resources string
	var archived sql.NullInt64
	if err := r.Scan(&n, &s.ID, &s.EnvironmentID, &title, &meta, &agent, &vaults, &resources, &created, &updated, &archived, &state); err != nil {
		return nil, 0, err
	}
	s.Type = store.TypeSession
	if title.Valid {
		s.Title = &title.String
	}
	if json.Unmarshal([]byte(meta), &s.Metadata) != nil || s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	s.Agent = json.RawMessage("null")
	if agent.Valid && agent.String != "" {
		s.Agent = json.RawMessage(agent.String)
	}
	if json.Unmarshal([]byte(vaults), &s.VaultIDs) != nil || s.VaultIDs == nil {
		s.VaultIDs = []string{}
	}
	if json.Unmarshal([]byte(resources), &s.Resources) != nil || s.Resources == nil {
		s.Resources = []store.SessionResource{}
	}
	s.OutcomeEvaluations = []any{}
	s.Stats = map[string]any{"active_seconds": 0, "duration_seconds": 0}
	s.Usage = map[string]any{}
	s.Budget = json.RawMessage("null")
	s.CreatedAt, s.UpdatedAt, s.ArchivedAt = micros(created), micros(updated), nullMicros(archived)
	switch {
	case archived.Valid:
		s.Status = store.SessionTerminated
	case state.String == store.WorkStarting || state.String == store.WorkActive:
		s.Status = store.SessionRunning
	default:
		s.Status = store.SessionIdle
	}
	return &s, n, nil
}

// CreateSession checks the environment and every attached store, derives
// the mount paths, snapshots store names and descriptions and the agent's
// version (store.Agent.SessionView), and queues the session's work item —
// all in one transaction.
func (db *DB) CreateSession(ctx context.Context, in store.CreateSessionInput) (*store.Session, error) {
	id := store.NewID(store.PrefixSession)
	now := db.now()
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		var archived sql.NullInt64
		err := tx.QueryRowContext(ctx, db.d.q(`SELECT archived_at FROM environments WHERE id = ?`+db.d.forUpdate), in.EnvironmentID).Scan(&archived)
		if errors.Is(err, sql.ErrNoRows) {
			return store.Errorf(store.ErrNotFound, "environment %s not found", in.EnvironmentID)
		}
		if err != nil {
			return mapErr(err)
		}
		if archived.Valid {
			return store.Errorf(store.ErrInvalid, "environment %s is archived", in.EnvironmentID)
		}
		names := make([]string, len(in.Resources))
		ids := make([]string, len(in.Resources))
		for i := range in.Resources {
			r := &in.Resources[i]
			var storeArchived sql.NullInt64
			err := tx.QueryRowContext(ctx, db.d.q(`SELECT name, description, archived_at FROM memory_stores WHERE id = ?`), r.MemoryStoreID).Scan(&r.Name, &r.Description, &storeArchived)
			if errors.Is(err, sql.ErrNoRows) {
				return &store.Error{Kind: store.ErrInvalid, Code: "memory_store_not_found", Message: "memory store " + r.MemoryStoreID + " not found"}
			}
			if err != nil {
				return mapErr(err)
			}
			if storeArchived.Valid {
				return &store.Error{Kind: store.ErrInvalid, Code: "memory_store_archived", Message: "memory store " + r.MemoryStoreID + " is archived and can't be attached to a new session"}
			}
			names[i], ids[i] = r.Name, r.MemoryStoreID
			r.ID, r.Type = store.NewID(store.PrefixResource), store.ResourceMemoryStore
			r.CreatedAt, r.UpdatedAt = micros(now), micros(now)
		}
		for i, p := range store.MountPaths(in.MemoryRoot, names, ids) {
			in.Resources[i].MountPath = p
		}
		meta := in.Metadata
		if meta == nil {
			meta = map[string]string{}
		}
		mb, _ := json.Marshal(meta)
		vb, _ := json.Marshal(append([]string{}, in.VaultIDs...))
		rb, _ := json.Marshal(in.Resources)
		var title any
		if in.Title != nil {
			title = *in.Title
		}
		a, err := db.sessionAgent(ctx, tx, in.Agent)
		if err != nil {
			return err
		}
		agent := string(a.SessionView())
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO sessions (id, environment_id, title, metadata, agent, vault_ids, resources, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			id, in.EnvironmentID, title, string(mb), agent, string(vb), string(rb), now, now); err != nil {
			return mapErr(err)
		}
		return db.enqueue(ctx, tx, in.EnvironmentID, "session", id, now)
	})
	if err != nil {
		return nil, err
	}
	db.enqueued(in.EnvironmentID)
	return db.GetSession(ctx, id)
}

// enqueue inserts one queued work item and, on PostgreSQL, notifies other
// processes at commit, so a work poll blocked on any memfs serve sharing
// the database wakes (not only one in this process). The caller calls
// enqueued after the commit. One item, one wake: a transaction enqueuing
// several would have to wake as many (PostgreSQL folds identical NOTIFYs
// of one transaction into one).
func (db *DB) enqueue(ctx context.Context, tx *sql.Tx, envID, dataType, dataID string, now int64) error {
	if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO work_items (id, environment_id, data_type, data_id, state, metadata, created_at, lease_ttl) VALUES (?, ?, ?, ?, ?, '{}', ?, ?)`),
		store.NewID(store.PrefixWork), envID, dataType, dataID, store.WorkQueued, now, int64(store.DefaultLeaseTTL.Seconds())); err != nil {
		return mapErr(err)
	}
	if db.d.notify != "" {
		if _, err := tx.ExecContext(ctx, db.d.q(db.d.notify), queueKey(envID)); err != nil {
			return mapErr(err)
		}
	}
	return nil
}

// GetSession reads a session with its status.
func (db *DB) GetSession(ctx context.Context, id string) (*store.Session, error) {
	s, _, err := scanSession(db.sql.QueryRowContext(ctx, db.d.q(`SELECT `+sessionColumns+` FROM sessions s WHERE s.id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.Errorf(store.ErrNotFound, "session %s not found", id)
	}
	return s, mapErr(err)
}

// ListSessions lists newest first.
func (db *DB) ListSessions(ctx context.Context, limit int, page string) (store.Page[store.Session], error) {
	return listNewestFirst(ctx, db, `SELECT `+sessionColumns+` FROM sessions s WHERE s.n < ?`, limit, page, func(r rowScanner) (store.Session, int64, error) {
		s, n, err := scanSession(r)
		if err != nil {
			return store.Session{}, 0, err
		}
		return *s, n, nil
	})
}

// ArchiveSession ends a session: it becomes terminated, its event log gets
// its session.status_terminated event (once: at the first archive) and
// its work item, unless stopped, moves to stopping.
func (db *DB) ArchiveSession(ctx context.Context, id string) (*store.Session, error) {
	now := db.now()
	appended := false
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		appended = false
		head, archived, err := db.lockSessionLog(ctx, tx, id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, db.d.q(`UPDATE sessions SET archived_at = COALESCE(archived_at, ?), updated_at = ? WHERE id = ?`), now, now, id)
		if err != nil {
			return mapErr(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return mapErr(err) // not "no such row": a failed count says nothing
		}
		if n == 0 {
			return store.Errorf(store.ErrNotFound, "session %s not found", id)
		}
		if !archived {
			// A time read under the row lock, like every append's, so the
			// log's processed_at never goes back.
			if _, err := db.appendEvents(ctx, tx, id, head, db.now(), []store.NewEvent{store.TerminatedEvent()}); err != nil {
				return err
			}
			appended = true
		}
		// An item no worker acknowledged has nothing to tear down: it stops.
		// A claimed one moves to stopping; its worker ends the session.
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, stop_requested_at = COALESCE(stop_requested_at, ?), stopped_at = ? WHERE data_id = ? AND state = ?`),
			store.WorkStopped, now, now, id, store.WorkQueued); err != nil {
			return mapErr(err)
		}
		_, err = tx.ExecContext(ctx, db.d.q(`UPDATE work_items SET state = ?, stop_requested_at = COALESCE(stop_requested_at, ?) WHERE data_id = ? AND state IN (?, ?)`),
			store.WorkStopping, now, id, store.WorkStarting, store.WorkActive)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	if appended {
		db.hub.notify(eventsKey(id))
	}
	return db.GetSession(ctx, id)
}
