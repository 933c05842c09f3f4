package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to watch pg_stat_activity

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// These tests run real `memfs serve` processes and talk to them over
// loopback HTTP with plain net/http.

// serveAPI calls a memfs serve process with one key.
type serveAPI struct {
	url, key string
	hc       *http.Client
}

func newServeAPI(url, key string) *serveAPI {
	// The timeout is only a failure bound for a hung server.
	return &serveAPI{url: url, key: key, hc: &http.Client{Timeout: 30 * time.Second}}
}

// call sends a JSON request and decodes a 200 answer into out. A non-200
// answer is an error that says so; err is also set when there was no
// answer at all (then status is 0).
func (a *serveAPI) call(ctx context.Context, method, path string, body, out any) (status int, err error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		return 0, err
	}
	for k, v := range harness.APIHeaders(path, a.key) {
		req.Header[k] = v
	}
	req.Header.Set("content-type", "application/json")
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return res.StatusCode, nil
}

// must is call that fails the test on any error.
func (a *serveAPI) must(t *testing.T, method, path string, body, out any) {
	t.Helper()
	if _, err := a.call(context.Background(), method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

func (a *serveAPI) newStore(t *testing.T, name string) string {
	t.Helper()
	var st store.Store
	a.must(t, "POST", "/v1/memory_stores", map[string]any{"name": name}, &st)
	return st.ID
}

func (a *serveAPI) newMemory(t *testing.T, storeID, path, content string) store.Memory {
	t.Helper()
	var m store.Memory
	a.must(t, "POST", "/v1/memory_stores/"+storeID+"/memories", map[string]any{"path": path, "content": content}, &m)
	return m
}

// allMemories lists a store with content, path -> memory.
func (a *serveAPI) allMemories(t *testing.T, storeID string) map[string]store.Memory {
	t.Helper()
	all := map[string]store.Memory{}
	for page := ""; ; {
		var p store.Page[store.MemoryListItem]
		a.must(t, "GET", "/v1/memory_stores/"+storeID+"/memories?view=full&limit=20&page="+url.QueryEscape(page), nil, &p)
		for _, it := range p.Data {
			all[it.Memory.Path] = *it.Memory
		}
		if page = p.NextPage; page == "" {
			return all
		}
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// serveBackends are the databases a memfs serve process runs on: SQLite
// in its data dir, and a fresh PostgreSQL database.
var serveBackends = []struct {
	name string
	db   func(testing.TB) string
}{
	{"sqlite", func(testing.TB) string { return "" }},
	{"postgres", sqltest.Postgres},
}

// writeRecord is what a writer knows about one memory: the content sha
// of its last acknowledged write, and the sha of a write that got no
// answer after it (the process died under it), if any.
type writeRecord struct {
	path, id       string
	acked, pending string
}

// TestServeDurableAcrossKill writes from concurrent clients, SIGKILLs
// memfs serve mid-load, restarts it and checks that every acknowledged
// write is there with exactly its content, and that an unacknowledged
// one is either absent or whole.
func TestServeDurableAcrossKill(t *testing.T) {
	for _, b := range serveBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := harness.StartServe(t, harness.ServeOptions{DB: b.db(t)})
			api := newServeAPI(srv.URL, srv.AdminKey)
			storeID := api.newStore(t, "durability")
			memories := "/v1/memory_stores/" + storeID + "/memories"

			// Each writer creates memories and updates its own (under a
			// precondition, as a sync client does) until the process dies.
			const writers = 8
			var (
				acked   atomic.Int64
				wg      sync.WaitGroup
				written = make([][]*writeRecord, writers) // written[w] is writer w's, read after wg.Wait
			)
			for w := range writers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					var mine []*writeRecord
					defer func() { written[w] = mine }()
					for n := 0; ; n++ {
						content := fmt.Sprintf("writer %d write %d ✓ %s", w, n, strings.Repeat("0123456789abcdef", rng.IntN(256)))
						var r *writeRecord
						var reqPath string
						var body map[string]any
						if len(mine) > 0 && n%3 == 2 {
							r = mine[rng.IntN(len(mine))]
							reqPath = memories + "/" + r.id
							body = map[string]any{"content": content, "precondition": map[string]string{"type": "content_sha256", "content_sha256": r.acked}}
						} else {
							r = &writeRecord{path: fmt.Sprintf("/w%d/m%04d", w, n)}
							mine = append(mine, r)
							reqPath = memories
							body = map[string]any{"path": r.path, "content": content}
						}
						r.pending = sha256Hex(content)
						var m store.Memory
						status, err := api.call(context.Background(), "POST", reqPath, body, &m)
						if status == 0 {
							return // no answer: the process is gone; the write stays pending
						}
						if err != nil {
							t.Errorf("writer %d: %v", w, err)
							return
						}
						if m.ContentSHA256 != r.pending || m.Path != r.path {
							t.Errorf("writer %d: writing %s answered %+v", w, r.path, m)
							return
						}
						r.id, r.acked, r.pending = m.ID, r.pending, ""
						acked.Add(1)
					}
				})
			}
			// Let the load run for a second and at least 150 writes, then
			// kill the process under it.
			loadStart := time.Now()
			deadline := loadStart.Add(30 * time.Second)
			for acked.Load() < 150 || time.Since(loadStart) < time.Second {
				if time.Now().After(deadline) {
					srv.Kill()
					wg.Wait()
					t.Fatalf("only %d writes acknowledged in 30s", acked.Load())
				}
				time.Sleep(10 * time.Millisecond) // polling the counter, bounded by the deadline
			}
			srv.Kill()
			wg.Wait()
			if t.Failed() {
				return
			}

			srv.Restart()
			got := api.allMemories(t, storeID)
			records := map[string]*writeRecord{}
			var nAcked, nPendingPresent, nPendingAbsent int
			for _, mine := range written {
				for _, r := range mine {
					records[r.path] = r
					m, ok := got[r.path]
					if ok && (m.Content == nil || sha256Hex(*m.Content) != m.ContentSHA256 || int64(len(*m.Content)) != m.ContentSizeBytes) {
						t.Errorf("%s is torn: its content does not match its sha or size (%+v)", r.path, m)
						continue
					}
					switch {
					case r.acked != "" && !ok:
						t.Errorf("%s: acknowledged write (sha %s) lost", r.path, r.acked)
					case ok && m.ContentSHA256 != r.acked && m.ContentSHA256 != r.pending:
						t.Errorf("%s: content sha %s is neither the acknowledged %q nor the unanswered %q", r.path, m.ContentSHA256, r.acked, r.pending)
					case ok && r.id != "" && m.ID != r.id:
						t.Errorf("%s: memory id %s, want %s", r.path, m.ID, r.id)
					}
					if r.acked != "" {
						nAcked++
					}
					if r.pending != "" {
						if ok && m.ContentSHA256 == r.pending {
							nPendingPresent++
						} else {
							nPendingAbsent++
						}
					}
				}
			}
			for path := range got {
				if records[path] == nil {
					t.Errorf("%s exists but was never written", path)
				}
			}
			t.Logf("%d acknowledged paths; unanswered writes: %d present, %d absent", nAcked, nPendingPresent, nPendingAbsent)
			if nPendingPresent+nPendingAbsent == 0 {
				t.Error("no write was in flight at the kill")
			}
			// The restarted process takes writes.
			api.newMemory(t, storeID, "/after-restart", "ok")
		})
	}
}

