// Package server is the HTTP face of memfs serve: the Memory Stores API of
// docs/api.md over a store.Backend, wire-compatible with the Claude Managed
// Agents API so the official SDK works against it unchanged.
//
// Every response carries a request-id header; every error is the JSON
// envelope {"type":"error","error":{...},"request_id":...} built in one
// place (errors.go) from the store package's typed errors. 4xx answers that
// a retry can't fix carry x-should-retry: false; 503 carries retry-after.
//
// The protocol headers (protocol.go) are checked first, as the hosted
// API checks them: anthropic-version on every routed request and the
// route family's anthropic-beta, else 400 invalid_request_error naming
// the header.
//
// Authentication (auth.go) accepts an admin key as Authorization: Bearer
// or x-api-key, an environment key or a session token only as
// Authorization: Bearer (as the hosted API and the official worker do),
// and looks keys up by their SHA-256 hash; keys are random 256-bit values,
// so a plain hash is the right storage (no salt or slow hash is needed).
//
// Logging (accesslog.go, authstorm.go): one access line per request at
// info (method, route pattern, status, duration, bytes, actor kind and id,
// remote address, request id; never a credential, a header or a query
// string), idle long polls at debug; a warning when one address gets
// repeated 401s. Errors the client can't see the cause of (500, 503) are
// logged once in errors.go with the request id.
//
// Connections (conntable.go, conns.go): ConnGuard wraps the listener and
// keeps client connections within ConnLimits (derived from RLIMIT_NOFILE
// by DefaultConnLimits), so idle or slow clients can't take the
// descriptors of the database or of authenticated clients; connTable
// decides which connection gives way, ConnGuard closes it. The Server
// marks, through the request context (ConnContext), a connection busy
// while it serves a request (never closed for room) and authenticated
// once a request on it is. A request body is bounded in time by
// Options.BodyReadTimeout; nothing else of a request is, so long polls
// and event streams run their course.
//
// Lifecycle: New validates Options; Handler serves; BeginShutdown wakes
// every change-feed long poll and ends every session event stream, so
// that http.Server.Shutdown can finish in-flight requests promptly.
package server
