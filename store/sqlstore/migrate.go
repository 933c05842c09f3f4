package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/memfs/memfs/store"
)

// schemaV1 is the first schema, written once for both dialects; the
// tokens {SERIAL}, {BLOB} and {PATH} are replaced per dialect.
const schemaV1 = `
CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	hash       {BLOB} NOT NULL UNIQUE,
	created_at BIGINT NOT NULL
);
CREATE TABLE memory_stores (
	n            {SERIAL},
	id           TEXT NOT NULL UNIQUE,
	name         TEXT NOT NULL,
	description  TEXT NOT NULL,
	metadata     TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL,
	archived_at  BIGINT,
	last_seq     BIGINT NOT NULL DEFAULT 0,
	pruned_seq   BIGINT NOT NULL DEFAULT 0,
	memory_count BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE memories (
	id         TEXT PRIMARY KEY,
	store_id   TEXT NOT NULL REFERENCES memory_stores(id) ON DELETE CASCADE,
	path       {PATH} NOT NULL,
	content    TEXT NOT NULL,
	sha        TEXT NOT NULL,
	size       BIGINT NOT NULL,
	version_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (store_id, path)
);
CREATE TABLE memory_versions (
	n                {SERIAL},
	id               TEXT NOT NULL UNIQUE,
	store_id         TEXT NOT NULL REFERENCES memory_stores(id) ON DELETE CASCADE,
	memory_id        TEXT NOT NULL,
	operation        TEXT NOT NULL,
	path             {PATH},
	content          TEXT,
	sha              TEXT,
	size             BIGINT,
	created_at       BIGINT NOT NULL,
	actor_type       TEXT NOT NULL,
	actor_id         TEXT NOT NULL,
	redacted_at      BIGINT,
	redacted_by_type TEXT,
	redacted_by_id   TEXT
);
CREATE INDEX memory_versions_store ON memory_versions (store_id, n);
CREATE INDEX memory_versions_memory ON memory_versions (store_id, memory_id, n);
CREATE TABLE memory_changes (
	store_id      TEXT NOT NULL REFERENCES memory_stores(id) ON DELETE CASCADE,
	seq           BIGINT NOT NULL,
	operation     TEXT NOT NULL,
	memory_id     TEXT NOT NULL,
	path          {PATH},
	previous_path {PATH},
	sha           TEXT,
	size          BIGINT,
	version_id    TEXT NOT NULL,
	actor_type    TEXT NOT NULL,
	actor_id      TEXT NOT NULL,
	created_at    BIGINT NOT NULL,
	PRIMARY KEY (store_id, seq)
);
CREATE INDEX memory_changes_time ON memory_changes (created_at);
`

// postgresV2 stores memory content and store descriptions as BYTEA on
// PostgreSQL, whose TEXT can't hold a NUL byte: NUL is valid UTF-8, so
// validation allows it there (SQLite TEXT holds it; its v2 is empty, which
// keeps version numbers equal across dialects). Values are passed with
// dialect.text and read back into strings as before.
const postgresV2 = `
ALTER TABLE memories ALTER COLUMN content TYPE BYTEA USING convert_to(content, 'UTF8');
ALTER TABLE memory_versions ALTER COLUMN content TYPE BYTEA USING convert_to(content, 'UTF8');
ALTER TABLE memory_stores ALTER COLUMN description TYPE BYTEA USING convert_to(description, 'UTF8');
`

// schemaV3 adds environments, sessions and the work queue, and scopes
// keys: an environment key's scope is its environment, a session token's
// its work item.
const schemaV3 = `
ALTER TABLE api_keys ADD COLUMN scope_id TEXT NOT NULL DEFAULT '';
CREATE TABLE environments (
	n           {SERIAL},
	id          TEXT NOT NULL UNIQUE,
	name        TEXT NOT NULL,
	description TEXT,
	metadata    TEXT NOT NULL,
	config      TEXT NOT NULL,
	scope       TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL,
	archived_at BIGINT
);
CREATE TABLE sessions (
	n              {SERIAL},
	id             TEXT NOT NULL UNIQUE,
	environment_id TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
	title          TEXT,
	metadata       TEXT NOT NULL,
	agent          TEXT,
	vault_ids      TEXT NOT NULL,
	resources      TEXT NOT NULL,
	created_at     BIGINT NOT NULL,
	updated_at     BIGINT NOT NULL,
	archived_at    BIGINT
);
CREATE TABLE work_items (
	n                   {SERIAL},
	id                  TEXT NOT NULL UNIQUE,
	environment_id      TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
	data_type           TEXT NOT NULL,
	data_id             TEXT NOT NULL,
	state               TEXT NOT NULL,
	metadata            TEXT NOT NULL,
	created_at          BIGINT NOT NULL,
	claimed_at          BIGINT,
	acknowledged_at     BIGINT,
	started_at          BIGINT,
	last_heartbeat      TEXT,
	latest_heartbeat_at BIGINT,
	lease_expires_at    BIGINT,
	lease_ttl           BIGINT NOT NULL DEFAULT 30,
	stop_requested_at   BIGINT,
	stopped_at          BIGINT
);
CREATE INDEX work_items_env ON work_items (environment_id, state, n);
CREATE INDEX work_items_data ON work_items (data_id);
CREATE TABLE workers (
	environment_id TEXT NOT NULL,
	worker_id      TEXT NOT NULL,
	last_poll_at   BIGINT NOT NULL,
	PRIMARY KEY (environment_id, worker_id)
);
`