// TestServeCrossProcessWakeUp runs two memfs serve processes on one
// PostgreSQL database: a long poll on A must be woken by a commit made
// through B (LISTEN/NOTIFY), not time out.
func TestServeCrossProcessWakeUp(t *testing.T) {
	dsn := sqltest.Postgres(t)
	a := harness.StartServe(t, harness.ServeOptions{DB: dsn})
	b := harness.StartServe(t, harness.ServeOptions{DB: dsn})
	apiA, apiB := newServeAPI(a.URL, a.AdminKey), newServeAPI(b.URL, b.AdminKey)
	storeID := apiA.newStore(t, "shared")
	apiB.newMemory(t, storeID, "/first", "1")
	var head store.ChangePage
	apiA.must(t, "GET", "/v1/memory_stores/"+storeID+"/changes", nil, &head)

	watch, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if n := feedReads(t, watch); n != 0 {
		t.Fatalf("%d connections read the change feed before the long poll", n)
	}

	const wait = 20 * time.Second
	type answer struct {
		page    store.ChangePage
		err     error
		elapsed time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		start := time.Now()
		var p store.ChangePage
		_, err := apiA.call(context.Background(), "GET", fmt.Sprintf("/v1/memory_stores/%s/changes?after=%d&wait_ms=20000", storeID, head.NextCursor), nil, &p)
		done <- answer{p, err, time.Since(start)}
	}()
	// Wait until A has read the feed and found nothing: from then on,
	// only a wake-up can answer the poll with B's commit.
	for deadline := time.Now().Add(10 * time.Second); feedReads(t, watch) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("process A never read the change feed (no finished memory_changes query in pg_stat_activity)")
		}
		time.Sleep(5 * time.Millisecond) // polling pg_stat_activity, bounded by the deadline
	}
	m := apiB.newMemory(t, storeID, "/second", "2")
	select {
	case ans := <-done:
		if ans.err != nil {
			t.Fatal(ans.err)
		}
		if want := head.NextCursor + 1; len(ans.page.Data) != 1 || ans.page.Data[0].MemoryID != m.ID || ans.page.Data[0].Seq != want || ans.page.NextCursor != want {
			t.Fatalf("A's long poll answered %+v after %v; want B's creation of %s at seq %d", ans.page, ans.elapsed, m.ID, want)
		}
		if ans.elapsed > wait/2 {
			t.Errorf("A's long poll answered after %v of its %v wait: it was not woken", ans.elapsed, wait)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's long poll was not woken within 10s of B's commit")
	}
}

