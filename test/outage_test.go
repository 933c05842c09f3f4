package test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// TestServePostgresOutage runs memfs serve on PostgreSQL through a TCP
// proxy, then cuts the proxy: every connection closed, new ones refused,
// as when the database host goes away. Requests must answer 503
// overloaded_error with retry-after (so clients back off and retry), never
// 500 api_error or 401, and nothing a refused request tried to write may
// appear once the database is back, when requests succeed again.
func TestServePostgresOutage(t *testing.T) {
	dsn := sqltest.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startTCPProxy(t, u.Host)
	proxied := *u
	proxied.Host = proxy.addr
	srv := harness.StartServe(t, harness.ServeOptions{DB: proxied.String()})
	admin := newServeAPI(srv.URL, srv.AdminKey)

	storeID := admin.newStore(t, "outage")
	admin.newMemory(t, storeID, "/before", "written before the outage")
	var env store.Environment
	admin.must(t, "POST", "/v1/environments", map[string]any{"name": "outage"}, &env)
	var head store.ChangePage
	admin.must(t, "GET", "/v1/memory_stores/"+storeID+"/changes", nil, &head)

	proxy.cut()

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
		wantOverloaded(t, "database away: "+c.what, r, proxy.addr)
	}

	proxy.restore()
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

// tcpProxy forwards TCP connections from a loopback port to a target, and
// can be cut (every connection closed, the port closed so new connections
// are refused) and restored on the same port.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string // the proxy's address, kept across cut and restore

	mu    sync.Mutex
	ln    net.Listener          // GUARDED_BY(mu); nil while cut
	conns map[net.Conn]struct{} // GUARDED_BY(mu)
	wg    sync.WaitGroup        // accept loops and pipes
}

// startTCPProxy listens on a free loopback port; it is cut and its
// goroutines waited for when the test ends.
func startTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by cut
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

// pipe forwards one client connection to the target until either side
// closes or the proxy is cut.
func (p *tcpProxy) pipe(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		client.Close()
		server.Close()
		return
	}
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			client.Close()
			server.Close()
			p.untrack(client, server)
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(server, client); closeBoth() }) //nolint:errcheck
	wg.Go(func() { io.Copy(client, server); closeBoth() }) //nolint:errcheck
	wg.Wait()
}

// track records a connection pair, unless the proxy was cut meanwhile.
func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// cut closes the port and every forwarded connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// restore listens on the proxy's port again (free: nothing else listens
// on loopback ports it did not ask for, and Go sets SO_REUSEADDR).
func (p *tcpProxy) restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("restore the proxy on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
