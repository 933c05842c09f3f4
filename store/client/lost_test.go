package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/memfs/memfs/store"
)

// fakeMemories is a minimal memory endpoint set for the lost-response
// tests: create, update and get.
type fakeMemories struct {
	mu   sync.Mutex
	mems map[string]*store.Memory // by id
	// dropNext makes the next write apply and then drop the connection
	// without answering.
	dropNext bool
	attempts int
}

func (f *fakeMemories) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := r.PathValue("mid")
	var in struct {
		Path         *string `json:"path"`
		Content      *string `json:"content"`
		Precondition *struct {
			ContentSHA256 string `json:"content_sha256"`
		} `json:"precondition"`
	}
	if r.Method == http.MethodPost {
		f.attempts++
		json.NewDecoder(r.Body).Decode(&in)
	}
	var m *store.Memory
	switch {
	case r.Method == http.MethodGet:
		if m = f.mems[id]; m == nil {
			writeErr(w, 404, "not_found_error", "no such memory", nil)
			return
		}
	case id == "": // create
		for _, o := range f.mems {
			if o.Path == *in.Path {
				writeErr(w, 409, "memory_path_conflict_error", "taken",
					map[string]any{"conflicting_memory_id": o.ID, "conflicting_path": o.Path})
				return
			}
		}
		m = &store.Memory{ID: fmt.Sprintf("mem_%d", len(f.mems)+1), Type: store.TypeMemory, Path: *in.Path,
			ContentSHA256: SHA256(*in.Content), ContentSizeBytes: int64(len(*in.Content))}
		f.mems[m.ID] = m
	default: // update
		if m = f.mems[id]; m == nil {
			writeErr(w, 404, "not_found_error", "no such memory", nil)
			return
		}
		if in.Precondition != nil && in.Precondition.ContentSHA256 != m.ContentSHA256 {
			writeErr(w, 409, "memory_precondition_failed_error", "content changed", nil)
			return
		}
		if in.Content != nil {
			m.ContentSHA256, m.ContentSizeBytes = SHA256(*in.Content), int64(len(*in.Content))
		}
		if in.Path != nil {
			m.Path = *in.Path
		}
	}
	if r.Method == http.MethodPost && f.dropNext {
		f.dropNext = false
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	out := *m
	if r.Method == http.MethodGet {
		c := "content of " + m.Path
		out.Content = &c
	}
	writeJSON(w, out)
}

func newFake(t *testing.T) (*fakeMemories, *Client) {
	f := &fakeMemories{mems: map[string]*store.Memory{}}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/memory_stores/{sid}/memories", f)
	mux.Handle("GET /v1/memory_stores/{sid}/memories/{mid}", f)
	mux.Handle("POST /v1/memory_stores/{sid}/memories/{mid}", f)
	return f, newTestClient(t, mux)
}

func TestCreateLostResponseIsNotAConflict(t *testing.T) {
	f, c := newFake(t)
	f.dropNext = true
	m, err := c.CreateMemory(context.Background(), "memstore_1", "/notes.md", "hello")
	if err != nil {
		t.Fatalf("CreateMemory after a lost response: %v", err)
	}
	if m.ID != "mem_1" || m.Path != "/notes.md" || m.ContentSHA256 != SHA256("hello") || m.Content != nil {
		t.Errorf("memory = %+v", m)
	}
	if f.attempts != 2 {
		t.Errorf("attempts = %d, want 2 (the lost one and the retry)", f.attempts)
	}
}

func TestCreateRealConflictStays(t *testing.T) {
	f, c := newFake(t)
	f.mems["mem_7"] = &store.Memory{ID: "mem_7", Path: "/notes.md", ContentSHA256: SHA256("theirs")}
	_, err := c.CreateMemory(context.Background(), "memstore_1", "/notes.md", "mine")
	var se *store.Error
	if !errors.Is(err, store.ErrPathConflict) || !errors.As(err, &se) || se.ConflictingMemoryID != "mem_7" {
		t.Fatalf("err = %v, want the path conflict with mem_7", err)
	}
}

func TestUpdateLostResponseIsNotAPreconditionFailure(t *testing.T) {
	f, c := newFake(t)
	f.mems["mem_1"] = &store.Memory{ID: "mem_1", Path: "/a.md", ContentSHA256: SHA256("v1")}
	f.dropNext = true
	content, expect, to := "v2", SHA256("v1"), "/b.md"
	m, err := c.UpdateMemory(context.Background(), "memstore_1", "mem_1",
		store.UpdateMemoryInput{Content: &content, Path: &to, ExpectedSHA256: &expect})
	if err != nil {
		t.Fatalf("UpdateMemory after a lost response: %v", err)
	}
	if m.ContentSHA256 != SHA256("v2") || m.Path != "/b.md" {
		t.Errorf("memory = %+v", m)
	}
	if f.attempts != 2 {
		t.Errorf("attempts = %d, want 2", f.attempts)
	}

	// Someone else's change still fails the precondition.
	other, stale := "v3", SHA256("v1")
	_, err = c.UpdateMemory(context.Background(), "memstore_1", "mem_1",
		store.UpdateMemoryInput{Content: &other, ExpectedSHA256: &stale})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("stale update: err = %v, want ErrPreconditionFailed", err)
	}
}
