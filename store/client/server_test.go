package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server/servertest"
)

const adminKey = servertest.AdminKey

// realServer runs memfs serve's handler on SQLite behind wrap (which may
// inject faults) and returns a client for it.
func realServer(t *testing.T, wrap func(http.Handler) http.Handler) *client.Client {
	t.Helper()
	srv := servertest.New(t)
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.BeginShutdown)
	c, err := client.New(client.Options{BaseURL: ts.URL, APIKey: adminKey, RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func TestAgainstServer(t *testing.T) {
	c := realServer(t, nil)
	ctx := context.Background()

	s, err := c.CreateStore(ctx, store.CreateStoreInput{Name: "notes", Metadata: map[string]string{"a": "1", "b": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStore(ctx, store.CreateStoreInput{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	s, err = c.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Description: ptr("d"), Metadata: map[string]*string{"a": nil, "c": ptr("3")}})
	if err != nil || s.Description != "d" || len(s.Metadata) != 2 || s.Metadata["c"] != "3" || s.Metadata["b"] != "2" {
		t.Fatalf("UpdateStore = %+v, %v", s, err)
	}
	var n int
	for st, err := range c.Stores(ctx, store.ListStoresOptions{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = st
	}
	if n != 2 {
		t.Errorf("Stores with one per page saw %d stores, want 2", n)
	}

	m, err := c.CreateMemory(ctx, s.ID, "/dir/a.md", "one")
	if err != nil || m.Content != nil || m.ContentSHA256 != client.SHA256("one") {
		t.Fatalf("CreateMemory = %+v, %v", m, err)
	}
	// after 0 asks for the head (here: the create's seq), with no data.
	head, err := c.Changes(ctx, s.ID, 0, 0, 0)
	if err != nil || head.NextCursor == 0 || len(head.Data) != 0 {
		t.Fatalf("Changes(0) = %+v, %v", head, err)
	}
	_, err = c.CreateMemory(ctx, s.ID, "/dir", "x")
	var se *store.Error
	if !errors.As(err, &se) || !errors.Is(err, store.ErrPathConflict) || se.ConflictingMemoryID != m.ID || se.ConflictingPath != "/dir/a.md" || se.RequestID == "" {
		t.Errorf("create over a directory: err = %#v", err)
	}
	if _, err := c.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("two"), ExpectedSHA256: ptr(client.SHA256("stale"))}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("stale update: err = %v, want ErrPreconditionFailed", err)
	}
	if _, err := c.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("two"), ExpectedSHA256: ptr(client.SHA256("one"))}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetMemory(ctx, s.ID, m.ID)
	if err != nil || got.Content == nil || *got.Content != "two" {
		t.Fatalf("GetMemory = %+v, %v", got, err)
	}
	if byPath, err := c.MemoryByPath(ctx, s.ID, "/dir/a.md"); err != nil || byPath.ID != m.ID {
		t.Errorf("MemoryByPath = %+v, %v", byPath, err)
	}

	// A long poll wakes on a commit.
	feed, err := c.Changes(ctx, s.ID, head.NextCursor, 0, 0)
	if err != nil || len(feed.Data) != 1 || feed.Data[0].Operation != store.OpModified || feed.Data[0].MemoryID != m.ID {
		t.Fatalf("Changes = %+v, %v", feed, err)
	}
	done := make(chan store.ChangePage, 1)
	go func() {
		p, err := c.Changes(ctx, s.ID, feed.NextCursor, 0, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	if _, err := c.CreateMemory(ctx, s.ID, "/b.md", "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-done:
		// The poll may have started after the create: either way it
		// reports it.
		if len(p.Data) != 1 || p.Data[0].Path != "/b.md" {
			t.Errorf("long poll = %+v", p)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the long poll did not wake on a commit")
	}

	var versions []store.Version
	for v, err := range c.Versions(ctx, s.ID, store.ListVersionsOptions{MemoryID: m.ID, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if len(versions) != 2 || versions[0].Operation != store.OpModified {
		t.Fatalf("Versions = %+v", versions)
	}
	v, err := c.GetVersion(ctx, s.ID, versions[1].ID)
	if err != nil || v.Content == nil || *v.Content != "one" {
		t.Fatalf("GetVersion = %+v, %v", v, err)
	}
	if v, err = c.RedactVersion(ctx, s.ID, versions[1].ID); err != nil || v.Content != nil || v.RedactedAt == nil {
		t.Fatalf("RedactVersion = %+v, %v", v, err)
	}

	if err := c.DeleteMemory(ctx, s.ID, m.ID, ptr(client.SHA256("one"))); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("delete with a stale sha: err = %v", err)
	}
	if err := c.DeleteMemory(ctx, s.ID, m.ID, ptr(client.SHA256("two"))); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteMemory(ctx, s.ID, m.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: err = %v, want ErrNotFound", err)
	}

	if _, err := c.ArchiveStore(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateMemory(ctx, s.ID, "/c.md", "c"); !errors.Is(err, store.ErrForbidden) {
		t.Errorf("write to an archived store: err = %v, want ErrForbidden", err)
	}
	if d, err := c.DeleteStore(ctx, s.ID); err != nil || d.Type != store.TypeMemoryStoreDeleted {
		t.Fatalf("DeleteStore = %+v, %v", d, err)
	}
	if _, err := c.Changes(ctx, s.ID, 1, 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Changes of a deleted store: err = %v, want ErrNotFound", err)
	}
}

// loseFirst applies the first request that match does, then drops the
// connection without answering: a response lost on the way back.
func loseFirst(match func(*http.Request) bool, lost *atomic.Int32) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if match(r) && lost.Add(1) == 1 {
				h.ServeHTTP(httptest.NewRecorder(), r)
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					conn.Close()
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

func TestLostResponsesAgainstServer(t *testing.T) {
	var lostCreate, lostUpdate atomic.Int32
	isCreate := func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/memories")
	}
	isUpdate := func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/memories/mem_")
	}
	c := realServer(t, func(h http.Handler) http.Handler {
		return loseFirst(isCreate, &lostCreate)(loseFirst(isUpdate, &lostUpdate)(h))
	})
	ctx := context.Background()
	s, err := c.CreateStore(ctx, store.CreateStoreInput{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}

	m, err := c.CreateMemory(ctx, s.ID, "/a.md", "hello")
	if err != nil {
		t.Fatalf("create whose first answer was lost: %v", err)
	}
	if lostCreate.Load() != 2 || m.Path != "/a.md" || m.ContentSHA256 != client.SHA256("hello") {
		t.Errorf("attempts %d, memory %+v", lostCreate.Load(), m)
	}

	m2, err := c.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("bye"), ExpectedSHA256: ptr(client.SHA256("hello"))})
	if err != nil {
		t.Fatalf("update whose first answer was lost: %v", err)
	}
	if lostUpdate.Load() != 2 || m2.ID != m.ID || m2.ContentSHA256 != client.SHA256("bye") {
		t.Errorf("attempts %d, memory %+v", lostUpdate.Load(), m2)
	}
	var n int
	for _, err := range c.Versions(ctx, s.ID, store.ListVersionsOptions{MemoryID: m.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d versions, want 2: each write applied once", n)
	}
}
