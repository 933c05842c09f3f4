package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/pagination"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/respjson"

	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// TestSDKCompat drives memfs serve through the official Go SDK only, on
// both backends: every call must succeed or fail exactly as the SDK
// expects, every response must parse into the SDK's types with every
// field present, and no 4xx may be retried by the SDK.
func TestSDKCompat(t *testing.T) {
	onBothBackends(t, func(t *testing.T, db string) {
		c := newCompat(t, harness.StartServe(t, harness.ServeOptions{DB: db}))
		// StoreList runs first: it expects an empty server.
		t.Run("StoreList", c.testStoreList)
		t.Run("Stores", c.testStores)
		t.Run("Memories", c.testMemories)
		t.Run("MemoryList", c.testMemoryList)
		t.Run("Versions", c.testVersions)
		t.Run("Errors", c.testErrors)
	})
}

// compat is one server with an SDK client in front of it. The client
// talks to the server through a reverse proxy that counts requests, so a
// test can tell how many attempts the SDK made.
type compat struct {
	sdk   anthropic.Client
	admin string
	url   string

	mu    sync.Mutex
	count int // GUARDED_BY(mu)
}

// onBothBackends runs run, in parallel subtests, on SQLite and on
// PostgreSQL: db is the --db value of each.
func onBothBackends(t *testing.T, run func(t *testing.T, db string)) {
	for _, b := range []struct {
		name string
		db   func(testing.TB) string
	}{
		{"sqlite", func(testing.TB) string { return "" }},
		{"postgres", sqltest.Postgres},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			run(t, b.db(t))
		})
	}
}

func newCompat(t *testing.T, s *harness.Serve) *compat {
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := &compat{admin: s.AdminKey}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.count++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	c.url = proxy.URL
	c.sdk = c.client(s.AdminKey)
	return c
}

// client returns an SDK client for the server with the given key.
func (c *compat) client(key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(c.url), option.WithAPIKey(key))
}

// requests returns the number of requests the server received since the
// previous call.
func (c *compat) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.count
	c.count = 0
	return n
}

func (c *compat) stores() *anthropic.BetaMemoryStoreService { return &c.sdk.Beta.MemoryStores }

func (c *compat) memories() *anthropic.BetaMemoryStoreMemoryService {
	return &c.sdk.Beta.MemoryStores.Memories
}

func (c *compat) versions() *anthropic.BetaMemoryStoreMemoryVersionService {
	return &c.sdk.Beta.MemoryStores.MemoryVersions
}

// callCtx bounds one SDK call (with its retries and, for a pager, its
// later pages), so that a hung server fails the test instead of hanging it.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// hashOf is the content_sha256 of s, computed independently of memfs.
func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// must(v, err)(t) fails the test on err and returns v.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func (c *compat) newStore(t *testing.T, name string) *anthropic.BetaManagedAgentsMemoryStore {
	t.Helper()
	return must(c.stores().New(callCtx(t), anthropic.BetaMemoryStoreNewParams{Name: name}))(t)
}

func (c *compat) newMemory(t *testing.T, storeID, path, content string) *anthropic.BetaManagedAgentsMemory {
	t.Helper()
	return must(c.memories().New(callCtx(t), storeID, anthropic.BetaMemoryStoreMemoryNewParams{Path: path, Content: anthropic.String(content)}))(t)
}

