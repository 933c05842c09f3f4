package store

import (
	"encoding/json"
	"time"
)

// Object type names, as they appear in the "type" field on the wire.
const (
	TypeMemoryStore        = "memory_store"
	TypeMemoryStoreDeleted = "memory_store_deleted"
	TypeMemory             = "memory"
	TypeMemoryPrefix       = "memory_prefix"
	TypeMemoryDeleted      = "memory_deleted"
	TypeMemoryVersion      = "memory_version"
)

// Version operations.
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpDeleted  = "deleted"
)

// Views select whether content is included.
const (
	ViewBasic = "basic"
	ViewFull  = "full"
)

// Store is a memory store (wire type memory_store).
type Store struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	ArchivedAt  *time.Time        `json:"archived_at"`
}

// Archived reports whether the store is archived (read-only for ever).
func (s *Store) Archived() bool { return s.ArchivedAt != nil }

// Memory is one memory (wire type memory). Content is nil in the basic view.
type Memory struct {
	ID               string    `json:"id"`
	Type             string    `json:"type"`
	MemoryStoreID    string    `json:"memory_store_id"`
	MemoryVersionID  string    `json:"memory_version_id"`
	Path             string    `json:"path"`
	Content          *string   `json:"content"`
	ContentSHA256    string    `json:"content_sha256"`
	ContentSizeBytes int64     `json:"content_size_bytes"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// MemoryListItem is one entry of a memory listing: a memory, or (with
// depth=1) a memory_prefix standing for every memory below Prefix.
type MemoryListItem struct {
	Memory *Memory
	// Prefix is set instead of Memory for a memory_prefix item; it ends in "/".
	Prefix string
}

type memoryPrefixJSON struct {
	Type string `json:"type"`
	Path string `json:"path"`
}

// MarshalJSON writes a memory or a memory_prefix object.
func (it MemoryListItem) MarshalJSON() ([]byte, error) { return json.Marshal(it.wire()) }

// wire is the item's wire object, a value encoding/json writes without
// calling a marshaler (whose output it would scan and compact again).
func (it MemoryListItem) wire() any {
	if it.Memory != nil {
		return it.Memory
	}
	return memoryPrefixJSON{Type: TypeMemoryPrefix, Path: it.Prefix}
}

// UnmarshalJSON reads either object, by its type field, in one decode: a
// memory_prefix has a type and a path, as a memory has.
func (it *MemoryListItem) UnmarshalJSON(b []byte) error {
	var m Memory
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*it = ListItemOf(&m)
	return nil
}

// ListItemOf is the listing item that m decodes as: a memory_prefix item
// (its path the prefix) when its type says so, else the memory m. A
// listing decoded as []Memory and then turned into items reads each
// item's bytes once (see client.ListMemories).
func ListItemOf(m *Memory) MemoryListItem {
	if m.Type == TypeMemoryPrefix {
		return MemoryListItem{Prefix: m.Path}
	}
	return MemoryListItem{Memory: m}
}

// Actor is who made a change: an api_actor (an API key) or a
// session_actor (a session writing through its token).
type Actor struct {
	Type      string `json:"type"`
	APIKeyID  string `json:"api_key_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// String names who made a change, as the commands show it: key:ID or
// session:ID ("-" for none).
func (a *Actor) String() string {
	switch {
	case a == nil:
		return "-"
	case a.Type == ActorSession:
		return "session:" + a.SessionID
	case a.Type == ActorAPI:
		return "key:" + a.APIKeyID
	}
	return a.Type
}

// Actor types.
const (
	ActorAPI     = "api_actor"
	ActorSession = "session_actor"
)

// APIActor returns the actor for an API key id.
func APIActor(keyID string) Actor { return Actor{Type: ActorAPI, APIKeyID: keyID} }

// SessionActor returns the actor for a session.
func SessionActor(sessionID string) Actor { return Actor{Type: ActorSession, SessionID: sessionID} }

// Version is one immutable memory version (wire type memory_version).
// Path, Content, ContentSHA256 and ContentSizeBytes are nil on a deleted
// version's content fields and on a redacted version; Content is also nil
// in the basic view.
type Version struct {
	ID               string     `json:"id"`
	Type             string     `json:"type"`
	MemoryID         string     `json:"memory_id"`
	MemoryStoreID    string     `json:"memory_store_id"`
	Operation        string     `json:"operation"`
	Path             *string    `json:"path"`
	Content          *string    `json:"content"`
	ContentSHA256    *string    `json:"content_sha256"`
	ContentSizeBytes *int64     `json:"content_size_bytes"`
	CreatedAt        time.Time  `json:"created_at"`
	CreatedBy        *Actor     `json:"created_by"`
	RedactedAt       *time.Time `json:"redacted_at"`
	RedactedBy       *Actor     `json:"redacted_by"`
}

// Change is one entry of a store's change feed (the memfs extension).
// Seq is strictly increasing per store, assigned in the committing
// transaction. ContentSHA256 and ContentSizeBytes are nil for deletions.
type Change struct {
	Seq              int64   `json:"seq"`
	Operation        string  `json:"operation"`
	MemoryID         string  `json:"memory_id"`
	Path             string  `json:"path"`
	PreviousPath     string  `json:"previous_path,omitempty"`
	ContentSHA256    *string `json:"content_sha256"`
	ContentSizeBytes *int64  `json:"content_size_bytes"`
	MemoryVersionID  string  `json:"memory_version_id"`
	CreatedBy        *Actor  `json:"created_by"`
}

// ChangePage is one response of the change feed.
type ChangePage struct {
	Data       []Change `json:"data"`
	NextCursor int64    `json:"next_cursor"`
	HasMore    bool     `json:"has_more"`
}

// Page is one page of a list. NextPage is the opaque token of the next
// page, "" on the last one (null on the wire).
type Page[T any] struct {
	Data     []T
	NextPage string
}

// PageWire is the wire form of Page. Decoding into it (then Page) skips
// Page's UnmarshalJSON, whose bytes encoding/json would scan once more.
type PageWire[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
}

// MarshalJSON writes {data, next_page} with a null next_page on the last page.
func (p Page[T]) MarshalJSON() ([]byte, error) {
	w := PageWire[any]{Data: make([]any, len(p.Data))}
	for i, it := range p.Data {
		w.Data[i] = it
		if li, ok := any(it).(MemoryListItem); ok {
			w.Data[i] = li.wire() // one encoding pass, not two
		}
	}
	if p.NextPage != "" {
		w.NextPage = &p.NextPage
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads {data, next_page}.
func (p *Page[T]) UnmarshalJSON(b []byte) error {
	var w PageWire[T]
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = w.Page()
	return nil
}

// Page is the page w holds.
func (w PageWire[T]) Page() Page[T] {
	p := Page[T]{Data: w.Data}
	if w.NextPage != nil {
		p.NextPage = *w.NextPage
	}
	return p
}

// DeletedObject is the answer to a delete: {id, type}.
type DeletedObject struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}
