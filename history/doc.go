// Package history reads a memory store's past from its memory versions:
// the store as it was at a time (Snapshot, and AsOf: a read-only Store
// over it that a mount serves), the version of one memory at a time
// (VersionAt), and what undoing a session's changes, or every change
// since a time, takes (PlanRevert, then Apply).
//
// Everything here is built from the versions listing alone
// (GET /v1/memory_stores/{id}/memory_versions and .../{version_id}), so
// it works against the hosted API with an API key as well as against
// memfs serve. The decisions are pure functions of the versions listed
// (SnapshotOf, planRevert); the calls to the store are apart from them.
package history
