package sqlstore

import (
	"strings"

	"github.com/memfs/memfs/store"
)

// The queries on tables that grow with the data (memories, versions, the
// change feed, work items, session events) are named here, once, so that
// the code runs them and plans_test.go asks the database for their plans:
// the test checks the real text, not a copy. Each comment names the index
// that serves the query; doc.go ("Indexes") has the table.

// qPathTaken finds the memory (other than self) at path p or below it,
// p itself first: a create or rename to p conflicts with it. It is two
// seeks of UNIQUE (store_id, path), the path and the first row of the
// range [p+"/", subtreeEnd(p)), each reading at most one row more (self).
// Written as one condition, "path = p OR path in the range", SQLite reads
// the whole store: the OR keeps it from using either bound, and
// PostgreSQL sorts every row of the store. A single range [p, p+"0")
// would not do either: it holds p's siblings "p.txt", "p-1" too.
// Args: see pathTakenArgs.
const qPathTaken = `SELECT id, path FROM (
	SELECT id, path FROM memories WHERE store_id = ? AND path = ? AND id <> ?
	UNION ALL
	SELECT id, path FROM (SELECT id, path FROM memories WHERE store_id = ? AND path >= ? AND path < ? AND id <> ? ORDER BY path LIMIT 1) below
) hit ORDER BY path LIMIT 1`

// pathTakenArgs are qPathTaken's arguments for a memory selfID ("" for a
// create) taking path p.
func pathTakenArgs(storeID, p, selfID string) []any {
	return []any{storeID, p, selfID, storeID, p + "/", subtreeEnd(p), selfID}
}

// qPathAncestor finds a memory (other than self) at one of n ancestors of
// a path: the path would be below a file. One seek per ancestor on
// UNIQUE (store_id, path). Args: store, self, the ancestors.
func qPathAncestor(n int) string {
	return `SELECT id, path FROM memories WHERE store_id = ? AND id <> ? AND path IN (?` + strings.Repeat(", ?", n-1) + `) LIMIT 1`
}

// qGetMemory reads one memory by id (primary key; store_id is a filter
// on that one row). Args: store, id.
const qGetMemory = `SELECT ` + memoryColumns + ` FROM memories WHERE store_id = ? AND id = ?`

// qUpdateMemory rewrites one memory by id (primary key).
const qUpdateMemory = `UPDATE memories SET version_id = ?, path = ?, content = ?, sha = ?, size = ?, updated_at = ? WHERE id = ?`

// qDeleteMemory deletes one memory by id (primary key).
const qDeleteMemory = `DELETE FROM memories WHERE id = ?`

// qListPage reads the next memories of a listing: a range of
// UNIQUE (store_id, path) walked in order and stopped by LIMIT, so a page
// costs the same at every store size. op is ">=" or ">". Args: store,
// bound, end, limit.
func qListPage(cols, op string) string {
	return `SELECT ` + cols + ` FROM memories WHERE store_id = ? AND path ` + op + ` ? AND path < ? ORDER BY path LIMIT ?`
}

// qListMore asks whether anything follows a full page (one row of the
// same range). Args: store, bound, end.
func qListMore(op string) string {
	return `SELECT 1 FROM memories WHERE store_id = ? AND path ` + op + ` ? AND path < ? LIMIT 1`
}

// qFeedPage reads the change feed after a cursor: a range of the primary
// key (store_id, seq) stopped by LIMIT. Args: store, after, limit.
const qFeedPage = `SELECT seq, operation, memory_id, path, previous_path, sha, size, version_id, actor_type, actor_id FROM memory_changes WHERE store_id = ? AND seq > ? ORDER BY seq LIMIT ?`

// qVersionsSelect and qVersionsOrder frame a version listing; its
// conditions start with store_id = ? and may add n < ?, memory_id = ? and
// filters. With memory_id it is a range of memory_versions_memory
// (store_id, memory_id, n); without, memory_versions_store (store_id, n)
// walked newest first and stopped by LIMIT.
const (
	qVersionsSelect = `SELECT ` + versionColumns + ` FROM memory_versions WHERE `
	qVersionsOrder  = ` ORDER BY n DESC LIMIT ?`
)

// qGetVersion reads one version by id (UNIQUE (id)). Args: store, id.
const qGetVersion = `SELECT ` + versionColumns + ` FROM memory_versions WHERE store_id = ? AND id = ?`

// qRedactChange wipes the change-feed row of one version. Args: store,
// version id.
const qRedactChange = `UPDATE memory_changes SET path = NULL, previous_path = NULL, sha = NULL, size = NULL WHERE store_id = ? AND version_id = ?`

