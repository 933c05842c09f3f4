package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// newTestClient serves h and returns a client for it with short waits.
func newTestClient(t *testing.T, h http.Handler, edit ...func(*Options)) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	opts := Options{BaseURL: srv.URL, APIKey: "test-key", RetryWaitMin: time.Millisecond, RetryWaitMax: 20 * time.Millisecond}
	for _, e := range edit {
		e(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeErr answers the wire error envelope.
func writeErr(w http.ResponseWriter, status int, typ, msg string, extra map[string]any) {
	e := map[string]any{"type": typ, "message": msg}
	for k, v := range extra {
		e[k] = v
	}
	w.Header().Set("request-id", "req_header")
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": e, "request_id": "req_body"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(v)
}

var testStore = store.Store{ID: "memstore_1", Type: store.TypeMemoryStore, Name: "notes", Metadata: map[string]string{}}

func TestHeadersAndQuery(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	var body []byte
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = r.Clone(context.Background())
		body, _ = io.ReadAll(r.Body)
		writeJSON(w, map[string]any{"data": []any{}, "next_page": nil})
	}))
	snap := func() (*http.Request, []byte) {
		mu.Lock()
		defer mu.Unlock()
		return got, body
	}
	_, err := c.ListMemories(context.Background(), "memstore_1", store.ListMemoriesOptions{PathPrefix: "/a b/", Depth: 1, Limit: 5, Page: "p2", Full: true})
	if err != nil {
		t.Fatal(err)
	}
	req, sent := snap()
	if req.Header.Get("authorization") != "Bearer test-key" || req.Header.Get("anthropic-beta") != store.BetaMemoryStores {
		t.Errorf("headers = %v", req.Header)
	}
	q := req.URL.Query()
	if req.URL.Path != "/v1/memory_stores/memstore_1/memories" || q.Get("path_prefix") != "/a b/" ||
		q.Get("depth") != "1" || q.Get("limit") != "5" || q.Get("page") != "p2" || q.Get("view") != "full" {
		t.Errorf("request = %s", req.URL)
	}
	if len(sent) != 0 {
		t.Errorf("GET sent a body: %q", sent)
	}

	gte := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	if _, err := c.ListStores(context.Background(), store.ListStoresOptions{IncludeArchived: true, CreatedGTE: &gte}); err != nil {
		t.Fatal(err)
	}
	req, _ = snap()
	if q := req.URL.Query(); q.Get("include_archived") != "true" || q.Get("created_at[gte]") != "2026-01-02T02:04:05Z" {
		t.Errorf("request = %s", req.URL)
	}

	remove, name := (*string)(nil), "new"
	if _, err := c.UpdateStore(context.Background(), "memstore_1", store.UpdateStoreInput{Name: &name,
		Metadata: map[string]*string{"gone": remove}}); err != nil {
		t.Fatal(err)
	}
	req, sent = snap()
	if req.Method != http.MethodPost || string(sent) != `{"name":"new","metadata":{"gone":null}}` {
		t.Errorf("update sent %s %s", req.Method, sent)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{APIKey: "k"}, "BaseURL is required"},
		{Options{BaseURL: "127.0.0.1:8080", APIKey: "k"}, "http://"},
		{Options{BaseURL: "http://h/?x=1", APIKey: "k"}, "query"},
		{Options{BaseURL: "http://localhost"}, "APIKey is required"},
	} {
		if err := tc.opts.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error with %q", tc.opts, err, tc.want)
		}
	}
	o := Options{BaseURL: "http://localhost", APIKey: "k"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.RetryMax != 4 || o.RetryWaitMin != 100*time.Millisecond || o.RetryWaitMax != 5*time.Second || o.Timeout != 30*time.Second {
		t.Errorf("defaults = %+v", o)
	}
	o = Options{BaseURL: "http://localhost", APIKey: "k", RetryMax: -1}
	if err := o.Validate(); err != nil || o.RetryMax != 0 {
		t.Errorf("RetryMax -1 gave %d, %v", o.RetryMax, err)
	}
}