// feedReads counts the database connections whose last, finished query
// read rows of the change feed (what a long poll does before it waits).
func feedReads(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		AND state = 'idle' AND query LIKE '%FROM memory_changes WHERE store_id%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rawRequest is an HTTP/1.1 request written by hand on its own TCP
// connection, so the test controls when each byte is sent.
type rawRequest struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, addr, head string) *rawRequest {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return &rawRequest{conn: c, br: bufio.NewReader(c)}
}

// response reads the answer, bounded by d.
func (r *rawRequest) response(t *testing.T, d time.Duration) (*http.Response, []byte) {
	t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(d))
	res, err := http.ReadResponse(r.br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// awaitServerRead waits until the server has read everything sent on r:
// the client's send queue is empty and so is the server side's receive
// queue, which also proves the server accepted the connection. (The
// kernel's TCP table is the only outside view of that.)
func (r *rawRequest) awaitServerRead(t *testing.T) {
	t.Helper()
	client := r.conn.LocalAddr().(*net.TCPAddr).Port
	server := r.conn.RemoteAddr().(*net.TCPAddr).Port
	for deadline := time.Now().Add(10 * time.Second); ; {
		clientTx, serverRx, ok := tcpQueues(t, client, server)
		if ok && clientTx == 0 && serverRx == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not read the request within 10s (client tx %d, server rx %d, found %v)", clientTx, serverRx, ok)
		}
		time.Sleep(time.Millisecond) // polling the TCP table, bounded by the deadline
	}
}

// tcpQueues reads /proc/net/tcp for the loopback connection between the
// two ports: the client side's tx_queue and the server side's rx_queue.
func tcpQueues(t *testing.T, clientPort, serverPort int) (clientTx, serverRx int64, ok bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	port := func(addr string) int {
		_, p, _ := strings.Cut(addr, ":")
		n, _ := strconv.ParseInt(p, 16, 32)
		return int(n)
	}
	var sawClient, sawServer bool
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[3] != "01" { // 01: ESTABLISHED
			continue
		}
		tx, rx, _ := strings.Cut(f[4], ":")
		local, remote := port(f[1]), port(f[2])
		switch {
		case local == clientPort && remote == serverPort:
			clientTx, _ = strconv.ParseInt(tx, 16, 64)
			sawClient = true
		case local == serverPort && remote == clientPort:
			serverRx, _ = strconv.ParseInt(rx, 16, 64)
			sawServer = true
		}
	}
	return clientTx, serverRx, sawClient && sawServer
}

// TestServeGracefulShutdown: on SIGTERM, a long poll answers at once
// (200, no data), an in-flight write still completes and is kept, and the
// process exits 0.
func TestServeGracefulShutdown(t *testing.T) {
	srv := harness.StartServe(t, harness.ServeOptions{})
	api := newServeAPI(srv.URL, srv.AdminKey)
	storeID := api.newStore(t, "shutdown")
	api.newMemory(t, storeID, "/first", "1")
	var head store.ChangePage
	api.must(t, "GET", "/v1/memory_stores/"+storeID+"/changes", nil, &head)

	poll := dialRaw(t, srv.Addr, fmt.Sprintf("GET /v1/memory_stores/%s/changes?after=%d&wait_ms=25000 HTTP/1.1\r\n", storeID, head.NextCursor)+
		"Host: memfs\r\n"+harness.RawAPIHeaders("/v1/memory_stores/"+storeID+"/changes", srv.AdminKey)+"\r\n")
	// A create whose body is only half sent: the handler is running and
	// reading it when the signal arrives.
	content := strings.Repeat("in flight ", 1000)
	body := `{"path":"/in-flight","content":"` + content + `"}`
	half := len(body) / 2
	write := dialRaw(t, srv.Addr, "POST /v1/memory_stores/"+storeID+"/memories HTTP/1.1\r\n"+
		"Host: memfs\r\n"+harness.RawAPIHeaders("/v1/memory_stores/"+storeID+"/memories", srv.AdminKey)+"Content-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body[:half])
	poll.awaitServerRead(t)
	write.awaitServerRead(t)

	start := time.Now()
	srv.Signal(syscall.SIGTERM)
	res, b := poll.response(t, 20*time.Second)
	elapsed := time.Since(start)
	var page store.ChangePage
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &page) != nil {
		t.Fatalf("long poll at shutdown: %d %s", res.StatusCode, b)
	}
	if len(page.Data) != 0 || page.NextCursor != head.NextCursor {
		t.Errorf("long poll at shutdown: %+v, want no data at cursor %d", page, head.NextCursor)
	}
	if elapsed > 10*time.Second {
		t.Errorf("long poll answered %v after SIGTERM (wait_ms was 25000)", elapsed)
	}

	// The long poll answered, so shutdown has begun; finish the write.
	if _, err := io.WriteString(write.conn, body[half:]); err != nil {
		t.Fatal(err)
	}
	res, b = write.response(t, 20*time.Second)
	var m store.Memory
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &m) != nil || m.ContentSHA256 != sha256Hex(content) {
		t.Fatalf("in-flight create at shutdown: %d %s", res.StatusCode, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, err := srv.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("memfs serve after SIGTERM: exit %d, %v\n%s", code, err, srv.Output())
	}
	srv.Restart()
	var got store.Memory
	api.must(t, "GET", "/v1/memory_stores/"+storeID+"/memories/"+m.ID, nil, &got)
	if got.Content == nil || *got.Content != content {
		t.Errorf("the write finished during shutdown reads back as %+v", got)
	}
	srv.Stop()
}

