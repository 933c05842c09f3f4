package test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// TestServePostgresOutage runs memfs serve on PostgreSQL through a
// harness.FaultProxy, then cuts the proxy: every connection reset, and
// every new one, as when the database host goes away. Requests must answer
// 503 overloaded_error with retry-after (so clients back off and retry),
// never 500 api_error or 401, and nothing a refused request tried to write
// may appear once the database is back, when requests succeed again.
func TestServePostgresOutage(t *testing.T) {
	dsn := sqltest.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := harness.NewFaultProxy(t, u.Host)
	proxied := *u
	proxied.Host = proxy.Addr()
	srv := harness.StartServe(t, harness.ServeOptions{DB: proxied.String()})
	admin := newServeAPI(srv.URL, srv.AdminKey)

	storeID := admin.newStore(t, "outage")
	admin.newMemory(t, storeID, "/before", "written before the outage")
	var env store.Environment
	admin.must(t, "POST", "/v1/environments", map[string]any{"name": "outage"}, &env)
	var head store.ChangePage
	admin.must(t, "GET", "/v1/memory_stores/"+storeID+"/changes", nil, &head)

	proxy.Cut()

	type call struct {
		what, method, path, key string
		body                    any
	}
	var refusedPaths []string
	calls := []call{
		{"get a store", "GET", "/v1/memory_stores/" + storeID, srv.AdminKey, nil},
		{"list memories", "GET", "/v1/memory_stores/" + storeID + "/memories", srv.AdminKey, nil},
		{"list stores", "GET", "/v1/memory_stores", srv.AdminKey, nil},
		{"change-feed long poll", "GET", fmt.Sprintf("/v1/memory_stores/%s/changes?after=%d&wait_ms=5000", storeID, head.NextCursor), srv.AdminKey, nil},
		// A key the server has not seen yet: its look-up needs the database.
		{"work stats with an environment key not yet verified", "GET", "/v1/environments/" + env.ID + "/work/stats", env.EnvironmentKey, nil},
		{"work poll", "GET", "/v1/environments/" + env.ID + "/work/poll?block_ms=500", env.EnvironmentKey, nil},
	}
	for i := range 3 {
		p := fmt.Sprintf("/during-%d", i)
		refusedPaths = append(refusedPaths, p)
		calls = append(calls, call{"create " + p, "POST", "/v1/memory_stores/" + storeID + "/memories", srv.AdminKey, map[string]any{"path": p, "content": "refused"}})
	}
	for _, c := range calls {
		r := rawCall(t, srv.URL, c.method, c.path, c.key, nil, c.body)
		wantOverloaded(t, "database away: "+c.what, r, proxy.Addr())
	}

	proxy.Pass()
	// The pool reconnects on its own: poll, bounded, until it has.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := rawCall(t, srv.URL, "GET", "/v1/memory_stores/"+storeID, srv.AdminKey, nil, nil)
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("database back: get a store: %s, want 200 (or 503 until the pool reconnects)", r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("database back for 30s, yet get a store still answers %s", r)
		}
		time.Sleep(50 * time.Millisecond) // polling the server, bounded by the deadline
	}
	admin.newMemory(t, storeID, "/after", "written after the outage")
	var stats store.WorkQueueStats
	envAPI := newServeAPI(srv.URL, env.EnvironmentKey)
	envAPI.must(t, "GET", "/v1/environments/"+env.ID+"/work/stats", nil, &stats)

	// Nothing the refused creates sent was written: through the API, and
	// in the database itself.
	got := slices.Sorted(maps.Keys(admin.allMemories(t, storeID)))
	if want := []string{"/after", "/before"}; !slices.Equal(got, want) {
		t.Errorf("memories after the outage: %q, want %q (the refused creates were %q)", got, want, refusedPaths)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM memory_versions WHERE path LIKE '/during-%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d versions of refused creates are in the database", n)
	}
}

// wantOverloaded checks a 503 overloaded_error envelope with retry-after
// (seconds) and retry-after-ms, whose message gives away nothing of the
// database (its address, the driver's text).
func wantOverloaded(t *testing.T, what string, r rawAnswer, dbAddr string) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("%s: %s, want 503 overloaded_error", what, r)
		return
	}
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Type != "error" || e.Error.Type != "overloaded_error" || e.Error.Message == "" || e.RequestID == "" {
		t.Errorf("%s: body %s, want the error envelope with error.type overloaded_error, a message and a request_id", what, r.body)
	}
	if s, err := strconv.Atoi(r.header.Get("retry-after")); err != nil || s < 1 {
		t.Errorf("%s: retry-after %q, want whole seconds >= 1", what, r.header.Get("retry-after"))
	}
	if ms, err := strconv.Atoi(r.header.Get("retry-after-ms")); err != nil || ms < 1 {
		t.Errorf("%s: retry-after-ms %q, want whole milliseconds >= 1", what, r.header.Get("retry-after-ms"))
	}
	_, port, _ := net.SplitHostPort(dbAddr)
	if strings.Contains(string(r.body), port) || strings.Contains(string(r.body), "failed to connect") {
		t.Errorf("%s: the answer shows the driver's error: %s", what, r.body)
	}
}
