// Package sqlstore implements store.Backend on SQLite (modernc.org/sqlite,
// the embedded default) and PostgreSQL (github.com/jackc/pgx/v5), with one
// body of SQL and a small dialect for the differences.
//
// # Transactions and ordering
//
// Every mutation runs in one transaction (a create, update or delete of a
// memory may share it with others, below) that first locks its store's row
// (SELECT ... FOR UPDATE on PostgreSQL; on SQLite, a process-wide writer
// mutex plus BEGIN IMMEDIATE), then checks preconditions, path conflicts
// and the memory cap, then writes the memory, its version row and its
// change-feed row. The change sequence number is memory_stores.last_seq + 1,
// assigned in that same transaction, so the feed is gap-free and strictly
// increasing per store and a reader never sees a seq whose write is not
// committed.
//
// # Grouped writes
//
// Writes to one store's memories serialise on the store row (on SQLite,
// on the writer mutex), so what sets their rate is how long that lock is
// held and how many commits, each an fsync, they need. The generic
// transaction holds the lock across about eight statements (on
// PostgreSQL, eight client round trips) and commits once per write.
// CreateMemory, UpdateMemory (a content change and/or a rename) and
// DeleteMemory instead queue their write per store (group.go): while one
// group is in flight, the writes that arrive wait, and the next group
// carries all of them (at most 64) in one transaction with one store
// lock, one commit and one NOTIFY.
//
// There are two queues per store: creates, and changes (updates and
// deletes together). Creates keep a queue of their own because on
// PostgreSQL they have a pipeline of their own (below); updates and
// deletes share one so that a group sees them in arrival order (a rename
// to a path a delete just freed). Groups of the two queues serialise on
// the store lock like any two transactions, so the store still sees its
// writes one after another.
//
// A group of changes, and on SQLite a group of creates, is one writeTx
// running each write's checks and writes in turn (runWritesTx; createIn,
// updateIn, deleteIn). Every refusal is found by a check before the write
// writes anything, never by a failing statement, so no savepoint is
// needed. UpdateMemory's answer is built from what its write wrote, a
// value of its own: it is what GetMemory would read right after that
// write, whatever later writes of its group do to the same memory.
//
// On PostgreSQL a group of creates (pgcreate.go) is one pipeline with a
// single Sync, which the server runs as one implicit transaction: the
// store-lock statement, then one CTE statement per create that reads the
// store's state, looks for a memory in the path's way, and only when
// nothing refuses the create writes the version row, the feed row
// numbered last_seq + 1, the memory, the counters and the NOTIFY. So a
// group costs one round trip, one lock hold and one commit, however many
// creates it holds. Changes need no such pipeline: one transaction per
// group already shares the commit, which is what costs most.
//
// Each write keeps its own outcome. It sees the writes before it in its
// group, so a group behaves exactly as its writes one after another (two
// creates of, or renames to, one path: the second is a path conflict; the
// cap counts the earlier creates; a precondition is checked against the
// content the earlier writes left). A refused write (not found, archived
// store, precondition failed, path conflict, cap) writes nothing and is
// not an SQL error, so it refuses only itself. An error of the database
// rolls the group back and is every member's answer: none of them was
// acknowledged, as with a failed commit of a single write. Every write
// is acknowledged only after the commit that holds it. A caller whose
// context ends while queued leaves the queue; once its group is in flight
// it waits for the outcome, and the group is cancelled only when all its
// callers have gone. Across memfs serve processes sharing a database,
// groups still serialise on the store row.
//
// On PostgreSQL the lock is a statement of its own because under READ
// COMMITTED each statement reads a fresh snapshot: taken after the lock
// is granted, the CTEs see every write of the store's previous lock
// holder, so the file/directory rule (which no unique index can express)
// holds as it does in the generic path. A FOR UPDATE inside the CTE
// would re-read only the store row, not the memories (storetest's
// Concurrency/FileDir fails so).
//
// The feed keeps its per-store counter rather than a sequence: a sequence
// hands out numbers outside the store lock, so seq N+1 could commit before
// N, and a reader that had read N+1 would skip N. With the counter under
// the row lock, commit order is seq order: N is visible before N+1's
// transaction can take the lock, and readers need no gap handling
// (Concurrency/FeedReaderNoGaps).
//
// # Schema
//
// Timestamps are BIGINT microseconds since the Unix epoch (UTC). Paths are
// compared byte-wise (PostgreSQL: COLLATE "C"), which gives the stable
// listing order and makes "everything below /a/" the range
// ["/a/", "/a0") because '0' is the byte after '/'. Migrations are
// numbered, applied in order in their own transactions, and recorded in
// schema_migrations; a fresh database migrates itself on Open.
//
// # Indexes
//
// Every query costs O(log n) in its index, or O(page) for a listing,
// whatever the size of the store; plans_test.go asks both
// databases for the plan of each query named in plans.go and fails on a
// scan, or a seek on store_id (environment_id, session_id) alone, that a
// LIMIT does not stop. Which index serves which query:
//
//	memories UNIQUE (store_id, path)
//	    qPathTaken: a seek of the path, and of the first row of
//	    [p+"/", subtreeEnd(p)); qPathAncestor: one seek per ancestor;
//	    pgCreate's hit CTE: the same three; qListPage, qListMore: a
//	    range walked in path order, stopped by LIMIT
//	memories PRIMARY KEY (id)
//	    qGetMemory, qUpdateMemory, qDeleteMemory (and the read before an
//	    update or delete, which is qGetMemory)
//	memory_changes PRIMARY KEY (store_id, seq)
//	    qFeedPage (a range after the cursor, stopped by LIMIT); pgCreate's
//	    read of the last change's time (a seek)
//	memory_changes_version (store_id, version_id), migration 5
//	    qRedactChange
//	memory_changes_time (created_at)
//	    qPruneMark and qPruneDelete: the range of rows older than the
//	    cutoff, all of which the prune drops
//	memory_versions_memory (store_id, memory_id, n)
//	    a version listing of one memory, newest first
//	memory_versions_store (store_id, n)
//	    a version listing of a store, newest first (PostgreSQL may walk
//	    the primary key n instead when the store holds much of the table:
//	    the statistics decide); filters on operation, actor or time are
//	    applied to the rows walked, so a rare match reads further
//	memory_versions UNIQUE (id)
//	    qGetVersion
//	work_items_env (environment_id, state, n)
//	    qPoll: a seek per live state (queued, starting, active, stopping),
//	    so a poll reads the environment's live items, never its stopped
//	    history; qWorkStats: the queued ones
//	work_items_env_n (environment_id, n), migration 5
//	    qListWork, newest first, stopped by LIMIT
//	work_items_data (data_id)
//	    a session's work item
//	session_events PRIMARY KEY (session_id, seq)
//	    qEventsAfter and the event listings (qEventsSelect)
//	api_keys_scope (kind, scope_id), migration 5
//	    qRevokeScopeKeys (a claim revokes its item's earlier tokens),
//	    qCountKeys; a key is found by its UNIQUE hash
//	agent_versions PRIMARY KEY (agent_id, version), migration 6
//	    qGetAgentVersion; the config of qGetAgent and qListAgents (a
//	    subquery a row, both columns given)
//	sessions, environments, memory_stores, agents
//	    read by their unique id, listed newest first by their primary
//	    key n (agents: qGetAgent, qLockAgent, qListAgents)
//
// # Change feed wake-ups
//
// A commit wakes local long polls directly. On PostgreSQL the transaction
// also runs pg_notify('memfs_changes', store_id), delivered at commit, and
// every process LISTENs on that channel, so waiters in other memfs serve
// processes sharing the database wake too. Session event logs use the
// same channel, with the payload "events:" + session id (events.go), and
// so does the work queue: enqueuing an item (a session create, a
// healthcheck) notifies "queue:" + environment id in its transaction, so
// a work poll blocked on any process wakes at the commit instead of
// waiting out its block_ms. Unlike the change feed, the work queue wakes
// ONE blocked poll per enqueue in each process, not all of them
// (queuewake.go: a broadcast made every enqueue cost a poll query per
// worker). A claim or lease that lapses sends nothing:
// the item is offered on the next poll, which block_ms bounds. SQLite has
// one process, so its wake-up stays in-process. A notification lost while
// the listener reconnects is covered by waking every waiter after the
// reconnect.
//
// # Session event logs
//
// An append locks the session's row and numbers its events after
// sessions.last_event_seq in the same transaction, as the change feed does
// per store: a stream that read a head never misses an event committed
// late. Archiving a session appends its session.status_terminated in the
// archive's own transaction.
//
// # Errors
//
// Driver errors are classified in one place (errors.go) by SQLSTATE,
// SQLite extended result codes and Go error types, never by message text:
// a database that can't be reached or can't serve now is
// store.ErrUnavailable (HTTP 503 with retry-after), a write that lost the
// race for a path on the unique constraint is store.ErrPathConflict, and
// anything else is an internal error. Only sql.ErrNoRows means "absent":
// any other error of a query fails the operation, so a listing never ends
// early and a lookup never answers "not found" because the database was
// away.
//
// # Durability
//
// SQLite runs in WAL mode with synchronous=FULL by default: a write that
// was acknowledged survives kill -9 and power loss. Options.SQLiteSynchronous
// may relax that to NORMAL (survives a process crash, not a power loss).
package sqlstore