// TestServeGeneratesAdminKey starts memfs serve without an admin key: it
// generates one into <data-dir>/admin.key (0600), says where it is, keeps
// only its hash in the database, and reuses it on the next start.
func TestServeGeneratesAdminKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "admin.key")

	first := startBare(t, dir)
	out, url := first.out.String(), first.url
	if !strings.Contains(out, "generated an admin key") || !strings.Contains(out, keyFile) {
		t.Errorf("first start did not say where the generated key is:\n%s", out)
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", keyFile, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	if len(key) < 32 {
		t.Fatalf("generated key %q is too short", key)
	}
	if _, err := newServeAPI(url, key).call(context.Background(), "GET", "/v1/memory_stores", nil, nil); err != nil {
		t.Fatalf("the generated key does not work: %v", err)
	}
	if status, _ := newServeAPI(url, key+"x").call(context.Background(), "GET", "/v1/memory_stores", nil, nil); status != http.StatusUnauthorized {
		t.Errorf("a wrong key got %d, want 401", status)
	}
	first.stop(t)

	// Only the hash is stored: the key appears in no database file.
	files, _ := filepath.Glob(filepath.Join(dir, "memfs.db*"))
	if len(files) == 0 {
		t.Fatalf("no database in %s", dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("%s contains the admin key in plain text", f)
		}
	}

	second := startBare(t, dir)
	out, url = second.out.String(), second.url
	if strings.Contains(out, "generated") || !strings.Contains(out, keyFile) {
		t.Errorf("second start: want no new key and the old key's file named:\n%s", out)
	}
	if raw2, _ := os.ReadFile(keyFile); string(raw2) != string(raw) {
		t.Errorf("the second start rewrote %s", keyFile)
	}
	if _, err := newServeAPI(url, key).call(context.Background(), "GET", "/v1/memory_stores", nil, nil); err != nil {
		t.Fatalf("the key stopped working after a restart: %v", err)
	}
	second.stop(t)
}

// bareServe is a memfs serve process started without --admin-key (the
// harness always passes one, which the admin-key test must not).
type bareServe struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *harness.LockedBuffer
}

// startBare runs memfs serve on dir with no admin key (nor any MEMFS_
// variable) but what args give, and waits until it listens.
func startBare(t *testing.T, dir string, args ...string) *bareServe {
	t.Helper()
	cmd := exec.Command(harness.Binary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn"}, args...)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MEMFS_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	b := &bareServe{cmd: cmd, done: make(chan struct{}), out: &harness.LockedBuffer{}}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-b.done
	})
	const prefix = "memfs serve: listening on http://"
	for deadline := time.Now().Add(60 * time.Second); ; {
		s := b.out.String()
		if i := strings.Index(s, prefix); i >= 0 {
			if addr, _, ok := strings.Cut(s[i+len(prefix):], "\n"); ok {
				b.url = "http://" + addr
				return b
			}
		}
		select {
		case <-b.done:
			t.Fatalf("memfs serve exited before listening:\n%s", s)
		case <-time.After(5 * time.Millisecond): // polling the output, bounded by the deadline
		}
		if time.Now().After(deadline) {
			t.Fatalf("memfs serve did not listen within 60s:\n%s", s)
		}
	}
}

// stop sends SIGTERM and expects exit 0.
func (b *bareServe) stop(t *testing.T) {
	t.Helper()
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("memfs serve did not exit within 30s of SIGTERM:\n%s", b.out)
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("memfs serve exited %d:\n%s", code, b.out)
	}
}
