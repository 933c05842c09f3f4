package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/memfs/memfs/store"
)

// Agents (schemaV6): agents holds one row an agent, with its current
// version; agent_versions one row a version, whose config is the JSON of
// store.AgentConfig. A version is never changed once written, so a
// session snapshots the version it was created with.

// agentColumns are read by every agent query: the agent row, then the
// version row joined to it.
const agentColumns = `agents.n, agents.id, agents.version, agents.created_at, agents.updated_at, agents.archived_at,
	agent_versions.version, agent_versions.config, agent_versions.created_at`

// currentAgentColumns are agentColumns for the agent at its current
// version, read from agents alone with its config as a subquery (see
// qGetAgent).
const currentAgentColumns = `agents.n, agents.id, agents.version, agents.created_at, agents.updated_at, agents.archived_at,
	agents.version, (SELECT agent_versions.config FROM agent_versions WHERE agent_versions.agent_id = agents.id AND agent_versions.version = agents.version), agents.updated_at`

func scanAgent(r rowScanner) (*store.Agent, int64, error) {
	var a store.Agent
	var n, current, created, updated, version, versionCreated int64
	var archived sql.NullInt64
	var config string
	if err := r.Scan(&n, &a.ID, &current, &created, &updated, &archived, &version, &config, &versionCreated); err != nil {
		return nil, 0, err
	}
	if err := json.Unmarshal([]byte(config), &a.AgentConfig); err != nil {
		return nil, 0, err
	}
	a.Version, a.CreatedAt, a.UpdatedAt, a.ArchivedAt = version, micros(created), micros(updated), nullMicros(archived)
	if version != current { // an older version: updated when it was made
		a.UpdatedAt = micros(versionCreated)
	}
	out := a.Normalize()
	return &out, n, nil
}