// schemaV4 adds each session's event log (store/events.go). Events are
// numbered per session (seq) under the session row's lock, as memory
// changes are per store, so that a reader that sees last_event_seq sees
// every event up to it: a stream never skips one committed late. data is
// the event's whole JSON as served; JSON text holds no NUL byte, so TEXT
// serves both dialects.
const schemaV4 = `
ALTER TABLE sessions ADD COLUMN last_event_seq BIGINT NOT NULL DEFAULT 0;
CREATE TABLE session_events (
	session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	seq          BIGINT NOT NULL,
	id           TEXT NOT NULL UNIQUE,
	type         TEXT NOT NULL,
	processed_at BIGINT NOT NULL,
	data         TEXT NOT NULL,
	PRIMARY KEY (session_id, seq)
);
`

// schemaV5 adds the indexes three queries lacked (doc.go,
// "Indexes"): a version's feed row, which redaction wipes, was found by
// reading every feed row of its store; an environment's work listing
// sorted all of the environment's items to return one page; and a claim
// revoked its work item's earlier tokens by reading every key (session
// tokens, one a claim, included).
const schemaV5 = `
CREATE INDEX memory_changes_version ON memory_changes (store_id, version_id);
CREATE INDEX work_items_env_n ON work_items (environment_id, n);
CREATE INDEX api_keys_scope ON api_keys (kind, scope_id);
`

// schemaV6 adds agents (store/agents.go): an agent row with its current
// version, and one row a version whose config is the JSON of
// store.AgentConfig. A session's agent column holds the snapshot of the
// version it was created with; the sessions made before agents existed
// get the default agent's (made here when there are any), so that every
// session answers a full agent object. {NOW} is the dialect's clock in
// microseconds; {DEFAULT_CONFIG} and {DEFAULT_SNAPSHOT} the default
// agent's version 1 and its session view.
const schemaV6 = `
CREATE TABLE agents (
	n           {SERIAL},
	id          TEXT NOT NULL UNIQUE,
	version     BIGINT NOT NULL,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL,
	archived_at BIGINT
);
CREATE TABLE agent_versions (
	agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
	version    BIGINT NOT NULL,
	config     TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (agent_id, version)
);
INSERT INTO agents (id, version, created_at, updated_at)
	SELECT '{DEFAULT_ID}', 1, {NOW}, {NOW} WHERE EXISTS (SELECT 1 FROM sessions);
INSERT INTO agent_versions (agent_id, version, config, created_at)
	SELECT id, 1, '{DEFAULT_CONFIG}', created_at FROM agents WHERE id = '{DEFAULT_ID}';
UPDATE sessions SET agent = '{DEFAULT_SNAPSHOT}'
`

// agentsMigration is schemaV6 for a dialect.
func agentsMigration(serial, now string) string {
	cfg, _ := json.Marshal(store.DefaultAgentConfig())
	def := store.Agent{ID: store.DefaultAgentID, AgentConfig: store.DefaultAgentConfig(), Version: 1}
	sq := func(b []byte) string { return strings.ReplaceAll(string(b), "'", "''") }
	return strings.NewReplacer("{SERIAL}", serial, "{NOW}", now, "{DEFAULT_ID}", store.DefaultAgentID,
		"{DEFAULT_CONFIG}", sq(cfg), "{DEFAULT_SNAPSHOT}", sq(def.SessionView())).Replace(schemaV6)
}

func sqliteMigrations() []string {
	r := strings.NewReplacer("{SERIAL}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{BLOB}", "BLOB", "{PATH}", "TEXT")
	return []string{r.Replace(schemaV1), "", r.Replace(schemaV3), schemaV4, schemaV5,
		agentsMigration("INTEGER PRIMARY KEY AUTOINCREMENT", "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)")}
}

func postgresMigrations() []string {
	r := strings.NewReplacer("{SERIAL}", "BIGSERIAL PRIMARY KEY", "{BLOB}", "BYTEA", "{PATH}", `TEXT COLLATE "C"`)
	return []string{r.Replace(schemaV1), postgresV2, r.Replace(schemaV3), schemaV4, schemaV5,
		agentsMigration("BIGSERIAL PRIMARY KEY", "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)")}
}

// migrate applies every migration not yet recorded, each in its own
// transaction. On PostgreSQL an advisory lock keeps two processes that
// start at once from migrating together.
func (db *DB) migrate(ctx context.Context) error {
	if db.d.name == "postgres" {
		conn, err := db.sql.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(7171)"); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(7171)")
		return db.migrateOn(ctx, conn)
	}
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return db.migrateOn(ctx, conn)
}

func (db *DB) migrateOn(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if have > len(db.d.migrations) {
		return fmt.Errorf("database schema version %d is newer than this memfs (%d); upgrade memfs", have, len(db.d.migrations))
	}
	for v := have + 1; v <= len(db.d.migrations); v++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, stmt := range strings.Split(db.d.migrations[v-1], ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				tx.Rollback()
				return fmt.Errorf("migration %d: %w", v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`), v, time.Now().UnixMicro()); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return nil
}
