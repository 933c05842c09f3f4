package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrHeartbeat is the kind of a failed heartbeat precondition (HTTP 412,
// error_code heartbeat_precondition_failed); the error is a *HeartbeatError.
var ErrHeartbeat = errors.New("heartbeat precondition failed")

// Sessions, environments and the work queue (docs/api.md, "Sessions,
// environments and the work queue"): enough of the self-hosted environment
// protocol for a worker to claim sessions. Wire shapes follow the SDK's
// BetaEnvironment, BetaManagedAgentsSession and BetaSelfHostedWork.

// Object types and id prefixes.
const (
	TypeEnvironment     = "environment"
	TypeSession         = "session"
	TypeWork            = "work"
	TypeWorkHeartbeat   = "work_heartbeat"
	TypeWorkQueueStats  = "work_queue_stats"
	PrefixEnvironment   = "env_"
	PrefixSession       = "sesn_"
	PrefixWork          = "work_"
	PrefixResource      = "sesrsc_"
	PrefixHealthcheck   = "hc_"
	KeyKindEnvironment  = "environment"
	KeyKindSession      = "session"
	ResourceMemoryStore = "memory_store"
	AccessReadWrite     = "read_write"
	AccessReadOnly      = "read_only"
	MaxSessionStores    = 8
	MaxInstructions     = 4096
	NoHeartbeat         = "NO_HEARTBEAT"
	DefaultLeaseTTL     = 30 * time.Second
	DefaultReclaimAfter = 5 * time.Second
)

// Work item states.
const (
	WorkQueued   = "queued"
	WorkStarting = "starting"
	WorkActive   = "active"
	WorkStopping = "stopping"
	WorkStopped  = "stopped"
)

// Session statuses.
const (
	SessionIdle       = "idle"
	SessionRunning    = "running"
	SessionTerminated = "terminated"
)

// Environment is a self-hosted environment (wire type environment). The
// environment_key is returned once, in the create response only.
type Environment struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	Name           string            `json:"name"`
	Description    *string           `json:"description"`
	Metadata       map[string]string `json:"metadata"`
	Config         json.RawMessage   `json:"config"`
	Scope          string            `json:"scope"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	ArchivedAt     *time.Time        `json:"archived_at"`
	EnvironmentKey string            `json:"environment_key,omitempty"`
}

// SessionResource is one resource of a session; memfs keeps memory_store
// resources. MountPath, Name and Description are output fields,
// snapshotted when the session is created.
type SessionResource struct {
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	MemoryStoreID string    `json:"memory_store_id"`
	Access        string    `json:"access"`
	Instructions  *string   `json:"instructions"`
	MountPath     string    `json:"mount_path"`
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Session is an agent session (wire type session). Fields memfs doesn't
// model are sent as their empty values so the SDK decodes them.
type Session struct {
	ID                 string            `json:"id"`
	Type               string            `json:"type"`
	EnvironmentID      string            `json:"environment_id"`
	Title              *string           `json:"title"`
	Metadata           map[string]string `json:"metadata"`
	Status             string            `json:"status"`
	Agent              json.RawMessage   `json:"agent"`
	Resources          []SessionResource `json:"resources"`
	VaultIDs           []string          `json:"vault_ids"`
	OutcomeEvaluations []any             `json:"outcome_evaluations"`
	Stats              map[string]any    `json:"stats"`
	Usage              map[string]any    `json:"usage"`
	Budget             json.RawMessage   `json:"budget"`
	DeploymentID       *string           `json:"deployment_id"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
	ArchivedAt         *time.Time        `json:"archived_at"`
}

// WorkData says what a work item is for.
type WorkData struct {
	Type string `json:"type"` // session or healthcheck
	ID   string `json:"id"`
}

// Work is a work item (wire type work). Secret is set only in the poll
// response.
type Work struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	Data              WorkData          `json:"data"`
	EnvironmentID     string            `json:"environment_id"`
	State             string            `json:"state"`
	Secret            *string           `json:"secret"`
	Metadata          map[string]string `json:"metadata"`
	CreatedAt         time.Time         `json:"created_at"`
	AcknowledgedAt    *time.Time        `json:"acknowledged_at"`
	StartedAt         *time.Time        `json:"started_at"`
	LatestHeartbeatAt *time.Time        `json:"latest_heartbeat_at"`
	StopRequestedAt   *time.Time        `json:"stop_requested_at"`
	StoppedAt         *time.Time        `json:"stopped_at"`
}

// Heartbeat is the answer to a heartbeat (wire type work_heartbeat).
type Heartbeat struct {
	Type          string `json:"type"`
	LastHeartbeat string `json:"last_heartbeat"`
	LeaseExtended bool   `json:"lease_extended"`
	State         string `json:"state"`
	TTLSeconds    int    `json:"ttl_seconds"`
}