func TestChangesFeed(t *testing.T) {
	var refusal atomic.Int32 // the status the route answers; 0: the feed
	var storeGets atomic.Int32
	var gotQuery atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/memory_stores/{sid}", func(w http.ResponseWriter, r *http.Request) {
		storeGets.Add(1)
		writeJSON(w, testStore)
	})
	mux.HandleFunc("GET /v1/memory_stores/{sid}/changes", func(w http.ResponseWriter, r *http.Request) {
		if s := int(refusal.Load()); s != 0 {
			writeErr(w, s, "invalid_request_error", "no such route", nil)
			return
		}
		gotQuery.Store(r.URL.RawQuery)
		// A long poll that outlasts Timeout but not Timeout + wait.
		time.Sleep(150 * time.Millisecond)
		writeJSON(w, store.ChangePage{Data: []store.Change{{Seq: 8, Operation: store.OpCreated, Path: "/x"}}, NextCursor: 8})
	})
	c := newTestClient(t, mux, func(o *Options) { o.Timeout = 100 * time.Millisecond; o.RetryMax = -1 })
	ctx := context.Background()

	// Any refusal of the route means "no feed here", and its own kind
	// still matches; the store itself is never asked about.
	for _, st := range []struct {
		status int
		kind   error
	}{{400, store.ErrInvalid}, {403, store.ErrForbidden}, {404, store.ErrNotFound}, {405, store.ErrInvalid}, {501, store.ErrInternal}} {
		refusal.Store(int32(st.status))
		_, err := c.Changes(ctx, "memstore_1", 7, 10, time.Second)
		if !errors.Is(err, ErrFeedUnsupported) || !errors.Is(err, st.kind) {
			t.Errorf("route answered %d: err = %v, want ErrFeedUnsupported and %v", st.status, err, st.kind)
		}
	}
	refusal.Store(401)
	if _, err := c.Changes(ctx, "memstore_1", 7, 10, time.Second); errors.Is(err, ErrFeedUnsupported) || !errors.Is(err, store.ErrUnauthorized) {
		t.Errorf("route answered 401: err = %v, want ErrUnauthorized, not ErrFeedUnsupported", err)
	}
	if n := storeGets.Load(); n != 0 {
		t.Errorf("Changes asked about the store %d times", n)
	}
	refusal.Store(0)
	p, err := c.Changes(ctx, "memstore_1", 7, 10, time.Second)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	if p.NextCursor != 8 || len(p.Data) != 1 || p.Data[0].Path != "/x" {
		t.Errorf("page = %+v", p)
	}
	if q := gotQuery.Load(); q != "after=7&limit=10&wait_ms=1000" {
		t.Errorf("query = %q", q)
	}
	if _, err := c.Changes(ctx, "memstore_1", 7, 10, time.Minute); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("wait of a minute: err = %v, want ErrInvalid", err)
	}
}

func TestPaginationHelpers(t *testing.T) {
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/memory_stores/{sid}/memories", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		q := r.URL.Query()
		m := func(p string) store.MemoryListItem {
			return store.MemoryListItem{Memory: &store.Memory{ID: "mem" + p, Path: p}}
		}
		switch q.Get("page") {
		case "":
			if q.Get("path_prefix") != "/d/" || q.Get("depth") != "1" {
				writeErr(w, 400, "invalid_request_error", "unexpected query "+r.URL.RawQuery, nil)
				return
			}
			writeJSON(w, store.Page[store.MemoryListItem]{Data: []store.MemoryListItem{m("/d/a"), {Prefix: "/d/b/"}}, NextPage: "2"})
		case "2":
			writeJSON(w, store.Page[store.MemoryListItem]{Data: []store.MemoryListItem{m("/d/c")}})
		}
	})
	c := newTestClient(t, mux)
	ctx := context.Background()
	opts := store.ListMemoriesOptions{PathPrefix: "/d/", Depth: 1}
	items, err := c.AllMemoryItems(ctx, "memstore_1", opts)
	if err != nil || len(items) != 3 || items[1].Prefix != "/d/b/" {
		t.Fatalf("AllMemoryItems = %+v, %v", items, err)
	}
	mems, err := c.AllMemories(ctx, "memstore_1", opts)
	if err != nil || len(mems) != 2 || mems[1].Path != "/d/c" {
		t.Fatalf("AllMemories = %+v, %v", mems, err)
	}
	m, err := c.MemoryByPath(ctx, "memstore_1", "/d/c")
	if err != nil || m.ID != "mem/d/c" {
		t.Fatalf("MemoryByPath = %+v, %v", m, err)
	}
	if _, err := c.MemoryByPath(ctx, "memstore_1", "/d/zz"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MemoryByPath(missing) err = %v, want ErrNotFound", err)
	}
	// Stopping a range stops fetching.
	calls.Store(0)
	for range c.MemoryItems(ctx, "memstore_1", opts) {
		break
	}
	if calls.Load() != 1 {
		t.Errorf("a range stopped at the first item fetched %d pages", calls.Load())
	}
}
