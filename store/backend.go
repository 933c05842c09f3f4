package store

import (
	"context"
	"time"
)

// Backend is the durable home of stores, memories, versions and the change
// feed. Implementations (package store/sqlstore: SQLite and PostgreSQL)
// commit every mutation, its version row and its change-feed sequence
// number in one transaction, and serialize the mutations of one store so
// that preconditions, path uniqueness and file/directory exclusivity hold
// under concurrent writers.
//
// Arguments are validated by the caller (see Service); a backend enforces
// what only it can see: existence, archive state, preconditions, path
// conflicts and the per-store memory cap.
type Backend interface {
	StoreBackend
	MemoryBackend
	VersionBackend
	ChangeFeed
	KeyStore
	WorkBackend
	AgentBackend
	EventLog
	// Close releases the database. It does not wait for long polls.
	Close() error
}

// StoreBackend manages memory stores.
type StoreBackend interface {
	CreateStore(ctx context.Context, in CreateStoreInput) (*Store, error)
	GetStore(ctx context.Context, id string) (*Store, error)
	UpdateStore(ctx context.Context, id string, in UpdateStoreInput) (*Store, error)
	ListStores(ctx context.Context, opts ListStoresOptions) (Page[Store], error)
	ArchiveStore(ctx context.Context, id string) (*Store, error)
	DeleteStore(ctx context.Context, id string) error
}

// MemoryBackend manages the memories of a store. Every method returns
// ErrNotFound for an unknown store or memory, and every mutation returns
// ErrForbidden on an archived store.
type MemoryBackend interface {
	// CreateMemory never overwrites: a taken path (or a path that is a
	// directory of memories, or below a memory) is ErrPathConflict.
	CreateMemory(ctx context.Context, storeID string, in CreateMemoryInput) (*Memory, error)
	// GetMemory returns the memory with its content.
	GetMemory(ctx context.Context, storeID, memoryID string) (*Memory, error)
	// UpdateMemory changes content and/or path; a request that changes
	// nothing returns the memory and creates no version.
	UpdateMemory(ctx context.Context, storeID, memoryID string, in UpdateMemoryInput) (*Memory, error)
	// DeleteMemory deletes a memory, appending a "deleted" version.
	DeleteMemory(ctx context.Context, storeID, memoryID string, in DeleteMemoryInput) error
	// ListMemories lists in byte-wise path order with keyset pagination.
	ListMemories(ctx context.Context, storeID string, opts ListMemoriesOptions) (Page[MemoryListItem], error)
}

// VersionBackend reads and redacts memory versions.
type VersionBackend interface {
	// ListVersions lists newest first.
	ListVersions(ctx context.Context, storeID string, opts ListVersionsOptions) (Page[Version], error)
	GetVersion(ctx context.Context, storeID, versionID string) (*Version, error)
	// RedactVersion wipes a version's path, content and hash for ever. The
	// head version of a live memory can't be redacted (ErrInvalid).
	RedactVersion(ctx context.Context, storeID, versionID string, by Actor) (*Version, error)
}

// ChangeFeed reads a store's change feed and wakes waiters when it grows.
type ChangeFeed interface {
	// Changes returns up to limit changes with seq > after, in seq order.
	// after == 0 returns no data and the current head as NextCursor. A
	// cursor older than what is kept returns ErrGone.
	Changes(ctx context.Context, storeID string, after int64, limit int) (ChangePage, error)
	// Subscribe returns a channel that is closed at the next commit to the
	// store (in this process or, on PostgreSQL, in any process sharing the
	// database), and a function to release it. Subscribe before reading
	// the feed, then wait on the channel, to miss nothing.
	Subscribe(storeID string) (<-chan struct{}, func())
	// PruneChanges drops feed entries committed before cutoff; cursors
	// older than what remains get ErrGone. It returns how many it dropped.
	PruneChanges(ctx context.Context, cutoff time.Time) (int64, error)
}

// KeyStore keeps hashed credentials.
type KeyStore interface {
	// CreateAPIKey records a key by its hash and returns its id.
	CreateAPIKey(ctx context.Context, kind string, hash []byte) (id string, err error)
	// LookupAPIKey finds a key by its hash; ErrUnauthorized when unknown.
	LookupAPIKey(ctx context.Context, hash []byte) (*APIKey, error)
	// CountAPIKeys counts the keys of one kind.
	CountAPIKeys(ctx context.Context, kind string) (int, error)
}

// APIKey kinds.
const (
	KeyKindAdmin = "admin"
)

// APIKey is a stored credential; only its hash is kept.
type APIKey struct {
	ID   string
	Kind string
	// ScopeID is what the key is for: the environment of an environment
	// key, the work item of a session token ("" for an admin key).
	ScopeID   string
	CreatedAt time.Time
}

// CreateStoreInput are the fields of a new store.
type CreateStoreInput struct {
	Name        string
	Description string
	Metadata    map[string]string
}

// UpdateStoreInput changes a store; nil fields are left alone. In
// Metadata, a nil value removes the key.
type UpdateStoreInput struct {
	Name        *string
	Description *string
	Metadata    map[string]*string
}

// ListStoresOptions filter and page a store listing (newest first).
type ListStoresOptions struct {
	Limit           int
	Page            string
	IncludeArchived bool
	CreatedGTE      *time.Time
	CreatedLTE      *time.Time
}

// CreateMemoryInput are the fields of a new memory.
type CreateMemoryInput struct {
	Path    string
	Content string
	Actor   Actor
}

// UpdateMemoryInput changes a memory. Nil fields are left alone.
// ExpectedSHA256, when set, must equal the memory's current content_sha256.
type UpdateMemoryInput struct {
	Content        *string
	Path           *string
	ExpectedSHA256 *string
	Actor          Actor
}

// DeleteMemoryInput deletes a memory; ExpectedSHA256 is an optional precondition.
type DeleteMemoryInput struct {
	ExpectedSHA256 *string
	Actor          Actor
}

// ListMemoriesOptions filter and page a memory listing.
type ListMemoriesOptions struct {
	// PathPrefix ends in "/" (or is empty for the whole store).
	PathPrefix string
	// Depth 0 is recursive; 1 lists direct children, rolling deeper
	// memories up into memory_prefix items.
	Depth int
	Limit int
	Page  string
	// Full includes content.
	Full bool
}

// ListVersionsOptions filter and page a version listing.
type ListVersionsOptions struct {
	MemoryID   string
	Operation  string
	SessionID  string
	APIKeyID   string
	CreatedGTE *time.Time
	CreatedLTE *time.Time
	Limit      int
	Page       string
	Full       bool
}