// HeartbeatState is the current lease, carried by a 412 (the official
// shape: lease_updated_at is when the stored heartbeat was recorded, null
// with it).
type HeartbeatState struct {
	State          string     `json:"state"`
	LastHeartbeat  *string    `json:"last_heartbeat"`
	LeaseUpdatedAt *time.Time `json:"lease_updated_at"`
	LeaseExtended  bool       `json:"lease_extended"`
	TTLSeconds     int        `json:"ttl_seconds"`
}

// WorkQueueStats is wire type work_queue_stats.
type WorkQueueStats struct {
	Type           string     `json:"type"`
	Depth          int        `json:"depth"`
	Pending        int        `json:"pending"`
	OldestQueuedAt *time.Time `json:"oldest_queued_at"`
	WorkersPolling int        `json:"workers_polling"`
}

// CreateEnvironmentInput are the fields of a new environment.
type CreateEnvironmentInput struct {
	Name        string
	Description *string
	Metadata    map[string]string
	Config      json.RawMessage
	Scope       string
	// KeyHash is the hash of the environment key minted for it.
	KeyHash []byte
}

// CreateSessionInput is a validated session create. Resources carry
// MemoryStoreID, Access and Instructions; the backend fills in the rest.
type CreateSessionInput struct {
	EnvironmentID string
	Title         *string
	Metadata      map[string]string
	// Agent is the agent the session runs, snapshotted at its version
	// (the latest when Version is 0); nil is the default agent
	// (DefaultAgentID, made on first use).
	Agent     *AgentRef
	VaultIDs  []string
	Resources []SessionResource
	// MemoryRoot is the parent of the mount paths it derives.
	MemoryRoot string
}

// PollInput claims the next work item of an environment.
type PollInput struct {
	EnvironmentID string
	WorkerID      string
	ReclaimAfter  time.Duration
	// TokenHash is the hash of the session token minted for the item, if
	// one is claimed (the backend records it with the item).
	TokenHash []byte
}

// HeartbeatInput renews a lease.
type HeartbeatInput struct {
	Expected string
	TTL      time.Duration
}

// HeartbeatError is the ErrPreconditionFailed of a heartbeat whose
// expected_last_heartbeat doesn't match: it carries the current state.
type HeartbeatError struct {
	Expected string
	Current  HeartbeatState
}

func (e *HeartbeatError) Error() string {
	actual := "NULL"
	if e.Current.LastHeartbeat != nil {
		actual = *e.Current.LastHeartbeat
	}
	return "Heartbeat precondition failed: expected " + e.Expected + ", actual was " + actual
}

// Unwrap makes errors.Is(err, ErrHeartbeat) true.
func (e *HeartbeatError) Unwrap() error { return ErrHeartbeat }

// WorkBackend keeps environments, sessions and the work queue.
type WorkBackend interface {
	CreateEnvironment(ctx context.Context, in CreateEnvironmentInput) (*Environment, error)
	GetEnvironment(ctx context.Context, id string) (*Environment, error)
	ListEnvironments(ctx context.Context, limit int, page string, includeArchived bool) (Page[Environment], error)
	ArchiveEnvironment(ctx context.Context, id string) (*Environment, error)

	CreateSession(ctx context.Context, in CreateSessionInput) (*Session, error)
	GetSession(ctx context.Context, id string) (*Session, error)
	ListSessions(ctx context.Context, limit int, page string) (Page[Session], error)
	ArchiveSession(ctx context.Context, id string) (*Session, error)

	// EnqueueHealthcheck queues a healthcheck item (a memfs extension).
	EnqueueHealthcheck(ctx context.Context, envID string) (*Work, error)
	// Poll claims the next item offered to a worker: queued and not
	// claimed in the last ReclaimAfter, or whose lease lapsed. nil when
	// there is none.
	Poll(ctx context.Context, in PollInput) (*Work, error)
	Ack(ctx context.Context, envID, workID string) (*Work, error)
	Heartbeat(ctx context.Context, envID, workID string, in HeartbeatInput) (*Heartbeat, error)
	StopWork(ctx context.Context, envID, workID string, force bool) (*Work, error)
	GetWork(ctx context.Context, envID, workID string) (*Work, error)
	// FindWork reads an item by id alone (to scope a session token).
	FindWork(ctx context.Context, workID string) (*Work, error)
	UpdateWorkMetadata(ctx context.Context, envID, workID string, patch map[string]*string) (*Work, error)
	ListWork(ctx context.Context, envID string, limit int, page string) (Page[Work], error)
	WorkStats(ctx context.Context, envID string) (*WorkQueueStats, error)
	// SubscribeQueue returns a channel that receives a value when an item
	// may have become available in the environment's queue and this
	// waiter is the one to poll for it: an enqueue wakes one waiter per
	// process, not all of them. The release function must be called on
	// every exit path: it passes a wake the waiter did not receive on to
	// another waiter, so none is lost.
	SubscribeQueue(envID string) (<-chan struct{}, func())
}
