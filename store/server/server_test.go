package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// These tests drive the real handlers over real HTTP (httptest) on a real
// database, SQLite and PostgreSQL. They use plain net/http and
// encoding/json: the wire is what is under test.

const testKey = "sk-memfs-server-test-key-0123456789"

// forEachBackend runs f in parallel subtests, once per database. PostgreSQL skips without
// MEMFS_TEST_POSTGRES_URL (and fails when CI=true).
func forEachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Helper()
	for _, b := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", sqltest.SQLite}, {"postgres", sqltest.Postgres}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.dsn(t))
		})
	}
}

// observedBackend is the real backend with one observation point: it
// reports each change-feed read after a cursor that found nothing, so a
// test knows a long poll has read the feed and is about to wait, and a
// commit made after that can only reach it by waking it.
type observedBackend struct {
	store.Backend
	emptyReads chan struct{}
}

func (b *observedBackend) Changes(ctx context.Context, storeID string, after int64, limit int) (store.ChangePage, error) {
	p, err := b.Backend.Changes(ctx, storeID, after, limit)
	if err == nil && after > 0 && len(p.Data) == 0 {
		select {
		case b.emptyReads <- struct{}{}:
		default:
		}
	}
	return p, err
}

// testServer is a server.Server behind httptest on a fresh database.
type testServer struct {
	URL string
	srv *server.Server
	ob  *observedBackend
}

