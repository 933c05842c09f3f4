package sqlstore

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// A plan case is one query of plans.go with arguments of the right types.
// walk marks a query that reads a range bounded only by its LIMIT, walked
// in index order (a page of a listing or of the feed): there a seek on
// the scope column alone is right, and a sort is what would be wrong.
type planCase struct {
	name string
	q    string
	args []any
	walk bool
	pg   bool // PostgreSQL only
	// pgWalkAll names an index PostgreSQL may walk whole, in the query's
	// order, filtering and stopping at LIMIT (see VersionsByStore).
	pgWalkAll string
}

// scopeColumn is, per growing table, the column that selects one store's
// (environment's, session's) rows: a seek on it alone reads them all.
var scopeColumn = map[string]string{
	"memories":        "store_id",
	"memory_versions": "store_id",
	"memory_changes":  "store_id",
	"work_items":      "environment_id",
	"session_events":  "session_id",
	"api_keys":        "kind",
	"agent_versions":  "agent_id",
}

func planCases(d *dialect) []planCase {
	const s, p = "memstore_x", "/a/b"
	anc := ancestors(p)
	vers := func(where ...string) string {
		return qVersionsSelect + strings.Join(append([]string{"store_id = ?"}, where...), " AND ") + qVersionsOrder
	}
	return []planCase{
		{name: "PathTaken", q: qPathTaken, args: pathTakenArgs(s, p, "mem_self")},
		{name: "PathAncestor", q: qPathAncestor(len(anc)), args: []any{s, "mem_self", anc[0]}},
		{name: "GetMemory", q: qGetMemory, args: []any{s, "mem_1"}},
		{name: "UpdateMemory", q: qUpdateMemory, args: []any{"v", p, d.text("c"), "sha", 1, int64(1), "mem_1"}},
		{name: "DeleteMemory", q: qDeleteMemory, args: []any{"mem_1"}},
		{name: "ListPageRoot", q: qListPage(memoryColumns, ">="), args: []any{s, "/", "0", 101}, walk: true},
		{name: "ListPagePrefix", q: qListPage(memoryColumns, ">"), args: []any{s, "/a/b", "/a0", 101}, walk: true},
		{name: "ListMore", q: qListMore(">"), args: []any{s, "/a/b", "/a0"}, walk: true},
		{name: "FeedPage", q: qFeedPage, args: []any{s, int64(5), 101}, walk: true},
		// PostgreSQL pages the versions of a store holding much of the
		// table by walking the primary key (n) newest first: the store's
		// rows are then every other one it reads. For a small store it
		// seeks memory_versions_store (the statistics decide).
		{name: "VersionsByStore", q: vers(), args: []any{s, 101}, walk: true, pgWalkAll: "memory_versions_pkey"},
		{name: "VersionsByMemory", q: vers("n < ?", "memory_id = ?"), args: []any{s, int64(99), "mem_1", 101}, walk: true},
		{name: "GetVersion", q: qGetVersion, args: []any{s, "ver_1"}},
		{name: "RedactChange", q: qRedactChange, args: []any{s, "ver_1"}},
		{name: "Poll", q: qPoll + d.forUpdate, args: []any{"env_1", store.WorkQueued, int64(1), store.WorkStarting, store.WorkActive, store.WorkStopping, int64(2), store.WorkStarting, int64(2)}},
		{name: "ListWork", q: qListWork + ` ORDER BY n DESC LIMIT ?`, args: []any{int64(1) << 62, "env_1", 101}, walk: true},
		{name: "EventsPage", q: qEventsSelect + `session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, args: []any{"sesn_1", int64(50), 101}, walk: true},
		{name: "WorkStats", q: qWorkStats, args: []any{int64(1), int64(1), "env_1", store.WorkQueued}},
		{name: "RevokeScopeKeys", q: qRevokeScopeKeys, args: []any{store.KeyKindSession, "work_1"}},
		{name: "CountKeys", q: qCountKeys, args: []any{store.KeyKindAdmin}, walk: true},
		{name: "PruneMark", q: qPruneMark, args: []any{int64(100)}},
		{name: "PruneDelete", q: qPruneDelete, args: []any{int64(100)}},
		{name: "EventsAfter", q: qEventsAfter, args: []any{"sesn_1", int64(0), int64(9), 101}, walk: true},
		{name: "GetAgent", q: qGetAgent, args: []any{"agent_1"}},
		{name: "GetAgentVersion", q: qGetAgentVersion, args: []any{"agent_1", int64(2)}},
		{name: "ListAgents", q: qListAgents + ` AND agents.archived_at IS NULL ORDER BY n DESC LIMIT ?`, args: []any{int64(1) << 62, 101}, walk: true},
		{name: "LockAgent", q: qLockAgent + d.forUpdate, args: []any{"agent_1"}},
		{name: "PGCreate", pg: true, q: pgCreate, args: []any{s, "mem_2", "ver_2", p, []byte("c"), "sha", int64(1), int64(1), "api", "key", int64(10), p + "/", subtreeEnd(p), anc}},
	}
}

// TestPlansSQLite fails when a query of plans.go reads a store's rows
// (its versions, feed, an environment's work) without a bounded range.
func TestPlansSQLite(t *testing.T) {
	db := planDB(t, sqltest.SQLite(t))
	for _, c := range planCases(db.d) {
		if c.pg {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			rows, err := db.sql.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.q, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var lines []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				if bad := sqliteUnbounded(l, c.walk); bad != "" {
					t.Errorf("%s\nplan:\n  %s", bad, strings.Join(lines, "\n  "))
				}
			}
		})
	}
}

var sqliteStep = regexp.MustCompile(`^(SCAN|SEARCH) (\w+)(?: USING (?:COVERING )?(?:INDEX \w+|INTEGER PRIMARY KEY|PRIMARY KEY))?(?: \((.*)\))?`)

// sqliteUnbounded says what is wrong with one line of a SQLite plan, or "".
func sqliteUnbounded(line string, walk bool) string {
	if walk && strings.Contains(line, "TEMP B-TREE") {
		return "a page sorts its whole range: " + line
	}
	m := sqliteStep.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	scope, ok := scopeColumn[m[2]]
	if !ok {
		return ""
	}
	if m[1] == "SCAN" {
		return "full scan: " + line
	}
	if !walk && onlyColumn(sqliteColumns(m[3]), scope) {
		return "reads every row of its " + scope + ": " + line
	}
	return ""
}

// sqliteColumns returns the columns of "store_id=? AND path>? AND path<?".
func sqliteColumns(cond string) []string {
	var cols []string
	for _, part := range strings.Split(cond, " AND ") {
		cols = append(cols, strings.TrimRight(strings.FieldsFunc(part, func(r rune) bool { return strings.ContainsRune("=<>", r) })[0], " "))
	}
	return cols
}

func onlyColumn(cols []string, scope string) bool {
	for _, c := range cols {
		if c != scope {
			return false
		}
	}
	return true
}

// TestPlansPostgres is TestPlansSQLite on PostgreSQL, with seq scans off
// so that tables this small show the index the planner would pick at
// scale. Each query is planned twice: for its arguments (a custom plan)
// and for any arguments (the generic plan, which PostgreSQL may cache for
// a prepared statement after five runs, as pgx prepares every query: the
// old path check, fine in a custom plan, was a walk of the whole store in
// the generic one, 82 creates/s at 30,000 memories).
func TestPlansPostgres(t *testing.T) {
	db := planDB(t, sqltest.Postgres(t))
	for _, c := range planCases(db.d) {
		for _, generic := range []bool{false, true} {
			name := c.name + "/custom"
			if generic {
				name = c.name + "/generic"
			}
			t.Run(name, func(t *testing.T) { checkPGPlan(t, db, c, generic) })
		}
	}
}

var pgParam = regexp.MustCompile(`\$(\d+)`)

func checkPGPlan(t *testing.T, db *DB, c planCase, generic bool) {
	ctx := t.Context()
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	q := db.d.q(c.q)
	var js string
	if !generic {
		err = tx.QueryRowContext(ctx, "EXPLAIN (FORMAT JSON) "+q, c.args...).Scan(&js)
	} else {
		// A prepared statement outlives the transaction: deallocated
		// here, on the connection that prepared it.
		n := 0
		for _, m := range pgParam.FindAllStringSubmatch(q, -1) {
			if k, _ := strconv.Atoi(m[1]); k > n {
				n = k
			}
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
		if _, err := tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "PREPARE plan_check AS "+q); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(context.Background(), "DEALLOCATE plan_check")
		err = tx.QueryRowContext(ctx, "EXPLAIN (FORMAT JSON) EXECUTE plan_check ("+nulls+")").Scan(&js)
	}
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan pgNode }
	if err := json.Unmarshal([]byte(js), &plans); err != nil {
		t.Fatal(err)
	}
	for _, bad := range pgUnbounded(&plans[0].Plan, c.walk, c.pgWalkAll) {
		t.Errorf("%s\nplan:\n%s", bad, plans[0].Plan.String(1))
	}
}

type pgNode struct {
	NodeType  string   `json:"Node Type"`
	Relation  string   `json:"Relation Name"`
	IndexName string   `json:"Index Name"`
	IndexCond string   `json:"Index Cond"`
	Plans     []pgNode `json:"Plans"`
}

// String is the plan as one line a node, indented by depth.
func (n *pgNode) String(depth int) string {
	s := strings.Repeat("  ", depth) + n.NodeType
	if n.Relation != "" {
		s += " on " + n.Relation
	}
	if n.IndexName != "" {
		s += " using " + n.IndexName
	}
	if n.IndexCond != "" {
		s += " cond " + n.IndexCond
	}
	for i := range n.Plans {
		s += "\n" + n.Plans[i].String(depth+1)
	}
	return s
}

var pgCondColumn = regexp.MustCompile(`(?:\w+\.)?(\w+) (?:=|<>|<|>|<=|>=) `)

// pgUnbounded lists what is wrong in a PostgreSQL plan. A Bitmap Index
// Scan names no relation; its index's name starts with its table's (or is
// a constraint's, which does too).
func pgUnbounded(n *pgNode, walk bool, walkAll string) []string {
	var out []string
	if walk && strings.Contains(n.NodeType, "Sort") {
		out = append(out, "a page sorts its whole range")
	}
	rel := n.Relation
	if rel == "" && n.IndexName != "" {
		for t := range scopeColumn {
			if strings.HasPrefix(n.IndexName, t+"_") && len(t) > len(rel) {
				rel = t
			}
		}
	}
	if scope, ok := scopeColumn[rel]; ok {
		switch {
		case n.NodeType == "Seq Scan":
			out = append(out, "full scan of "+rel)
		case n.IndexCond == "" && walk && n.IndexName == walkAll && n.NodeType == "Index Scan":
		case n.IndexCond == "" && strings.Contains(n.NodeType, "Index"):
			out = append(out, "whole index of "+rel+" read ("+n.IndexName+")")
		case n.IndexCond != "" && !walk:
			var cols []string
			for _, m := range pgCondColumn.FindAllStringSubmatch(n.IndexCond, -1) {
				cols = append(cols, m[1])
			}
			if onlyColumn(cols, scope) {
				out = append(out, "reads every row of its "+scope+": "+rel+" "+n.IndexCond)
			}
		}
	}
	for i := range n.Plans {
		out = append(out, pgUnbounded(&n.Plans[i], walk, walkAll)...)
	}
	return out
}

// planDB opens dsn with a store of a few memories, so the tables and
// their statistics exist.
func planDB(t *testing.T, dsn string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := db.CreateStore(ctx, store.CreateStoreInput{Name: "plans"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/b/c", "/a/d", "/e"} {
		if _, err := db.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: p, Content: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if db.d.name == "postgres" {
		// One store of 30,000 memories (the shape the X1 benchmark measured:
		// with it the old path check's generic plan walks the whole
		// store, with 95% it does not), versions and changes of a large
		// store beside 99 small ones, an environment of mostly stopped
		// work, and statistics as autovacuum would gather them: on tables
		// of three rows every index costs the same, and the planner's
		// choice says nothing about a large store.
		for _, q := range []string{
			`INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at)
				SELECT CASE WHEN i = 0 THEN 'memstore_x' ELSE 'memstore_' || i END, 'x', '', '{}', 0, 0 FROM generate_series(0, 99) i`,
			`INSERT INTO memories (id, store_id, path, content, sha, size, version_id, created_at, updated_at)
				SELECT 'mem_' || i, 'memstore_x', '/d' || (i % 50) || '/f' || i, '', '', 0, 'ver_' || i, 0, 0 FROM generate_series(1, 30000) i`,
			`INSERT INTO memory_versions (id, store_id, memory_id, operation, path, created_at, actor_type, actor_id)
				SELECT 'ver_' || i, CASE WHEN i % 20 <> 0 THEN 'memstore_x' ELSE 'memstore_' || (1 + i % 99) END, 'mem_' || (i % 2500), 'created', '/p', 0, 'api', 'k' FROM generate_series(1, 20000) i`,
			`INSERT INTO memory_changes (store_id, seq, operation, memory_id, version_id, actor_type, actor_id, created_at)
				SELECT CASE WHEN i % 20 <> 0 THEN 'memstore_x' ELSE 'memstore_' || (1 + i % 99) END, i, 'created', 'mem_' || i, 'ver_' || i, 'api', 'k', i FROM generate_series(1, 20000) i`,
			`INSERT INTO environments (id, name, metadata, config, scope, created_at, updated_at) VALUES ('env_1', 'e', '{}', '{}', 'x', 0, 0)`,
			`INSERT INTO work_items (id, environment_id, data_type, data_id, state, metadata, created_at)
				SELECT 'work_' || i, 'env_1', 'session', 'sesn_' || i, CASE WHEN i % 1000 = 0 THEN 'queued' ELSE 'stopped' END, '{}', 0 FROM generate_series(1, 20000) i`,
			`ANALYZE`,
		} {
			if _, err := db.sql.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	return db
}
