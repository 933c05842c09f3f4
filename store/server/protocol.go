package server

import (
	"net/http"

	"github.com/memfs/memfs/store"
)

// The protocol headers, refused as the hosted API refuses them, so that a
// client that works against memfs serve works against the hosted API
// (docs/api.md, "Headers, as the hosted API wants them"): every routed request
// needs anthropic-version, and a route of a beta family needs its
// anthropic-beta value. The answer is a 400 invalid_request_error that
// names the header, in the usual error envelope.

// checkProtocol refuses r when it lacks a protocol header its route needs.
func checkProtocol(r *http.Request) error {
	if r.Header.Get("anthropic-version") == "" {
		return store.Errorf(store.ErrInvalid, "anthropic-version: header is required (send anthropic-version: %s)", store.APIVersion)
	}
	want := acceptedBetas(r.URL.Path)
	if len(want) == 0 {
		return nil
	}
	got := r.Header.Values("anthropic-beta")
	for _, b := range want {
		if store.HasBeta(got, b) {
			return nil
		}
	}
	return store.Errorf(store.ErrInvalid, "anthropic-beta: %s %s requires the beta %s (send anthropic-beta: %s)",
		r.Method, r.URL.Path, want[0], want[0])
}

// acceptedBetas are the anthropic-beta values that admit a request to
// path: the route family's own first (store.BetaFor); the memory routes
// take the managed-agents beta too, as the hosted API does.
func acceptedBetas(path string) []string {
	switch b := store.BetaFor(path); b {
	case "":
		return nil
	case store.BetaMemoryStores:
		return []string{b, store.BetaManagedAgents}
	default:
		return []string{b}
	}
}