func startServer(t *testing.T, dsn string, opts sqlstore.Options) *testServer {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := server.EnsureAdminKey(ctx, db, testKey, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	ob := &observedBackend{Backend: db, emptyReads: make(chan struct{}, 1)}
	srv, err := server.New(server.Options{Backend: ob, Log: warnLog()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	// Cleanups run last-in first-out: end any long poll before hs.Close
	// waits for it.
	t.Cleanup(srv.BeginShutdown)
	return &testServer{URL: hs.URL, srv: srv, ob: ob}
}

// warnLog logs to stderr from warn level up: errors and warnings show in
// a failing test's output, the access line of every request does not
// (accesslog_test.go tests those).
func warnLog() *logrus.Logger {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	return log
}

// response is one HTTP answer, read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// decode unmarshals the body, failing the test unless the status is 200.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("got %s, want 200", r)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

// request sends one request with the admin key. body is sent raw when it
// is a string or []byte, as JSON otherwise, and not at all when nil.
func (s *testServer) request(t *testing.T, method, path string, body any) response {
	t.Helper()
	return s.requestWith(t, method, path, body, http.Header{"X-Api-Key": {testKey}})
}

func (s *testServer) requestWith(t *testing.T, method, path string, body any, hdr http.Header) response {
	t.Helper()
	r, err := s.send(context.Background(), method, path, body, hdr)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.Status == http.StatusInternalServerError {
		t.Errorf("%s %s: %s", method, path, r)
	}
	return r
}

// setProtocol sets the headers memfs serve requires, as the SDK sends
// them: anthropic-version and the route family's anthropic-beta.
func setProtocol(req *http.Request) {
	store.SetProtocol(req.Header, req.URL.Path, "")
}

// send is request without a *testing.T, for goroutines.
func (s *testServer) send(ctx context.Context, method, path string, body any, hdr http.Header) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	// The protocol headers, as every SDK sends them; a test that wants
	// one missing sets it to nil in hdr.
	setProtocol(req)
	for k, v := range hdr {
		req.Header[k] = v
	}
	if rd != nil {
		req.Header.Set("content-type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	if res.Header.Get("request-id") == "" {
		return response{}, fmt.Errorf("%s %s: response has no request-id header", method, path)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// apiError is the wire error envelope.
type apiError struct {
	Type  string `json:"type"`
	Error struct {
		Type                string            `json:"type"`
		Message             string            `json:"message"`
		Details             map[string]string `json:"details"`
		ConflictingMemoryID string            `json:"conflicting_memory_id"`
		ConflictingPath     string            `json:"conflicting_path"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// wantError checks an error answer: status, envelope, error.type, the
// request id (header and body agree) and x-should-retry: false on a 4xx.
func wantError(t *testing.T, what string, r response, status int, typ string) apiError {
	t.Helper()
	var e apiError
	if r.Status != status {
		t.Errorf("%s: got %s, want status %d %s", what, r, status, typ)
		return e
	}
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Errorf("%s: error body is not JSON: %s", what, r)
		return e
	}
	if e.Type != "error" || e.Error.Type != typ || e.Error.Message == "" {
		t.Errorf("%s: got error body %s, want type error, error.type %s and a message", what, r.Body, typ)
	}
	rid := r.Header.Get("request-id")
	if !strings.HasPrefix(rid, "req_") || e.RequestID != rid {
		t.Errorf("%s: request-id header %q, body request_id %q: want the same req_ id", what, rid, e.RequestID)
	}
	if status >= 400 && status < 500 {
		if got := r.Header.Get("x-should-retry"); got != "false" {
			t.Errorf("%s: x-should-retry = %q, want false", what, got)
		}
	}
	return e
}

func (s *testServer) createStore(t *testing.T, name string) string {
	t.Helper()
	var st store.Store
	s.request(t, "POST", "/v1/memory_stores", map[string]any{"name": name}).decode(t, &st)
	if !strings.HasPrefix(st.ID, "memstore_") {
		t.Fatalf("created store has id %q", st.ID)
	}
	return st.ID
}

func (s *testServer) createMemory(t *testing.T, storeID, path, content string) store.Memory {
	t.Helper()
	var m store.Memory
	s.request(t, "POST", "/v1/memory_stores/"+storeID+"/memories", map[string]any{"path": path, "content": content}).decode(t, &m)
	if m.Path != path || m.ContentSHA256 != sha(content) {
		t.Fatalf("created memory %+v, want path %q sha %s", m, path, sha(content))
	}
	return m
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// storeState is everything a write could change in a store: its
// memories, its versions and its change-feed head.
type storeState struct {
	Memories []string
	Versions []string
	Head     int64
}

func (s *testServer) state(t *testing.T, storeID string) storeState {
	t.Helper()
	var st storeState
	base := "/v1/memory_stores/" + storeID
	for page := ""; ; {
		var p store.Page[store.MemoryListItem]
		s.request(t, "GET", base+"/memories?limit=100&page="+url.QueryEscape(page), nil).decode(t, &p)
		for _, it := range p.Data {
			m := it.Memory
			st.Memories = append(st.Memories, strings.Join([]string{m.ID, m.Path, m.ContentSHA256, m.MemoryVersionID, m.UpdatedAt.String()}, " "))
		}
		if page = p.NextPage; page == "" {
			break
		}
	}
	for page := ""; ; {
		var p store.Page[store.Version]
		s.request(t, "GET", base+"/memory_versions?limit=100&page="+url.QueryEscape(page), nil).decode(t, &p)
		for _, v := range p.Data {
			st.Versions = append(st.Versions, v.ID+" "+v.Operation)
		}
		if page = p.NextPage; page == "" {
			break
		}
	}
	var c store.ChangePage
	s.request(t, "GET", base+"/changes", nil).decode(t, &c)
	st.Head = c.NextCursor
	return st
}

// unchanged fails the test when the store's state differs from before.
func (s *testServer) unchanged(t *testing.T, what, storeID string, before storeState) {
	t.Helper()
	if after := s.state(t, storeID); !reflect.DeepEqual(after, before) {
		t.Errorf("%s wrote something:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// storesState is the list of every store, archived ones included.
func (s *testServer) storesState(t *testing.T) []store.Store {
	t.Helper()
	var all []store.Store
	for page := ""; ; {
		var p store.Page[store.Store]
		s.request(t, "GET", "/v1/memory_stores?include_archived=true&limit=100&page="+url.QueryEscape(page), nil).decode(t, &p)
		all = append(all, p.Data...)
		if page = p.NextPage; page == "" {
			return all
		}
	}
}

var badPaths = []struct{ name, path string }{
	{"empty", ""},
	{"no leading slash", "a/b"},
	{"dot-dot segment", "/a/../b"},
	{"dot segment", "/a/./b"},
	{"empty segment", "/a//b"},
	{"trailing slash", "/a/"},
	{"root", "/"},
	{"21 segments", strings.Repeat("/s", 21)},
	{"1025 bytes", "/" + strings.Repeat("x", 1024)},
	{"control character", "/a\x07b"},
	{"NUL", "/a\x00b"},
	{"DEL", "/a\x7fb"},
	{"U+200B format character", "/a\u200bb"},
	{"U+FEFF format character", "/\ufeffa"},
	{"U+2028", "/a\u2028b"},
	{"U+2029", "/a\u2029b"},
	{"not NFC", "/cafe\u0301"},
}

func TestPathValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "paths")
		seed := s.createMemory(t, id, "/seed", "seed")
		base := "/v1/memory_stores/" + id + "/memories"
		before := s.state(t, id)
		for _, c := range badPaths {
			r := s.request(t, "POST", base, map[string]any{"path": c.path, "content": "x"})
			e := wantError(t, "create at "+c.name+" path", r, 400, "invalid_request_error")
			if e.Error.Details["error_code"] != "invalid_path" {
				t.Errorf("create at %s path: error_code %q, want invalid_path", c.name, e.Error.Details["error_code"])
			}
			r = s.request(t, "POST", base+"/"+seed.ID, map[string]any{"path": c.path})
			wantError(t, "rename to "+c.name+" path", r, 400, "invalid_request_error")
		}
		s.unchanged(t, "rejected paths", id, before)

		// The limits are inclusive, paths are case-sensitive and NFC is kept.
		for _, p := range []string{
			strings.Repeat("/t", 20),
			"/" + strings.Repeat("y", 1023),
			"/Seed",
			"/caf\u00e9",
			"/a b/ünïcödé 🙂.md",
		} {
			m := s.createMemory(t, id, p, p)
			var got store.Memory
			s.request(t, "GET", base+"/"+m.ID, nil).decode(t, &got)
			if got.Path != p || got.Content == nil || *got.Content != p {
				t.Errorf("memory at %q reads back as %+v", p, got)
			}
		}
	})
}

func TestContentValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "content")
		seed := s.createMemory(t, id, "/seed", "seed")
		base := "/v1/memory_stores/" + id + "/memories"
		before := s.state(t, id)

		// Raw invalid UTF-8 inside a JSON string: encoding/json would
		// silently turn it into U+FFFD and store other bytes than were sent.
		for _, body := range []string{
			"{\"path\":\"/bad\",\"content\":\"ab\xffcd\"}",
			"{\"path\":\"/bad\",\"content\":\"\xc3\x28\"}",
			"{\"path\":\"/b\xffd\",\"content\":\"x\"}",
		} {
			wantError(t, fmt.Sprintf("create with %q", body), s.request(t, "POST", base, body), 400, "invalid_request_error")
		}
		wantError(t, "update with invalid UTF-8", s.request(t, "POST", base+"/"+seed.ID, "{\"content\":\"\xff\"}"), 400, "invalid_request_error")
		// So would a lone UTF-16 surrogate escape, which no UTF-8 text has.
		for _, c := range []string{`\ud800`, `\udfff`, `a\ud83dx`, `\ud83d\u0041`, `\ude00\ud83d`, `\ud83d`} {
			body := `{"path":"/bad","content":"` + c + `"}`
			wantError(t, "create with "+body, s.request(t, "POST", base, body), 400, "invalid_request_error")
		}

		big := strings.Repeat("a", store.MaxContentBytes+1)
		for what, r := range map[string]response{
			"create with 102,401 bytes": s.request(t, "POST", base, map[string]any{"path": "/big", "content": big}),
			"update with 102,401 bytes": s.request(t, "POST", base+"/"+seed.ID, map[string]any{"content": big}),
		} {
			e := wantError(t, what, r, 413, "request_too_large")
			if e.Error.Details["error_code"] != "content_too_large" {
				t.Errorf("%s: error_code %q, want content_too_large", what, e.Error.Details["error_code"])
			}
		}
		// A body over 1 MiB is refused before it is parsed.
		huge := `{"path":"/huge","content":"` + strings.Repeat("a", 1<<20) + `"}`
		e := wantError(t, "body over 1 MiB", s.request(t, "POST", base, huge), 413, "request_too_large")
		if !strings.Contains(e.Error.Message, "body") {
			t.Errorf("body over 1 MiB: message %q does not say it is the body", e.Error.Message)
		}
		for what, body := range map[string]string{
			"bad JSON":           `{"path":"/x","content":`,
			"not an object":      `["/x"]`,
			"content not string": `{"path":"/x","content":5}`,
			"missing content":    `{"path":"/x"}`,
			"null content":       `{"path":"/x","content":null}`,
			"missing path":       `{"content":"x"}`,
			"empty body":         ``,
		} {
			wantError(t, "create with "+what, s.request(t, "POST", base, body), 400, "invalid_request_error")
		}
		for what, body := range map[string]string{
			"bad JSON":                  `{"content":`,
			"precondition type":         `{"content":"x","precondition":{"type":"etag","content_sha256":"` + sha("seed") + `"}}`,
			"precondition not hex":      `{"content":"x","precondition":{"type":"content_sha256","content_sha256":"xyz"}}`,
			"precondition uppercase":    `{"content":"x","precondition":{"type":"content_sha256","content_sha256":"` + strings.ToUpper(sha("seed")) + `"}}`,
			"content of the wrong type": `{"content":["x"]}`,
		} {
			wantError(t, "update with "+what, s.request(t, "POST", base+"/"+seed.ID, body), 400, "invalid_request_error")
		}
		wantError(t, "delete with a malformed expected sha", s.request(t, "DELETE", base+"/"+seed.ID+"?expected_content_sha256=abc", nil), 400, "invalid_request_error")
		s.unchanged(t, "rejected content", id, before)

		// The limit is inclusive; content is stored byte for byte,
		// including what PostgreSQL text can be touchy about (NUL).
		readBack := func(m store.Memory) string {
			t.Helper()
			var got store.Memory
			s.request(t, "GET", base+"/"+m.ID, nil).decode(t, &got)
			if got.Content == nil || got.ContentSHA256 != sha(*got.Content) || got.ContentSizeBytes != int64(len(*got.Content)) {
				t.Errorf("%s reads back inconsistent: %+v", m.Path, got)
				return ""
			}
			return *got.Content
		}
		for raw, want := range map[string]string{
			`\ud83d\ude00 and \u00e9`:      "\U0001F600 and \u00e9", // an escaped pair is fine
			`\\ud800 is just text`:         `\ud800 is just text`,   // an escaped backslash, not an escape
			`\\\ud83d\ude00`:               `\` + "\U0001F600",
			`nul \u0000 and \u001f inside`: "nul \x00 and \x1f inside",
		} {
			var m store.Memory
			s.request(t, "POST", base+"?view=full", `{"path":"/esc/`+sha(raw)[:8]+`","content":"`+raw+`"}`).decode(t, &m)
			if m.Content == nil || *m.Content != want || m.ContentSHA256 != sha(want) || readBack(m) != want {
				t.Errorf("content %s reads back as %+v, want %q", raw, m, want)
			}
		}
		for _, c := range []string{strings.Repeat("b", store.MaxContentBytes), "", "line\r\nnext\ttab \u2028 \U0001F600 \ufffd"} {
			var m store.Memory
			s.request(t, "POST", base+"?view=full", map[string]any{"path": fmt.Sprintf("/ok/%d", len(c)), "content": c}).decode(t, &m)
			if m.Content == nil || *m.Content != c || m.ContentSHA256 != sha(c) || m.ContentSizeBytes != int64(len(c)) || readBack(m) != c {
				t.Errorf("memory with %d bytes of content reads back as sha %s size %d", len(c), m.ContentSHA256, m.ContentSizeBytes)
			}
		}
	})
}

func TestQueryValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "queries")
		base := "/v1/memory_stores/" + id
		var ids []string
		for i := range 25 {
			ids = append(ids, s.createMemory(t, id, fmt.Sprintf("/m/%02d", i), "x").ID)
		}
		before := s.state(t, id)
		for _, q := range []struct{ method, path string }{
			{"POST", base + "/memories?view=everything"},
			{"GET", base + "/memories?view=bogus"},
			{"GET", base + "/memories/" + ids[0] + "?view=FULL"},
			{"POST", base + "/memories/" + ids[0] + "?view=none"},
			{"GET", base + "/memory_versions?view=x"},
			{"GET", base + "/memories?limit=0"},
			{"GET", base + "/memories?limit=101"},
			{"GET", base + "/memories?limit=-1"},
			{"GET", base + "/memories?limit=ten"},
			{"GET", base + "/memories?view=full&limit=101"},
			{"GET", base + "/memory_versions?limit=0"},
			{"GET", base + "/memory_versions?limit=101"},
			{"GET", base + "/memory_versions?operation=renamed"},
			{"GET", base + "/memory_versions?created_at[gte]=yesterday"},
			{"GET", "/v1/memory_stores?limit=0"},
			{"GET", "/v1/memory_stores?limit=101"},
			{"GET", "/v1/memory_stores?include_archived=maybe"},
			{"GET", base + "/memories?path_prefix=/m"},
			{"GET", base + "/memories?path_prefix=/a/../"},
			{"GET", base + "/memories?page=not-a-token"},
			{"GET", base + "/changes?wait_ms=30001"},
			{"GET", base + "/changes?wait_ms=-1"},
			{"GET", base + "/changes?after=-1"},
			{"GET", base + "/changes?after=x"},
			{"GET", base + "/changes?after=999"}, // ahead of the head
			{"GET", base + "/changes?limit=0"},
		} {
			body := any(nil)
			if q.method == "POST" {
				body = map[string]any{"path": "/v", "content": "v"}
			}
			wantError(t, q.method+" "+q.path, s.request(t, q.method, q.path, body), 400, "invalid_request_error")
		}
		s.unchanged(t, "rejected queries", id, before)

		// limit 50 with view=full is clamped to 20, not refused.
		var p store.Page[store.MemoryListItem]
		s.request(t, "GET", base+"/memories?view=full&limit=50", nil).decode(t, &p)
		if len(p.Data) != store.MaxFullViewListLimit || p.NextPage == "" {
			t.Errorf("view=full&limit=50: %d items, next_page %q; want 20 and a next page", len(p.Data), p.NextPage)
		}
		for _, it := range p.Data {
			if it.Memory == nil || it.Memory.Content == nil {
				t.Fatalf("view=full item without content: %+v", it)
			}
		}
		s.request(t, "GET", base+"/memories?limit=50", nil).decode(t, &p)
		if len(p.Data) != 25 || p.NextPage != "" {
			t.Errorf("basic view limit=50: %d items, next_page %q; want all 25", len(p.Data), p.NextPage)
		}
		// The ignored SDK extras are accepted.
		var c store.ChangePage
		s.request(t, "GET", base+"/changes?wait_ms=30000&beta=true", nil).decode(t, &c)
	})
}

func TestMemoryConflicts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "conflicts")
		base := "/v1/memory_stores/" + id + "/memories"
		ab := s.createMemory(t, id, "/a/b", "ab")
		other := s.createMemory(t, id, "/other", "other")
		before := s.state(t, id)
		for _, c := range []struct{ what, method, path, newPath string }{
			{"create at a taken path", "POST", base, "/a/b"},
			{"create at a directory of memories", "POST", base, "/a"},
			{"create below a memory", "POST", base, "/a/b/c"},
			{"rename onto a memory", "POST", base + "/" + other.ID, "/a/b"},
			{"rename onto a directory", "POST", base + "/" + other.ID, "/a"},
			{"rename below a memory", "POST", base + "/" + other.ID, "/a/b/c/d"},
		} {
			body := map[string]any{"path": c.newPath}
			if c.path == base {
				body["content"] = "new"
			}
			e := wantError(t, c.what, s.request(t, c.method, c.path, body), 409, "memory_path_conflict_error")
			if e.Error.ConflictingMemoryID != ab.ID || e.Error.ConflictingPath != "/a/b" {
				t.Errorf("%s: conflicting_memory_id %q conflicting_path %q, want %s /a/b", c.what, e.Error.ConflictingMemoryID, e.Error.ConflictingPath, ab.ID)
			}
		}
		wrong := sha("not the content")
		for what, r := range map[string]response{
			"update with a stale precondition": s.request(t, "POST", base+"/"+ab.ID, map[string]any{
				"content": "new", "precondition": map[string]string{"type": "content_sha256", "content_sha256": wrong}}),
			"delete with a stale precondition": s.request(t, "DELETE", base+"/"+ab.ID+"?expected_content_sha256="+wrong, nil),
		} {
			e := wantError(t, what, r, 409, "memory_precondition_failed_error")
			if e.Error.Details["error_code"] != "memory_precondition_failed" {
				t.Errorf("%s: error_code %q", what, e.Error.Details["error_code"])
			}
		}
		wantError(t, "update of an unknown memory", s.request(t, "POST", base+"/mem_nope", map[string]any{"content": "x"}), 404, "not_found_error")
		wantError(t, "create in an unknown store", s.request(t, "POST", "/v1/memory_stores/memstore_nope/memories", map[string]any{"path": "/x", "content": "x"}), 404, "not_found_error")
		s.unchanged(t, "conflicting writes", id, before)

		// A no-op update answers 200 and records nothing.
		var m store.Memory
		s.request(t, "POST", base+"/"+ab.ID, map[string]any{"content": "ab", "path": "/a/b",
			"precondition": map[string]string{"type": "content_sha256", "content_sha256": sha("ab")}}).decode(t, &m)
		s.unchanged(t, "a no-op update", id, before)
	})
}

func TestStoreValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "keep")
		before := s.storesState(t)
		meta := func(n, keyLen, valLen int) map[string]string {
			m := map[string]string{}
			for i := range n {
				m[fmt.Sprintf("%0*d", keyLen, i)] = strings.Repeat("v", valLen)
			}
			return m
		}
		for _, c := range []struct {
			what string
			body any
		}{
			{"empty name", map[string]any{"name": ""}},
			{"no name", map[string]any{"description": "d"}},
			{"256-character name", map[string]any{"name": strings.Repeat("é", 256)}},
			{"name with a control character", map[string]any{"name": "a\nb"}},
			{"1025-character description", map[string]any{"name": "n", "description": strings.Repeat("d", 1025)}},
			{"17 metadata pairs", map[string]any{"name": "n", "metadata": meta(17, 2, 1)}},
			{"65-character metadata key", map[string]any{"name": "n", "metadata": meta(1, 65, 1)}},
			{"empty metadata key", map[string]any{"name": "n", "metadata": map[string]string{"": "v"}}},
			{"513-character metadata value", map[string]any{"name": "n", "metadata": meta(1, 4, 513)}},
			{"invalid UTF-8 name", "{\"name\":\"\xfe\"}"},
			{"bad JSON", `{"name":`},
		} {
			wantError(t, "create with "+c.what, s.request(t, "POST", "/v1/memory_stores", c.body), 400, "invalid_request_error")
			if m, ok := c.body.(map[string]any); ok {
				if _, ok := m["name"]; !ok {
					continue // an update need not name the store
				}
			}
			wantError(t, "update with "+c.what, s.request(t, "POST", "/v1/memory_stores/"+id, c.body), 400, "invalid_request_error")
		}
		if after := s.storesState(t); !reflect.DeepEqual(after, before) {
			t.Errorf("rejected store writes changed the stores:\nbefore %+v\nafter  %+v", before, after)
		}
		// A patch that would leave 17 pairs is refused too.
		var st store.Store
		s.request(t, "POST", "/v1/memory_stores/"+id, map[string]any{"metadata": meta(16, 2, 1)}).decode(t, &st)
		before = s.storesState(t)
		wantError(t, "update to 17 pairs", s.request(t, "POST", "/v1/memory_stores/"+id, map[string]any{"metadata": map[string]string{"new": "v"}}), 400, "invalid_request_error")
		if after := s.storesState(t); !reflect.DeepEqual(after, before) {
			t.Errorf("rejected store writes changed the stores:\nbefore %+v\nafter  %+v", before, after)
		}
		// The limits are inclusive; a description is kept byte for byte.
		desc := strings.Repeat("d", 1020) + "\x00\n\u00e9"
		s.request(t, "POST", "/v1/memory_stores", map[string]any{"name": strings.Repeat("é", 255),
			"description": desc, "metadata": meta(16, 64, 512)}).decode(t, &st)
		var got store.Store
		s.request(t, "GET", "/v1/memory_stores/"+st.ID, nil).decode(t, &got)
		if got.Description != desc || len(got.Metadata) != 16 || got.Name != strings.Repeat("é", 255) {
			t.Errorf("store at the limits reads back as %+v", got)
		}
	})
}

func TestArchivedStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "archived")
		base := "/v1/memory_stores/" + id
		m := s.createMemory(t, id, "/kept", "kept")
		var st store.Store
		s.request(t, "POST", base+"/archive", nil).decode(t, &st)
		if st.ArchivedAt == nil {
			t.Fatalf("archive answered %+v", st)
		}
		before, stores := s.state(t, id), s.storesState(t)
		for what, r := range map[string]response{
			"create":       s.request(t, "POST", base+"/memories", map[string]any{"path": "/new", "content": "x"}),
			"update":       s.request(t, "POST", base+"/memories/"+m.ID, map[string]any{"content": "changed"}),
			"rename":       s.request(t, "POST", base+"/memories/"+m.ID, map[string]any{"path": "/moved"}),
			"store update": s.request(t, "POST", base, map[string]any{"name": "renamed"}),
		} {
			wantError(t, what+" in an archived store", r, 403, "permission_error")
		}
		s.unchanged(t, "writes to an archived store", id, before)
		if after := s.storesState(t); !reflect.DeepEqual(after, stores) {
			t.Errorf("store update of an archived store changed it: %+v", after)
		}
		// Reads still work.
		var got store.Memory
		s.request(t, "GET", base+"/memories/"+m.ID, nil).decode(t, &got)
		if got.Content == nil || *got.Content != "kept" {
			t.Errorf("memory of an archived store reads back as %+v", got)
		}
		// Deleting its memories still works (the SDK documents it).
		if r := s.request(t, "DELETE", base+"/memories/"+m.ID, nil); r.Status != 200 {
			t.Errorf("delete in an archived store: %d %s", r.Status, r.Body)
		}
	})
}

func TestMemoryCap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{MaxMemoriesPerStore: 2})
		id := s.createStore(t, "capped")
		base := "/v1/memory_stores/" + id + "/memories"
		a := s.createMemory(t, id, "/a", "a")
		s.createMemory(t, id, "/b", "b")
		before := s.state(t, id)
		e := wantError(t, "create at the cap", s.request(t, "POST", base, map[string]any{"path": "/c", "content": "c"}), 422, "invalid_request_error")
		if e.Error.Details["error_code"] != "memory_limit_reached" {
			t.Errorf("create at the cap: error_code %q", e.Error.Details["error_code"])
		}
		s.unchanged(t, "a create at the cap", id, before)
		// At the cap, memories stay editable; a delete makes room.
		var m store.Memory
		s.request(t, "POST", base+"/"+a.ID, map[string]any{"content": "a2", "path": "/a2"}).decode(t, &m)
		s.request(t, "DELETE", base+"/"+a.ID, nil).decode(t, &m)
		s.createMemory(t, id, "/c", "c")
		wantError(t, "create at the cap again", s.request(t, "POST", base, map[string]any{"path": "/d", "content": "d"}), 422, "invalid_request_error")
		// The cap is per store.
		s.createMemory(t, s.createStore(t, "other"), "/a", "a")
	})
}

func TestAuthenticationAndRoutes(t *testing.T) {
	s := startServer(t, sqltest.SQLite(t), sqlstore.Options{})
	id := s.createStore(t, "auth")
	before := s.storesState(t)
	for what, hdr := range map[string]http.Header{
		"no key":            {},
		"wrong key":         {"X-Api-Key": {"sk-memfs-wrong-key-0123456789abcdef"}},
		"wrong bearer":      {"Authorization": {"Bearer sk-memfs-wrong-key-0123456789abcdef"}},
		"empty bearer":      {"Authorization": {"Bearer "}},
		"key as basic auth": {"Authorization": {"Basic " + testKey}},
	} {
		for _, q := range []struct{ method, path string }{
			{"GET", "/v1/memory_stores"},
			{"POST", "/v1/memory_stores"},
			{"GET", "/v1/memory_stores/" + id + "/memories"},
			{"POST", "/v1/memory_stores/" + id + "/memories"},
		} {
			r := s.requestWith(t, q.method, q.path, map[string]any{"name": "x", "path": "/x", "content": "x"}, hdr)
			wantError(t, what+": "+q.method+" "+q.path, r, 401, "authentication_error")
		}
	}
	if after := s.storesState(t); !reflect.DeepEqual(after, before) {
		t.Errorf("unauthenticated writes changed the stores: %+v", after)
	}
	var p store.Page[store.Store]
	s.requestWith(t, "GET", "/v1/memory_stores", nil, http.Header{"Authorization": {"Bearer " + testKey}}).decode(t, &p)
	// The SDK's headers are accepted and ignored.
	s.requestWith(t, "GET", "/v1/memory_stores?beta=true", nil, http.Header{"X-Api-Key": {testKey},
		"Anthropic-Beta": {"agent-memory-2026-07-22"}, "Anthropic-Workspace-Id": {"wrkspc_x"}}).decode(t, &p)

	for _, q := range []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/v1/nope"},
		{"GET", "/v2/memory_stores"},
		{"PUT", "/v1/memory_stores"},
		{"GET", "/v1/memory_stores/" + id + "/memories/mem_x/extra"},
		{"GET", "/v1/memory_stores/memstore_nope"},
	} {
		wantError(t, q.method+" "+q.path, s.request(t, q.method, q.path, nil), 404, "not_found_error")
	}
}

// longPoll is the answer to one change-feed long poll.
type longPoll struct {
	r       response
	err     error
	elapsed time.Duration
}

// startPoll sends a change-feed request in the background.
func (s *testServer) startPoll(storeID, query string) <-chan longPoll {
	ch := make(chan longPoll, 1)
	go func() {
		start := time.Now()
		r, err := s.send(context.Background(), "GET", "/v1/memory_stores/"+storeID+"/changes?"+query, nil, http.Header{"X-Api-Key": {testKey}})
		ch <- longPoll{r, err, time.Since(start)}
	}()
	return ch
}

// awaitPoll waits (bounded) for a poll's answer and decodes it.
func awaitPoll(t *testing.T, ch <-chan longPoll, bound time.Duration) (store.ChangePage, time.Duration) {
	t.Helper()
	var page store.ChangePage
	select {
	case p := <-ch:
		if p.err != nil {
			t.Fatal(p.err)
		}
		p.r.decode(t, &page)
		return page, p.elapsed
	case <-time.After(bound):
		t.Fatalf("the change-feed request did not answer within %v", bound)
	}
	return page, 0
}

// awaitWaiting waits until a long poll has read the feed and found nothing.
func (s *testServer) awaitWaiting(t *testing.T) {
	t.Helper()
	select {
	case <-s.ob.emptyReads:
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll never read the change feed")
	}
}

func TestChangeFeedLongPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "feed")
		const wait = 10 * time.Second
		poll := func(after int64, waitMS int) <-chan longPoll {
			return s.startPoll(id, fmt.Sprintf("after=%d&wait_ms=%d", after, waitMS))
		}

		// A client following a fresh store from its head sees the first
		// memory: the long poll waits, and the commit wakes it.
		head := s.state(t, id).Head
		p := poll(head, 10000)
		s.awaitWaiting(t)
		first := s.createMemory(t, id, "/first", "1")
		page, elapsed := awaitPoll(t, p, wait+5*time.Second)
		if len(page.Data) != 1 || page.Data[0].MemoryID != first.ID || page.Data[0].Seq != head+1 ||
			page.Data[0].Operation != store.OpCreated || page.Data[0].Path != "/first" || page.NextCursor != head+1 || page.HasMore {
			t.Fatalf("woken long poll: got %+v, want the creation of %s at seq %d", page, first.ID, head+1)
		}
		if elapsed > wait/2 {
			t.Errorf("the long poll answered after %v: it timed out rather than being woken", elapsed)
		}
		head++

		// after=0 (or omitted) answers the head at once, even with wait_ms.
		for _, q := range []string{"after=0&wait_ms=10000", "wait_ms=10000"} {
			page, elapsed := awaitPoll(t, s.startPoll(id, q), wait/2)
			if page.NextCursor != head || len(page.Data) != 0 || page.HasMore {
				t.Errorf("%s: got %+v, want the head %d and no data", q, page, head)
			}
			if elapsed > wait/2 {
				t.Errorf("%s took %v", q, elapsed)
			}
		}
		// A short wait that nothing wakes ends empty.
		page, _ = awaitPoll(t, poll(head, 50), wait)
		if page.NextCursor != head || len(page.Data) != 0 {
			t.Errorf("expired long poll: got %+v", page)
		}
		s.awaitWaiting(t) // drain its report

		// Woken by an update and a rename from another request.
		p = poll(head, 10000)
		s.awaitWaiting(t)
		var m store.Memory
		s.request(t, "POST", "/v1/memory_stores/"+id+"/memories/"+first.ID, map[string]any{"path": "/renamed", "content": "2"}).decode(t, &m)
		page, elapsed = awaitPoll(t, p, wait+5*time.Second)
		if len(page.Data) != 1 || page.Data[0].Operation != store.OpModified || page.Data[0].Path != "/renamed" ||
			page.Data[0].PreviousPath != "/first" || page.Data[0].ContentSHA256 == nil || *page.Data[0].ContentSHA256 != sha("2") || page.NextCursor != head+1 {
			t.Fatalf("long poll woken by a rename: got %+v", page)
		}
		if elapsed > wait/2 {
			t.Errorf("the long poll answered after %v: it timed out rather than being woken", elapsed)
		}
		head++

		// A commit to another store does not answer it; BeginShutdown does.
		other := s.createStore(t, "other")
		p = poll(head, 10000)
		s.awaitWaiting(t)
		s.createMemory(t, other, "/x", "x")
		s.srv.BeginShutdown()
		page, elapsed = awaitPoll(t, p, wait+5*time.Second)
		if len(page.Data) != 0 || page.NextCursor != head {
			t.Errorf("long poll ended by BeginShutdown: got %+v, want no data at cursor %d", page, head)
		}
		if elapsed > wait/2 {
			t.Errorf("BeginShutdown did not end the long poll: it answered after %v", elapsed)
		}
		// Once shutting down, a new long poll answers at once.
		_, elapsed = awaitPoll(t, poll(head, 10000), wait)
		if elapsed > wait/2 {
			t.Errorf("a long poll during shutdown waited %v", elapsed)
		}
	})
}

func TestConcurrentPreconditionedUpdates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "race")
		m := s.createMemory(t, id, "/contended", "v0")
		head := s.state(t, id).Head
		const writers = 8
		results := make([]response, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.send(context.Background(), "POST", "/v1/memory_stores/"+id+"/memories/"+m.ID,
					map[string]any{"content": fmt.Sprintf("writer %d", i),
						"precondition": map[string]string{"type": "content_sha256", "content_sha256": sha("v0")}},
					http.Header{"X-Api-Key": {testKey}})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("writer %d: %v", i, errs[i])
			}
			if r.Status == http.StatusOK {
				if winner >= 0 {
					t.Errorf("writers %d and %d both won", winner, i)
				}
				winner = i
				continue
			}
			wantError(t, fmt.Sprintf("writer %d", i), r, 409, "memory_precondition_failed_error")
		}
		if winner < 0 {
			t.Fatal("no writer won")
		}
		var got store.Memory
		s.request(t, "GET", "/v1/memory_stores/"+id+"/memories/"+m.ID, nil).decode(t, &got)
		if want := fmt.Sprintf("writer %d", winner); got.Content == nil || *got.Content != want {
			t.Errorf("content after the race: %+v, want %q", got, want)
		}
		if st := s.state(t, id); len(st.Versions) != 2 || st.Head != head+1 {
			t.Errorf("after the race: %d versions, head %d; want 2 and %d", len(st.Versions), st.Head, head+1)
		}
	})
}

func TestPaginationUnderConcurrentInserts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		id := s.createStore(t, "pages")
		const initial = 30
		existing := map[string]bool{}
		for i := range initial {
			p := fmt.Sprintf("/p/%03d", i)
			s.createMemory(t, id, p, p)
			existing[p] = true
		}
		// The inserter creates memories all over the key space, before and
		// after the pager's position, until the pager is done.
		ctx, cancel := context.WithCancel(context.Background())
		var inserted atomic.Int64
		tick := make(chan struct{}, 1) // a value after each insert
		insertErr := make(chan error, 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				p := fmt.Sprintf("/p/%03d-%d", rand.IntN(initial+1), n)
				if n%4 == 0 {
					p = fmt.Sprintf("/o/%d", n) // sorts before every /p
				}
				r, err := s.send(ctx, "POST", "/v1/memory_stores/"+id+"/memories", map[string]any{"path": p, "content": p}, http.Header{"X-Api-Key": {testKey}})
				if ctx.Err() != nil {
					return
				}
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("create %s: %s", p, r)
				}
				if err != nil {
					insertErr <- err
					return
				}
				inserted.Add(1)
				select {
				case tick <- struct{}{}:
				default:
				}
			}
		})
		defer wg.Wait()
		defer cancel()

		seen := map[string]int{}
		last := ""
		pages := 0
		for page := ""; ; pages++ {
			// Let inserts land between pages.
			for range 2 {
				select {
				case <-tick:
				case err := <-insertErr:
					t.Fatal(err)
				case <-time.After(10 * time.Second):
					t.Fatal("the inserter made no progress")
				}
			}
			var p store.Page[store.MemoryListItem]
			s.request(t, "GET", "/v1/memory_stores/"+id+"/memories?limit=5&page="+url.QueryEscape(page), nil).decode(t, &p)
			if len(p.Data) > 5 {
				t.Fatalf("page of %d items with limit=5", len(p.Data))
			}
			for _, it := range p.Data {
				if it.Memory.Path <= last {
					t.Errorf("listing out of order: %q after %q", it.Memory.Path, last)
				}
				last = it.Memory.Path
				seen[it.Memory.Path]++
			}
			if page = p.NextPage; page == "" {
				break
			}
		}
		cancel()
		wg.Wait()
		for p := range existing {
			if seen[p] != 1 {
				t.Errorf("%s existed before the first page and was listed %d times", p, seen[p])
			}
		}
		for p, n := range seen {
			if n != 1 {
				t.Errorf("%s was listed %d times", p, n)
			}
		}
		if pages < initial/5 || inserted.Load() < int64(pages) {
			t.Errorf("%d pages, %d concurrent inserts: the test did not interleave", pages, inserted.Load())
		}
	})
}
