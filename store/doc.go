// Package store is the memory-store domain of memfs: stores, memories,
// versions, actors and the change feed; environments, sessions, the work
// queue and each session's event log (events.go); the validation rules
// every write enforces; the typed errors callers test with errors.Is; and
// the Backend interface that the SQLite and PostgreSQL implementations
// satisfy.
//
// The types here double as the wire format of the Memory Stores API
// (their JSON tags are the field names of the official SDK), so the server,
// the client and the backends share one definition of each object.
//
// Validation lives in this package and runs before a backend is called:
// a backend may assume its arguments are valid and concentrates on
// transactions. The rules are those of docs/api.md, "Rules every write
// enforces".
//
// Errors: every failure a caller may act on is one of the sentinel errors
// below (ErrNotFound, ErrPreconditionFailed, ErrPathConflict, ...), usually
// wrapped in an *Error that adds a message and machine-readable details.
// Test with errors.Is; read details with errors.As.
package store
