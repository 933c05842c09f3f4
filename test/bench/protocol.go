package main

import (
	"net/http"

	"github.com/memfs/memfs/store"
)

// setProtocol sets the headers memfs serve requires of a request to path
// made with key, as the official SDK (and store/client) send them:
// anthropic-version, the route family's anthropic-beta and the key as
// Authorization: Bearer.
func setProtocol(h http.Header, path, key string) {
	h.Set("anthropic-version", store.APIVersion)
	if beta := store.BetaFor(path); beta != "" {
		h.Set("anthropic-beta", beta)
	}
	h.Set("authorization", "Bearer "+key)
}