// qPoll finds the oldest item of an environment a worker may claim (see
// Poll); the dialect's FOR UPDATE is appended. The live states, implied by
// the conditions after them, are spelled out as constants so that the
// planner seeks work_items_env (environment_id, state, n) for each and
// reads the environment's live items only, never its stopped history,
// which only grows. "ORDER BY +n" (the same order) keeps SQLite from
// walking work_items_env_n in n order instead, through every stopped item
// older than the first live one. Args: environment, queued, reclaim, starting, active,
// stopping, now, starting, now.
const qPoll = `SELECT id, state FROM work_items WHERE environment_id = ? AND state IN ('` +
	store.WorkQueued + `', '` + store.WorkStarting + `', '` + store.WorkActive + `', '` + store.WorkStopping + `') AND (
		(state = ? AND (claimed_at IS NULL OR claimed_at < ?))
		OR (state IN (?, ?, ?) AND lease_expires_at IS NOT NULL AND lease_expires_at < ?)
		OR (state = ? AND lease_expires_at IS NULL AND acknowledged_at < ? - lease_ttl * 1000000))
	ORDER BY +n LIMIT 1`

// qListWork lists an environment's items newest first (with
// listNewestFirst's ORDER BY n DESC LIMIT). Args: bound, environment.
const qListWork = `SELECT ` + workColumns + ` FROM work_items WHERE n < ? AND environment_id = ?`

// qEventsAfter reads a session's events after a seq up to a head: a
// range of the primary key (session_id, seq). Args: session, after, head,
// limit.
const qEventsAfter = `SELECT ` + eventColumns + ` FROM session_events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`

// qEventsSelect frames an event listing: session_id = ? and optional
// bounds on seq, types and time, then ORDER BY seq ASC or DESC LIMIT ?, a
// range of the primary key (session_id, seq) stopped by LIMIT. Filters on
// type or time are applied to the rows walked.
const qEventsSelect = `SELECT ` + eventColumns + ` FROM session_events WHERE `

// qWorkStats counts an environment's queued items: a seek of
// work_items_env (environment_id, state) reading the queued ones only.
// Args: reclaim, reclaim, environment, queued.
const qWorkStats = `SELECT
		COALESCE(SUM(CASE WHEN claimed_at IS NULL OR claimed_at < ? THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN claimed_at >= ? THEN 1 ELSE 0 END), 0),
		MIN(created_at)
	FROM work_items WHERE environment_id = ? AND state = ?`

// qPruneMark records, per store, the highest seq a prune drops. It reads
// the rows older than the cutoff through memory_changes_time (created_at),
// the rows qPruneDelete then deletes, so a prune costs what it drops; a
// subquery per store, as it was, read each store's whole feed through the
// primary key. Grouping by store_id || ” (the same groups) keeps SQLite
// from reading the whole primary key, in store_id order, to group without
// a sort. Args: cutoff.
const qPruneMark = `UPDATE memory_stores SET pruned_seq = old.seq
	FROM (SELECT store_id || '' AS store_id, MAX(seq) AS seq FROM memory_changes WHERE created_at < ? GROUP BY store_id || '') old
	WHERE memory_stores.id = old.store_id`

// qPruneDelete drops the feed rows older than the cutoff, a range of
// memory_changes_time. Args: cutoff.
const qPruneDelete = `DELETE FROM memory_changes WHERE created_at < ?`

// qRevokeScopeKeys deletes the keys of a kind and scope (a claim revokes
// its work item's earlier session tokens): a seek of api_keys_scope
// (kind, scope_id). Args: kind, scope.
const qRevokeScopeKeys = `DELETE FROM api_keys WHERE kind = ? AND scope_id = ?`

// qCountKeys counts the keys of a kind (the admin keys, at start-up): the
// range of api_keys_scope that it counts. Args: kind.
const qCountKeys = `SELECT COUNT(*) FROM api_keys WHERE kind = ?`

// qGetAgent reads an agent at its current version: a seek of
// UNIQUE (agents.id), then, for its config, of agent_versions' primary key
// (agent_id, version). The config is a correlated subquery, not a join:
// joined on version = agents.version, PostgreSQL seeks agent_id alone and
// filters the version (every version of the agent read). Args: id.
const qGetAgent = `SELECT ` + currentAgentColumns + ` FROM agents WHERE agents.id = ?`

// qGetAgentVersion reads an agent at a given version: the same two
// seeks, the version given. Args: id, version.
const qGetAgentVersion = `SELECT ` + agentColumns + ` FROM agents JOIN agent_versions ON agent_versions.agent_id = agents.id WHERE agents.id = ? AND agent_versions.version = ?`

// qListAgents frames an agent listing (with listNewestFirst's ORDER BY n
// DESC LIMIT): agents walked newest first by their primary key, each
// one's config read by a seek of agent_versions' primary key. Args:
// bound, then the filters' values.
const qListAgents = `SELECT ` + currentAgentColumns + ` FROM agents WHERE agents.n < ?`

// qLockAgent reads (and, with the dialect's FOR UPDATE, locks) an agent
// row for an update: a seek of UNIQUE (agents.id). Args: id.
const qLockAgent = `SELECT version, archived_at FROM agents WHERE id = ?`

// qInsertAgentVersion writes one version of an agent. Args: agent,
// version, config, created_at.
const qInsertAgentVersion = `INSERT INTO agent_versions (agent_id, version, config, created_at) VALUES (?, ?, ?, ?)`
