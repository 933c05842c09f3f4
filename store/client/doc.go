// Package client is the Go client of the Memory Stores API served by
// memfs serve (and by any server speaking the same protocol, see docs/api.md).
// The memfs worker, the sync engine and the admin commands use it.
//
// # The protocol
//
// Every request carries what the hosted API requires, as the official Go
// SDK (anthropic-sdk-go/v2 v2.15.0) sends it (protocol.go):
// anthropic-version (store.APIVersion), the route family's anthropic-beta
// (store.BetaFor), the credential as Authorization: Bearer whatever its
// kind, and memfs's own User-Agent. TestProtocolMatchesSDK sends each
// call through both clients and compares them.
//
// # Transport security
//
// Every request carries a key, so a BaseURL of plain http:// must name
// this host: "localhost", 127.0.0.0/8 or ::1, as written (names are not
// looked up). Any other is refused by Options.Validate with an
// *InsecureHTTPError, before a connection is made, unless
// Options.AllowInsecureHTTP. For https://, the client trusts the system's
// roots plus Options.CAFile's certificates (NewTransport, which other
// HTTP clients of memfs serve use too); a certificate that fails
// verification is a *CertificateError, not retried.
//
// # Errors
//
// Every error the server answers comes back as a *store.Error whose Kind is
// one of the store sentinels, so callers test it with errors.Is
// (store.ErrNotFound, store.ErrPreconditionFailed, store.ErrPathConflict,
// ...) and read the details (Message, Code, RequestID, Status,
// ConflictingMemoryID, ConflictingPath) with errors.As. A server that
// cannot be reached, or whose responses keep getting lost, is
// store.ErrUnavailable, with the network error wrapped as well. A cancelled
// or expired context is returned as the context's error, never retried.
//
// # Retries
//
// Network errors, truncated responses, attempts that time out (Options.Timeout),
// 429 and 5xx (but 501) are retried up to Options.RetryMax times, waiting a
// random time between Options.RetryWaitMin and an exponentially growing
// ceiling capped at Options.RetryWaitMax (full jitter), or what the server
// asks with retry-after-ms or retry-after (also capped at RetryWaitMax).
// Other 4xx answers, and any answer carrying x-should-retry: false, are
// final. Request bodies are held in memory, so every attempt sends the same
// bytes.
//
// # Lost responses
//
// A retried write may have been applied by an attempt whose response never
// arrived. Deletes and updates without a content precondition are
// idempotent. Creates and conditional updates are not, so the client
// recognises its own earlier write (docs/sync.md, R22):
//
//   - CreateMemory answered 409 memory_path_conflict_error for exactly the
//     requested path, where the memory found there holds exactly the bytes
//     sent (same content_sha256), returns that memory as a success;
//   - UpdateMemory with a precondition and new content answered 409
//     memory_precondition_failed_error, where the memory now holds exactly
//     the bytes sent (and sits at the requested path, if one was given),
//     returns that memory as a success.
//
// DeleteMemory answered 404 is returned as store.ErrNotFound, even when an
// earlier attempt may have done the deleting: callers decide.
//
// # The change feed
//
// Changes reads the memfs change-feed extension. A server without it (any
// refusal of the route: 400, 403, 404, 405, 501) is reported as
// ErrFeedUnsupported (test with errors.Is); callers then fall back to
// listing the store.
package client