// CreateAgent stores a new agent at version 1.
func (db *DB) CreateAgent(ctx context.Context, cfg store.AgentConfig) (*store.Agent, error) {
	id := store.NewID(store.PrefixAgent)
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		_, err := db.insertAgent(ctx, tx, id, cfg, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.GetAgent(ctx, id, 0)
}

// insertAgent writes an agent and its version 1. With ifAbsent, an agent
// of that id already there is left as it is (inserted is false).
func (db *DB) insertAgent(ctx context.Context, tx *sql.Tx, id string, cfg store.AgentConfig, ifAbsent bool) (inserted bool, err error) {
	now := db.now()
	cb, err := json.Marshal(cfg)
	if err != nil {
		return false, err
	}
	q := `INSERT INTO agents (id, version, created_at, updated_at) VALUES (?, 1, ?, ?)`
	if ifAbsent {
		q += ` ON CONFLICT (id) DO NOTHING`
	}
	res, err := tx.ExecContext(ctx, db.d.q(q), id, now, now)
	if err != nil {
		return false, mapErr(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, mapErr(err)
	}
	if _, err := tx.ExecContext(ctx, db.d.q(qInsertAgentVersion), id, 1, string(cb), now); err != nil {
		return false, mapErr(err)
	}
	return true, nil
}

// GetAgent reads an agent at a version (0: its current one).
func (db *DB) GetAgent(ctx context.Context, id string, version int64) (*store.Agent, error) {
	return db.getAgent(ctx, db.sql, id, version)
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (db *DB) getAgent(ctx context.Context, q querier, id string, version int64) (*store.Agent, error) {
	var row *sql.Row
	if version == 0 {
		row = q.QueryRowContext(ctx, db.d.q(qGetAgent), id)
	} else {
		row = q.QueryRowContext(ctx, db.d.q(qGetAgentVersion), id, version)
	}
	a, _, err := scanAgent(row)
	if errors.Is(err, sql.ErrNoRows) {
		if version != 0 {
			if _, err := db.getAgent(ctx, q, id, 0); err != nil {
				return nil, err
			}
			return nil, store.Errorf(store.ErrNotFound, "agent %s has no version %d", id, version)
		}
		return nil, store.Errorf(store.ErrNotFound, "agent %s not found", id)
	}
	return a, mapErr(err)
}

// ListAgents lists agents at their current versions, newest first.
func (db *DB) ListAgents(ctx context.Context, opts store.ListAgentsOptions) (store.Page[store.Agent], error) {
	q := qListAgents
	var args []any
	if !opts.IncludeArchived {
		q += ` AND agents.archived_at IS NULL`
	}
	if opts.CreatedGTE != nil {
		q += ` AND agents.created_at >= ?`
		args = append(args, opts.CreatedGTE.UnixMicro())
	}
	if opts.CreatedLTE != nil {
		q += ` AND agents.created_at <= ?`
		args = append(args, opts.CreatedLTE.UnixMicro())
	}
	return listNewestFirst(ctx, db, q, opts.Limit, opts.Page, func(r rowScanner) (store.Agent, int64, error) {
		a, n, err := scanAgent(r)
		if err != nil {
			return store.Agent{}, 0, err
		}
		return *a, n, nil
	}, args...)
}

// UpdateAgent applies an update under the agent row's lock: one that
// changes something writes the next version.
func (db *DB) UpdateAgent(ctx context.Context, id string, upd store.AgentUpdate) (*store.Agent, error) {
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		var version int64
		var archived sql.NullInt64
		err := tx.QueryRowContext(ctx, db.d.q(qLockAgent+db.d.forUpdate), id).Scan(&version, &archived)
		if errors.Is(err, sql.ErrNoRows) {
			return store.Errorf(store.ErrNotFound, "agent %s not found", id)
		}
		if err != nil {
			return mapErr(err)
		}
		if archived.Valid {
			return &store.Error{Kind: store.ErrInvalid, Code: "agent_archived", Message: "agent " + id + " is archived and can't be updated"}
		}
		if upd.Version != nil && *upd.Version != version {
			return &store.Error{Kind: store.ErrConflict, Code: "agent_version_mismatch",
				Message: "agent " + id + " is at version " + itoa(version) + ", not " + itoa(*upd.Version) + "; read it again and retry"}
		}
		cur, err := db.getAgent(ctx, tx, id, version)
		if err != nil {
			return err
		}
		next, changed, err := store.ApplyAgentUpdate(cur.AgentConfig, upd)
		if err != nil || !changed {
			return err
		}
		cb, err := json.Marshal(next)
		if err != nil {
			return err
		}
		now := db.now()
		if _, err := tx.ExecContext(ctx, db.d.q(qInsertAgentVersion), id, version+1, string(cb), now); err != nil {
			return mapErr(err)
		}
		_, err = tx.ExecContext(ctx, db.d.q(`UPDATE agents SET version = ?, updated_at = ? WHERE id = ?`), version+1, now, id)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return db.GetAgent(ctx, id, 0)
}

// ArchiveAgent archives an agent (idempotent: a second archive changes
// nothing). Sessions made with it keep their snapshot.
func (db *DB) ArchiveAgent(ctx context.Context, id string) (*store.Agent, error) {
	now := db.now()
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		res, err := tx.ExecContext(ctx, db.d.q(`UPDATE agents SET archived_at = COALESCE(archived_at, ?), updated_at = CASE WHEN archived_at IS NULL THEN ? ELSE updated_at END WHERE id = ?`), now, now, id)
		if err != nil {
			return mapErr(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return mapErr(err)
		}
		if n == 0 {
			return store.Errorf(store.ErrNotFound, "agent %s not found", id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return db.GetAgent(ctx, id, 0)
}

// sessionAgent resolves the agent a new session is created with, in its
// transaction: the version named, or the current one; nil is the default
// agent, made here the first time. An unknown agent or version is
// ErrNotFound, an archived agent ErrInvalid.
func (db *DB) sessionAgent(ctx context.Context, tx *sql.Tx, ref *store.AgentRef) (*store.Agent, error) {
	if ref == nil {
		if _, err := db.insertAgent(ctx, tx, store.DefaultAgentID, store.DefaultAgentConfig(), true); err != nil {
			return nil, err
		}
		ref = &store.AgentRef{ID: store.DefaultAgentID}
	}
	a, err := db.getAgent(ctx, tx, ref.ID, ref.Version)
	if err != nil {
		return nil, err
	}
	if a.ArchivedAt != nil {
		return nil, &store.Error{Kind: store.ErrInvalid, Code: "agent_archived", Message: "agent " + ref.ID + " is archived; a new session needs a live agent"}
	}
	return a, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