// drain drains an SDK auto-pager, failing the test if any page failed (an
// auto-pager's All stops silently on an error).
func drain[T any](t *testing.T, p *pagination.PageCursorAutoPager[T]) []T {
	t.Helper()
	var out []T
	for p.Next() {
		out = append(out, p.Current())
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rfc3339UTC is how every timestamp must look on the wire.
var rfc3339UTC = regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"$`)

// checkParsed fails unless the SDK parsed every field it declares on v
// (a response struct with a JSON metadata field): present and of the
// right type, or JSON null for the fields named in nulls. The response
// must not carry fields the SDK doesn't know, and timestamps must be RFC
// 3339 UTC.
func checkParsed(t *testing.T, what string, v any, nulls ...string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	meta := rv.FieldByName("JSON")
	fieldType := reflect.TypeFor[respjson.Field]()
	for i := 0; i < meta.NumField(); i++ {
		sf := meta.Type().Field(i)
		switch {
		case sf.Name == "ExtraFields":
			if extra := meta.Field(i); extra.Len() > 0 {
				t.Errorf("%s: fields unknown to the SDK: %v", what, extra.MapKeys())
			}
			continue
		case sf.Type != fieldType:
			continue
		}
		f := meta.Field(i).Interface().(respjson.Field)
		if slices.Contains(nulls, sf.Name) {
			if f.Raw() != "null" {
				t.Errorf("%s: %s = %q, want null", what, sf.Name, f.Raw())
			}
			continue
		}
		if !f.Valid() {
			t.Errorf("%s: %s did not parse: raw %q", what, sf.Name, f.Raw())
			continue
		}
		if parent := rv.FieldByName(sf.Name); parent.IsValid() && parent.Type() == reflect.TypeFor[time.Time]() && !rfc3339UTC.MatchString(f.Raw()) {
			t.Errorf("%s: %s = %s, want an RFC 3339 UTC timestamp", what, sf.Name, f.Raw())
		}
	}
}

// wireError is the error envelope every error response must carry.
type wireError struct {
	Type  string `json:"type"`
	Error struct {
		Type                string `json:"type"`
		Message             string `json:"message"`
		ConflictingMemoryID string `json:"conflicting_memory_id"`
		ConflictingPath     string `json:"conflicting_path"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// wantAPIError checks that err is the SDK's *anthropic.Error with the
// given status and error type, that the body is the error envelope, and
// that the SDK sent exactly one request: the server said not to retry.
func (c *compat) wantAPIError(t *testing.T, err error, status int, typ string) wireError {
	t.Helper()
	var w wireError
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v (%T), want *anthropic.Error %d %s", err, err, status, typ)
	}
	if ae.StatusCode != status || string(ae.Type()) != typ {
		t.Fatalf("error = %d %q, want %d %q: %v", ae.StatusCode, ae.Type(), status, typ, err)
	}
	if err := json.Unmarshal([]byte(ae.RawJSON()), &w); err != nil {
		t.Fatalf("error body %q: %v", ae.RawJSON(), err)
	}
	if w.Type != "error" || w.Error.Type != typ || w.Error.Message == "" || ae.Message != w.Error.Message {
		t.Errorf("error body = %s, want type error, error.type %s and a message", ae.RawJSON(), typ)
	}
	if !strings.HasPrefix(ae.RequestID, "req_") || w.RequestID != ae.RequestID {
		t.Errorf("request-id header %q, body request_id %q: want the same req_ id", ae.RequestID, w.RequestID)
	}
	if got := ae.Response.Header.Get("x-should-retry"); got != "false" {
		t.Errorf("x-should-retry = %q, want false", got)
	}
	if n := c.requests(); n != 1 {
		t.Errorf("the SDK sent %d requests for one call answered %d, want 1 (no retries)", n, status)
	}
	return w
}

// --- Memory stores ------------------------------------------------------------

func (c *compat) testStoreList(t *testing.T) {
	var ids []string // newest first
	for _, name := range []string{"s1", "s2", "s3", "s4", "s5"} {
		ids = slices.Insert(ids, 0, c.newStore(t, name).ID)
	}
	params := anthropic.BetaMemoryStoreListParams{Limit: anthropic.Int(2)}

	var auto []string
	pager := c.stores().ListAutoPaging(callCtx(t), params)
	for pager.Next() {
		st := pager.Current()
		checkParsed(t, "listed store", st, "ArchivedAt")
		auto = append(auto, st.ID)
	}
	if err := pager.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(auto, ids) {
		t.Errorf("ListAutoPaging = %v, want %v (every store once, newest first)", auto, ids)
	}

	var manual []string
	var sizes []int
	page := must(c.stores().List(callCtx(t), params))(t)
	for page != nil {
		sizes = append(sizes, len(page.Data))
		for _, st := range page.Data {
			manual = append(manual, st.ID)
		}
		if page.NextPage == "" && page.JSON.NextPage.Raw() != "null" {
			t.Errorf("last page's next_page = %q, want null", page.JSON.NextPage.Raw())
		}
		page = must(page.GetNextPage())(t)
	}
	if !slices.Equal(manual, ids) || !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Errorf("GetNextPage pages = %v of sizes %v, want %v in pages of 2, 2, 1", manual, sizes, ids)
	}

	// created_at filters, sent in the SDK's timestamp format.
	oldest := must(c.stores().Get(callCtx(t), ids[len(ids)-1], anthropic.BetaMemoryStoreGetParams{}))(t).CreatedAt.UTC()
	for _, tc := range []struct {
		name string
		p    anthropic.BetaMemoryStoreListParams
		want []string
	}{
		{"created_at[gte] before all", anthropic.BetaMemoryStoreListParams{CreatedAtGte: anthropic.Time(oldest.Add(-time.Minute))}, ids},
		{"created_at[gte] in the future", anthropic.BetaMemoryStoreListParams{CreatedAtGte: anthropic.Time(time.Now().UTC().Add(time.Hour))}, nil},
		{"created_at[lte] before all", anthropic.BetaMemoryStoreListParams{CreatedAtLte: anthropic.Time(oldest.Add(-time.Minute))}, nil},
		{"created_at[lte] in the future", anthropic.BetaMemoryStoreListParams{CreatedAtLte: anthropic.Time(time.Now().UTC().Add(time.Hour))}, ids},
	} {
		var got []string
		for _, st := range drain(t, c.stores().ListAutoPaging(callCtx(t), tc.p)) {
			got = append(got, st.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("list %s = %v, want %v", tc.name, got, tc.want)
		}
	}

	// Archived stores are listed only on request.
	must(c.stores().Archive(callCtx(t), ids[0], anthropic.BetaMemoryStoreArchiveParams{}))(t)
	var live, all []string
	for _, st := range drain(t, c.stores().ListAutoPaging(callCtx(t), anthropic.BetaMemoryStoreListParams{})) {
		live = append(live, st.ID)
	}
	for _, st := range drain(t, c.stores().ListAutoPaging(callCtx(t), anthropic.BetaMemoryStoreListParams{IncludeArchived: anthropic.Bool(true)})) {
		all = append(all, st.ID)
	}
	if !slices.Equal(live, ids[1:]) || !slices.Equal(all, ids) {
		t.Errorf("list = %v, with include_archived %v; want %v and %v", live, all, ids[1:], ids)
	}
	for _, id := range ids {
		must(c.stores().Delete(callCtx(t), id, anthropic.BetaMemoryStoreDeleteParams{}))(t)
	}
}

func (c *compat) testStores(t *testing.T) {
	created := must(c.stores().New(callCtx(t), anthropic.BetaMemoryStoreNewParams{
		Name:        "Project Notes",
		Description: anthropic.String("notes about the project"),
		Metadata:    map[string]string{"owner": "ann", "team": "infra"},
	}))(t)
	checkParsed(t, "created store", created, "ArchivedAt")
	if !strings.HasPrefix(created.ID, "memstore_") || created.Type != "memory_store" ||
		created.Name != "Project Notes" || created.Description != "notes about the project" ||
		!reflect.DeepEqual(created.Metadata, map[string]string{"owner": "ann", "team": "infra"}) ||
		created.CreatedAt.IsZero() || !created.UpdatedAt.Equal(created.CreatedAt) || !created.ArchivedAt.IsZero() {
		t.Errorf("created store = %s", created.RawJSON())
	}

	// Unset description and metadata read back as "" and {}.
	bare := c.newStore(t, "bare")
	checkParsed(t, "bare store", bare, "ArchivedAt")
	if bare.JSON.Description.Raw() != `""` || bare.JSON.Metadata.Raw() != `{}` {
		t.Errorf("bare store = %s, want description \"\" and metadata {}", bare.RawJSON())
	}

	got := must(c.stores().Get(callCtx(t), created.ID, anthropic.BetaMemoryStoreGetParams{}))(t)
	checkParsed(t, "got store", got, "ArchivedAt")
	if got.ID != created.ID || got.Name != created.Name || got.Description != created.Description ||
		!reflect.DeepEqual(got.Metadata, created.Metadata) || !got.CreatedAt.Equal(created.CreatedAt) || !got.UpdatedAt.Equal(created.UpdatedAt) {
		t.Errorf("got store = %s, want %s", got.RawJSON(), created.RawJSON())
	}

	// Name only: the rest stays.
	renamed := must(c.stores().Update(callCtx(t), created.ID, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("Renamed")}))(t)
	checkParsed(t, "updated store", renamed, "ArchivedAt")
	if renamed.Name != "Renamed" || renamed.Description != "notes about the project" ||
		!reflect.DeepEqual(renamed.Metadata, created.Metadata) || !renamed.CreatedAt.Equal(created.CreatedAt) ||
		renamed.UpdatedAt.Before(created.UpdatedAt) {
		t.Errorf("renamed store = %s", renamed.RawJSON())
	}

	// Description "" clears; metadata is a patch, and a null value
	// removes its key.
	updated := must(c.stores().Update(callCtx(t), created.ID, anthropic.BetaMemoryStoreUpdateParams{
		Description: anthropic.String(""),
		Metadata:    map[string]string{"team": "storage", "tier": "gold"},
	}, option.WithJSONSet("metadata.owner", nil)))(t)
	checkParsed(t, "updated store", updated, "ArchivedAt")
	if updated.Name != "Renamed" || updated.Description != "" ||
		!reflect.DeepEqual(updated.Metadata, map[string]string{"team": "storage", "tier": "gold"}) {
		t.Errorf("updated store = %s, want description \"\" and metadata {team: storage, tier: gold}", updated.RawJSON())
	}
	got = must(c.stores().Get(callCtx(t), created.ID, anthropic.BetaMemoryStoreGetParams{}))(t)
	if got.Name != updated.Name || got.Description != "" || !reflect.DeepEqual(got.Metadata, updated.Metadata) || !got.UpdatedAt.Equal(updated.UpdatedAt) {
		t.Errorf("got store after update = %s, want %s", got.RawJSON(), updated.RawJSON())
	}

	archived := must(c.stores().Archive(callCtx(t), created.ID, anthropic.BetaMemoryStoreArchiveParams{}))(t)
	checkParsed(t, "archived store", archived)
	if archived.ArchivedAt.IsZero() || archived.ArchivedAt.Before(archived.CreatedAt) || !archived.UpdatedAt.Equal(archived.ArchivedAt) || archived.Name != "Renamed" {
		t.Errorf("archived store = %s", archived.RawJSON())
	}
	got = must(c.stores().Get(callCtx(t), created.ID, anthropic.BetaMemoryStoreGetParams{}))(t)
	if !got.ArchivedAt.Equal(archived.ArchivedAt) {
		t.Errorf("got archived store = %s, want archived_at %v", got.RawJSON(), archived.ArchivedAt)
	}

	for _, id := range []string{created.ID, bare.ID} {
		del := must(c.stores().Delete(callCtx(t), id, anthropic.BetaMemoryStoreDeleteParams{}))(t)
		checkParsed(t, "deleted store", del)
		if del.ID != id || del.Type != "memory_store_deleted" {
			t.Errorf("delete = %s, want {id: %s, type: memory_store_deleted}", del.RawJSON(), id)
		}
		c.requests()
		_, err := c.stores().Get(callCtx(t), id, anthropic.BetaMemoryStoreGetParams{})
		c.wantAPIError(t, err, 404, "not_found_error")
	}
}

// --- Memories -----------------------------------------------------------------

func (c *compat) testMemories(t *testing.T) {
	st := c.newStore(t, "memories")
	sid := st.ID

	// Create answers the basic view by default: content null.
	m := c.newMemory(t, sid, "/notes/todo.md", "buy milk\n")
	checkParsed(t, "created memory", m, "Content")
	if !strings.HasPrefix(m.ID, "mem_") || m.Type != "memory" || m.MemoryStoreID != sid ||
		!strings.HasPrefix(m.MemoryVersionID, "memver_") || m.Path != "/notes/todo.md" || m.Content != "" ||
		m.ContentSha256 != hashOf("buy milk\n") || m.ContentSizeBytes != 9 ||
		m.CreatedAt.IsZero() || !m.UpdatedAt.Equal(m.CreatedAt) {
		t.Errorf("created memory = %s", m.RawJSON())
	}

	full := must(c.memories().New(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryNewParams{
		Path: "/notes/full.md", Content: anthropic.String("héllo"), View: anthropic.BetaManagedAgentsMemoryViewFull,
	}))(t)
	checkParsed(t, "created memory (full)", full)
	if full.Content != "héllo" || full.ContentSizeBytes != 6 || full.ContentSha256 != hashOf("héllo") {
		t.Errorf("created memory (full) = %s", full.RawJSON())
	}
	empty := must(c.memories().New(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryNewParams{
		Path: "/notes/empty.md", Content: anthropic.String(""), View: anthropic.BetaManagedAgentsMemoryViewFull,
	}))(t)
	checkParsed(t, "created empty memory", empty)
	if empty.JSON.Content.Raw() != `""` || empty.ContentSizeBytes != 0 || empty.ContentSha256 != hashOf("") {
		t.Errorf("created empty memory = %s", empty.RawJSON())
	}

	// Get answers the full view by default.
	got := must(c.memories().Get(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid}))(t)
	checkParsed(t, "got memory", got)
	if got.ID != m.ID || got.Path != m.Path || got.Content != "buy milk\n" || got.ContentSha256 != m.ContentSha256 ||
		got.MemoryVersionID != m.MemoryVersionID || !got.CreatedAt.Equal(m.CreatedAt) || !got.UpdatedAt.Equal(m.UpdatedAt) {
		t.Errorf("got memory = %s, want %s with content", got.RawJSON(), m.RawJSON())
	}
	basic := must(c.memories().Get(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid, View: anthropic.BetaManagedAgentsMemoryViewBasic}))(t)
	checkParsed(t, "got memory (basic)", basic, "Content")
	if basic.ContentSha256 != m.ContentSha256 || basic.ContentSizeBytes != 9 {
		t.Errorf("got memory (basic) = %s", basic.RawJSON())
	}

	// Unconditional update: a new version; the answer is basic by default.
	v2 := must(c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: sid, Content: anthropic.String("buy milk\nbuy eggs\n"),
	}))(t)
	checkParsed(t, "updated memory", v2, "Content")
	if v2.ID != m.ID || v2.Path != m.Path || v2.ContentSha256 != hashOf("buy milk\nbuy eggs\n") || v2.ContentSizeBytes != 18 ||
		v2.MemoryVersionID == m.MemoryVersionID || !v2.CreatedAt.Equal(m.CreatedAt) || v2.UpdatedAt.Before(m.UpdatedAt) {
		t.Errorf("updated memory = %s", v2.RawJSON())
	}

	// Update under a matching precondition.
	v3 := must(c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: sid, Content: anthropic.String("done\n"), View: anthropic.BetaManagedAgentsMemoryViewFull,
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(v2.ContentSha256)},
	}))(t)
	checkParsed(t, "updated memory (full)", v3)
	if v3.Content != "done\n" || v3.ContentSha256 != hashOf("done\n") || v3.MemoryVersionID == v2.MemoryVersionID {
		t.Errorf("updated memory under precondition = %s", v3.RawJSON())
	}

	// A stale precondition: 409, not retried, nothing changed.
	c.requests()
	_, err := c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: sid, Content: anthropic.String("lost update\n"),
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(v2.ContentSha256)},
	})
	c.wantAPIError(t, err, 409, "memory_precondition_failed_error")
	got = must(c.memories().Get(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid}))(t)
	if got.Content != "done\n" || got.MemoryVersionID != v3.MemoryVersionID {
		t.Errorf("memory after a failed precondition = %s, want %s", got.RawJSON(), v3.RawJSON())
	}

	// An update that changes nothing creates no version.
	same := must(c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Content: anthropic.String("done\n")}))(t)
	if same.MemoryVersionID != v3.MemoryVersionID || !same.UpdatedAt.Equal(v3.UpdatedAt) {
		t.Errorf("no-op update = %s, want version %s and updated_at unchanged", same.RawJSON(), v3.MemoryVersionID)
	}

	// Rename: the id stays, the old path is free again.
	moved := must(c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: sid, Path: anthropic.String("/archive/2024/todo.md"),
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(hashOf("done\n"))},
	}))(t)
	checkParsed(t, "renamed memory", moved, "Content")
	if moved.ID != m.ID || moved.Path != "/archive/2024/todo.md" || moved.ContentSha256 != hashOf("done\n") || moved.MemoryVersionID == v3.MemoryVersionID {
		t.Errorf("renamed memory = %s", moved.RawJSON())
	}
	got = must(c.memories().Get(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid}))(t)
	if got.Path != "/archive/2024/todo.md" || got.Content != "done\n" {
		t.Errorf("got renamed memory = %s", got.RawJSON())
	}
	again := c.newMemory(t, sid, "/notes/todo.md", "new")
	if again.ID == m.ID {
		t.Errorf("a memory created at the old path has the renamed memory's id %s", m.ID)
	}

	// Changes to a store's memories don't change the store's updated_at.
	if got := must(c.stores().Get(callCtx(t), sid, anthropic.BetaMemoryStoreGetParams{}))(t); !got.UpdatedAt.Equal(st.UpdatedAt) {
		t.Errorf("store updated_at moved from %v to %v with memory writes", st.UpdatedAt, got.UpdatedAt)
	}

	// Delete: a stale expected hash is a 409 and deletes nothing.
	c.requests()
	_, err = c.memories().Delete(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: sid, ExpectedContentSha256: anthropic.String(hashOf("buy milk\n"))})
	c.wantAPIError(t, err, 409, "memory_precondition_failed_error")
	must(c.memories().Get(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid}))(t)

	del := must(c.memories().Delete(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: sid, ExpectedContentSha256: anthropic.String(hashOf("done\n"))}))(t)
	checkParsed(t, "deleted memory", del)
	if del.ID != m.ID || del.Type != "memory_deleted" {
		t.Errorf("delete = %s, want {id: %s, type: memory_deleted}", del.RawJSON(), m.ID)
	}
	del = must(c.memories().Delete(callCtx(t), full.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: sid}))(t)
	if del.ID != full.ID || del.Type != "memory_deleted" {
		t.Errorf("unconditional delete = %s", del.RawJSON())
	}
	for _, id := range []string{m.ID, full.ID} {
		c.requests()
		_, err = c.memories().Get(callCtx(t), id, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid})
		c.wantAPIError(t, err, 404, "not_found_error")
	}
}

// listed is one memory-list item, reduced to what a test compares.
type listed struct {
	kind, path, content string
}

// listMemories lists with ListAutoPaging, checking every item parses.
func (c *compat) listMemories(t *testing.T, sid string, p anthropic.BetaMemoryStoreMemoryListParams) []listed {
	t.Helper()
	var out []listed
	pager := c.memories().ListAutoPaging(callCtx(t), sid, p)
	for pager.Next() {
		out = append(out, item(t, pager.Current(), p.View == anthropic.BetaManagedAgentsMemoryViewFull))
	}
	if err := pager.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func item(t *testing.T, u anthropic.BetaManagedAgentsMemoryListItemUnion, full bool) listed {
	t.Helper()
	switch v := u.AsAny().(type) {
	case anthropic.BetaManagedAgentsMemory:
		if full {
			checkParsed(t, "listed memory", v)
		} else {
			checkParsed(t, "listed memory", v, "Content")
		}
		if v.ContentSha256 != hashOf(v.Content) && full {
			t.Errorf("listed memory %s: content_sha256 doesn't match its content", v.Path)
		}
		return listed{"memory", v.Path, v.Content}
	case anthropic.BetaManagedAgentsMemoryPrefix:
		checkParsed(t, "listed prefix", v)
		return listed{"prefix", v.Path, ""}
	default:
		t.Fatalf("list item of unknown type: %s", u.RawJSON())
		return listed{}
	}
}

func (c *compat) testMemoryList(t *testing.T) {
	sid := c.newStore(t, "list").ID
	paths := []string{"/a.md", "/dir/b.md", "/dir/sub/c.md", "/dir/sub/d.md", "/dirx/g.md", "/e/f.md"}
	for _, p := range paths {
		c.newMemory(t, sid, p, "content of "+p)
	}
	mems := func(full bool, ps ...string) []listed {
		var out []listed
		for _, p := range ps {
			l := listed{kind: "memory", path: p}
			if full {
				l.content = "content of " + p
			}
			out = append(out, l)
		}
		return out
	}
	check := func(name string, got, want []listed) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	check("list (basic)", c.listMemories(t, sid, anthropic.BetaMemoryStoreMemoryListParams{}), mems(false, paths...))
	check("list (full)", c.listMemories(t, sid, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull}), mems(true, paths...))
	check("list path_prefix /dir/", c.listMemories(t, sid, anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/dir/")}),
		mems(false, "/dir/b.md", "/dir/sub/c.md", "/dir/sub/d.md"))
	check("list depth=1", c.listMemories(t, sid, anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(1)}),
		[]listed{{"memory", "/a.md", ""}, {"prefix", "/dir/", ""}, {"prefix", "/dirx/", ""}, {"prefix", "/e/", ""}})
	check("list depth=1 path_prefix /dir/", c.listMemories(t, sid, anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(1), PathPrefix: anthropic.String("/dir/")}),
		[]listed{{"memory", "/dir/b.md", ""}, {"prefix", "/dir/sub/", ""}})

	// view=full with limit 100 is clamped to 20, not refused.
	check("list (full, limit 100)", c.listMemories(t, sid, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: anthropic.Int(100)}), mems(true, paths...))
	many := c.newStore(t, "many").ID
	for i := range 21 {
		c.newMemory(t, many, fmt.Sprintf("/m%02d", i), "x")
	}
	for _, tc := range []struct {
		view      anthropic.BetaManagedAgentsMemoryView
		wantItems int
		wantMore  bool
	}{{anthropic.BetaManagedAgentsMemoryViewFull, 20, true}, {anthropic.BetaManagedAgentsMemoryViewBasic, 21, false}} {
		p := must(c.memories().List(callCtx(t), many, anthropic.BetaMemoryStoreMemoryListParams{View: tc.view, Limit: anthropic.Int(100)}))(t)
		if len(p.Data) != tc.wantItems || (p.NextPage != "") != tc.wantMore {
			t.Errorf("list view=%s limit=100 over 21 memories: %d items, next_page %q; want %d, more: %v", tc.view, len(p.Data), p.NextPage, tc.wantItems, tc.wantMore)
		}
	}

	// Pages of one, by hand.
	var got []listed
	page := must(c.memories().List(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryListParams{Limit: anthropic.Int(1)}))(t)
	for pages := 0; page != nil; pages++ {
		if len(page.Data) != 1 || pages > len(paths) {
			t.Fatalf("page %d has %d items (%s), want 1", pages, len(page.Data), page.RawJSON())
		}
		got = append(got, item(t, page.Data[0], false))
		if page.NextPage == "" && page.JSON.NextPage.Raw() != "null" {
			t.Errorf("last page's next_page = %q, want null", page.JSON.NextPage.Raw())
		}
		page = must(page.GetNextPage())(t)
	}
	check("pages of limit 1", got, mems(false, paths...))

	// A depth=1 listing in pages of one: prefixes count toward the limit.
	got = nil
	page = must(c.memories().List(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryListParams{Limit: anthropic.Int(1), Depth: anthropic.Int(1)}))(t)
	for ; page != nil; page = must(page.GetNextPage())(t) {
		for _, u := range page.Data {
			got = append(got, item(t, u, false))
		}
		if len(page.Data) != 1 {
			t.Errorf("depth=1 page has %d items, want 1", len(page.Data))
		}
	}
	check("depth=1 pages of limit 1", got, []listed{{"memory", "/a.md", ""}, {"prefix", "/dir/", ""}, {"prefix", "/dirx/", ""}, {"prefix", "/e/", ""}})
}

// --- Memory versions ----------------------------------------------------------

func (c *compat) testVersions(t *testing.T) {
	sid := c.newStore(t, "versions").ID
	m := c.newMemory(t, sid, "/v/one.md", "one")
	must(c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Content: anthropic.String("two")}))(t)
	head := must(c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Path: anthropic.String("/v/two.md")}))(t)
	other := c.newMemory(t, sid, "/v/other.md", "other")

	type want struct {
		op, path, content string
	}
	wants := []want{{"modified", "/v/two.md", "two"}, {"modified", "/v/one.md", "two"}, {"created", "/v/one.md", "one"}}

	params := anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(m.ID)}
	page := must(c.versions().List(callCtx(t), sid, params))(t)
	if len(page.Data) != len(wants) || page.NextPage != "" {
		t.Fatalf("versions of %s = %s, want %d and no next page", m.ID, page.RawJSON(), len(wants))
	}
	var keyID string
	for i, v := range page.Data {
		checkParsed(t, "listed version", v, "Content", "RedactedAt", "RedactedBy")
		w := wants[i]
		if !strings.HasPrefix(v.ID, "memver_") || v.Type != "memory_version" || v.MemoryID != m.ID || v.MemoryStoreID != sid ||
			string(v.Operation) != w.op || v.Path != w.path || v.ContentSha256 != hashOf(w.content) || v.ContentSizeBytes != int64(len(w.content)) || v.CreatedAt.IsZero() {
			t.Errorf("version %d = %s, want %+v (basic view: content null)", i, v.RawJSON(), w)
		}
		if i > 0 && v.CreatedAt.After(page.Data[i-1].CreatedAt) {
			t.Errorf("versions are not newest first: %s after %s", v.CreatedAt, page.Data[i-1].CreatedAt)
		}
		actor, ok := v.CreatedBy.AsAny().(anthropic.BetaManagedAgentsAPIActor)
		if !ok || !strings.HasPrefix(actor.APIKeyID, "apikey_") || (keyID != "" && actor.APIKeyID != keyID) {
			t.Errorf("version %d created_by = %s, want the admin key's api_actor", i, v.CreatedBy.RawJSON())
		}
		checkParsed(t, "created_by", actor)
		keyID = actor.APIKeyID
	}
	if page.Data[0].ID != head.MemoryVersionID {
		t.Errorf("newest version %s, memory_version_id %s: want the same", page.Data[0].ID, head.MemoryVersionID)
	}
	first := page.Data[2]

	// The other filters.
	var ids []string
	for _, v := range drain(t, c.versions().ListAutoPaging(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryVersionListParams{Operation: anthropic.BetaManagedAgentsMemoryVersionOperationCreated})) {
		ids = append(ids, v.MemoryID)
	}
	if !slices.Equal(ids, []string{other.ID, m.ID}) {
		t.Errorf("created versions are of %v, want [%s %s]", ids, other.ID, m.ID)
	}
	ids = nil
	for _, v := range drain(t, c.versions().ListAutoPaging(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryVersionListParams{APIKeyID: anthropic.String(keyID), Limit: anthropic.Int(1)})) {
		ids = append(ids, v.ID)
	}
	if len(ids) != 4 || ids[1] != head.MemoryVersionID || ids[3] != first.ID {
		t.Errorf("versions by api key %s in pages of 1 = %v, want 4, newest first", keyID, ids)
	}

	// memfs has no service accounts: that filter matches nothing.
	empty := must(c.versions().List(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryVersionListParams{ServiceAccountID: anthropic.String("svac_0123")}))(t)
	if len(empty.Data) != 0 || empty.NextPage != "" {
		t.Errorf("versions by a service account = %s, want none", empty.RawJSON())
	}

	// Get answers the full view by default.
	v := must(c.versions().Get(callCtx(t), first.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: sid}))(t)
	checkParsed(t, "got version", v, "RedactedAt", "RedactedBy")
	if v.ID != first.ID || v.Content != "one" || v.Path != "/v/one.md" || v.ContentSha256 != hashOf("one") || v.ContentSizeBytes != 3 ||
		string(v.Operation) != "created" || !v.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("got version = %s", v.RawJSON())
	}

	// Redact an old version: its path, content and hash are gone for ever.
	red := must(c.versions().Redact(callCtx(t), first.ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: sid}))(t)
	checkParsed(t, "redacted version", red, "Content", "Path", "ContentSha256", "ContentSizeBytes")
	if red.ID != first.ID || red.RedactedAt.IsZero() || red.Content != "" || red.Path != "" || red.ContentSha256 != "" ||
		string(red.Operation) != "created" || !red.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("redacted version = %s", red.RawJSON())
	}
	if by, ok := red.RedactedBy.AsAny().(anthropic.BetaManagedAgentsAPIActor); !ok || by.APIKeyID != keyID {
		t.Errorf("redacted_by = %s, want api_actor %s", red.RedactedBy.RawJSON(), keyID)
	}
	if cb, ok := red.CreatedBy.AsAny().(anthropic.BetaManagedAgentsAPIActor); !ok || cb.APIKeyID != keyID {
		t.Errorf("created_by of a redacted version = %s, want it unchanged", red.CreatedBy.RawJSON())
	}
	v = must(c.versions().Get(callCtx(t), first.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: sid}))(t)
	checkParsed(t, "got redacted version", v, "Content", "Path", "ContentSha256", "ContentSizeBytes")
	if !v.RedactedAt.Equal(red.RedactedAt) {
		t.Errorf("got redacted version = %s, want redacted_at %v", v.RawJSON(), red.RedactedAt)
	}

	// The head version of a live memory can't be redacted.
	c.requests()
	_, err := c.versions().Redact(callCtx(t), head.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: sid})
	c.wantAPIError(t, err, 400, "invalid_request_error")

	// A deleted version keeps the path; content, hash and size are null.
	must(c.memories().Delete(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: sid}))(t)
	page = must(c.versions().List(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(m.ID), Limit: anthropic.Int(1), View: anthropic.BetaManagedAgentsMemoryViewFull}))(t)
	if len(page.Data) != 1 || page.NextPage == "" {
		t.Fatalf("versions page = %s, want 1 version and a next page", page.RawJSON())
	}
	d := page.Data[0]
	checkParsed(t, "deleted version", d, "Content", "ContentSha256", "ContentSizeBytes", "RedactedAt", "RedactedBy")
	if string(d.Operation) != "deleted" || d.Path != "/v/two.md" || d.MemoryID != m.ID {
		t.Errorf("deleted version = %s", d.RawJSON())
	}
	// Once deleted, the former head can be redacted.
	red = must(c.versions().Redact(callCtx(t), head.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: sid}))(t)
	if red.RedactedAt.IsZero() || red.Path != "" {
		t.Errorf("redacted former head = %s", red.RawJSON())
	}
}

// --- Errors -------------------------------------------------------------------

func (c *compat) testErrors(t *testing.T) {
	sid := c.newStore(t, "errors").ID
	a := c.newMemory(t, sid, "/a", "a")
	b := c.newMemory(t, sid, "/b/c.md", "c")

	t.Run("InvalidPath", func(t *testing.T) {
		for _, p := range []string{"/a/../b", "no-slash", "/a//b", "/./a", "/a/", "/tab\there", "/e\u0301"} {
			c.requests()
			_, err := c.memories().New(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String("x")})
			c.wantAPIError(t, err, 400, "invalid_request_error")
			_, err = c.memories().Update(callCtx(t), a.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Path: anthropic.String(p)})
			c.wantAPIError(t, err, 400, "invalid_request_error")
		}
		_, err := c.memories().List(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/b")})
		c.wantAPIError(t, err, 400, "invalid_request_error")
	})

	t.Run("PathConflict", func(t *testing.T) {
		for _, tc := range []struct{ path, conflictID, conflictPath string }{
			{"/a", a.ID, "/a"},           // taken
			{"/a/x.md", a.ID, "/a"},      // below a memory
			{"/b", b.ID, "/b/c.md"},      // a directory of memories
			{"/b/c.md", b.ID, "/b/c.md"}, // taken, nested
		} {
			c.requests()
			_, err := c.memories().New(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryNewParams{Path: tc.path, Content: anthropic.String("x")})
			w := c.wantAPIError(t, err, 409, "memory_path_conflict_error")
			if w.Error.ConflictingMemoryID != tc.conflictID || w.Error.ConflictingPath != tc.conflictPath {
				t.Errorf("create %s: conflict with %s at %s, want %s at %s", tc.path, w.Error.ConflictingMemoryID, w.Error.ConflictingPath, tc.conflictID, tc.conflictPath)
			}
		}
		// A rename onto a taken path: Update is retried on 409 unless the
		// server says not to.
		c.requests()
		_, err := c.memories().Update(callCtx(t), b.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Path: anthropic.String("/a")})
		w := c.wantAPIError(t, err, 409, "memory_path_conflict_error")
		if w.Error.ConflictingMemoryID != a.ID {
			t.Errorf("rename onto /a: conflicting_memory_id %q, want %s", w.Error.ConflictingMemoryID, a.ID)
		}
	})

	t.Run("PreconditionFailed", func(t *testing.T) {
		c.requests()
		_, err := c.memories().Update(callCtx(t), a.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
			MemoryStoreID: sid, Content: anthropic.String("new"),
			Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(hashOf("not a"))},
		})
		c.wantAPIError(t, err, 409, "memory_precondition_failed_error")
		_, err = c.memories().Delete(callCtx(t), a.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: sid, ExpectedContentSha256: anthropic.String(hashOf("not a"))})
		c.wantAPIError(t, err, 409, "memory_precondition_failed_error")
	})

	t.Run("TooLarge", func(t *testing.T) {
		limit := strings.Repeat("x", 102400)
		m := must(c.memories().New(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/big", Content: anthropic.String(limit)}))(t)
		if m.ContentSizeBytes != 102400 {
			t.Errorf("content_size_bytes = %d, want 102400", m.ContentSizeBytes)
		}
		c.requests()
		_, err := c.memories().New(callCtx(t), sid, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/bigger", Content: anthropic.String(limit + "x")})
		c.wantAPIError(t, err, 413, "request_too_large")
		_, err = c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Content: anthropic.String(limit + "x")})
		c.wantAPIError(t, err, 413, "request_too_large")
	})

	t.Run("NotFound", func(t *testing.T) {
		c.requests()
		_, err := c.memories().Get(callCtx(t), "mem_00000000000000000000000000", anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: sid})
		c.wantAPIError(t, err, 404, "not_found_error")
		_, err = c.memories().Update(callCtx(t), "mem_00000000000000000000000000", anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Content: anthropic.String("x")})
		c.wantAPIError(t, err, 404, "not_found_error")
		_, err = c.memories().Delete(callCtx(t), "mem_00000000000000000000000000", anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: sid})
		c.wantAPIError(t, err, 404, "not_found_error")
		_, err = c.memories().Get(callCtx(t), a.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: "memstore_00000000000000000000000000"})
		c.wantAPIError(t, err, 404, "not_found_error")
		_, err = c.versions().Get(callCtx(t), "memver_00000000000000000000000000", anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: sid})
		c.wantAPIError(t, err, 404, "not_found_error")
		_, err = c.stores().Get(callCtx(t), "memstore_00000000000000000000000000", anthropic.BetaMemoryStoreGetParams{})
		c.wantAPIError(t, err, 404, "not_found_error")
	})

	t.Run("WrongKey", func(t *testing.T) {
		wrong := c.client("sk-memfs-wrong-key")
		c.requests()
		_, err := wrong.Beta.MemoryStores.Get(callCtx(t), sid, anthropic.BetaMemoryStoreGetParams{})
		c.wantAPIError(t, err, 401, "authentication_error")
		_, err = wrong.Beta.MemoryStores.Memories.Update(callCtx(t), a.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: sid, Content: anthropic.String("x")})
		c.wantAPIError(t, err, 401, "authentication_error")
	})

	t.Run("ArchivedStore", func(t *testing.T) {
		arch := c.newStore(t, "archived")
		m := c.newMemory(t, arch.ID, "/kept.md", "kept")
		must(c.stores().Archive(callCtx(t), arch.ID, anthropic.BetaMemoryStoreArchiveParams{}))(t)
		c.requests()
		_, err := c.memories().New(callCtx(t), arch.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/new.md", Content: anthropic.String("x")})
		c.wantAPIError(t, err, 403, "permission_error")
		_, err = c.memories().Update(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: arch.ID, Content: anthropic.String("x")})
		c.wantAPIError(t, err, 403, "permission_error")
		_, err = c.stores().Update(callCtx(t), arch.ID, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("x")})
		c.wantAPIError(t, err, 403, "permission_error")
		// Its memories stay readable.
		got := must(c.memories().Get(callCtx(t), m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: arch.ID}))(t)
		if got.Content != "kept" {
			t.Errorf("memory of an archived store = %s", got.RawJSON())
		}
	})

	t.Run("InvalidStore", func(t *testing.T) {
		c.requests()
		_, err := c.stores().New(callCtx(t), anthropic.BetaMemoryStoreNewParams{Name: ""})
		c.wantAPIError(t, err, 400, "invalid_request_error")
		_, err = c.stores().New(callCtx(t), anthropic.BetaMemoryStoreNewParams{Name: "x", Description: anthropic.String(strings.Repeat("d", 1025))})
		c.wantAPIError(t, err, 400, "invalid_request_error")
		_, err = c.stores().List(callCtx(t), anthropic.BetaMemoryStoreListParams{Limit: anthropic.Int(101)})
		c.wantAPIError(t, err, 400, "invalid_request_error")
	})
}
