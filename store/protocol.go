package store

import (
	"net/http"
	"strings"
)

// The protocol headers of the hosted API, as the official Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2 v2.15.0) sends them. The
// client (store/client) sends them on every request and the server
// (store/server) refuses a request without them, as the hosted API does;
// store/client's TestProtocolMatchesSDK compares what the two clients
// send, route by route.
const (
	// APIVersion is the anthropic-version header on every request:
	// taken from anthropic-sdk-go/v2 v2.15.0,
	// internal/requestconfig/requestconfig.go (NewRequestConfig sets
	// anthropic-version: 2026-10-21 on every request it builds).
	APIVersion = "2026-10-21"

	// BetaMemoryStores is the anthropic-beta value of the memory routes
	// (/v1/memory_stores/...): what the SDK's BetaMemoryStoreService,
	// BetaMemoryStoreMemoryService and BetaMemoryStoreMemoryVersionService
	// send.
	BetaMemoryStores = "agent-memory-2026-07-22"

	// BetaManagedAgents is the anthropic-beta value of the managed-agents
	// routes (/v1/environments/..., including the work queue, /v1/sessions/...,
	// including events, and /v1/agents/...): what the SDK's
	// BetaEnvironmentService, BetaEnvironmentWorkService, BetaSessionService,
	// BetaSessionEventService and BetaAgentService send, and
	// lib/environments.ManagedAgentsBeta.
	BetaManagedAgents = "managed-agents-2026-04-01"
)

// SetProtocol sets on h the headers a request to path (/v1/...) carries:
// anthropic-version, the route family's anthropic-beta (BetaFor) and, when
// key is not "", the key as Authorization: Bearer, whatever its kind, as
// the SDK sends every credential. store/client sends them so; so does
// every raw caller of memfs serve in the tests and benchmarks.
func SetProtocol(h http.Header, path, key string) {
	h.Set("anthropic-version", APIVersion)
	if beta := BetaFor(path); beta != "" {
		h.Set("anthropic-beta", beta)
	}
	if key != "" {
		h.Set("authorization", "Bearer "+key)
	}
}

// BetaFor is the anthropic-beta value the route at path (/v1/...) takes,
// by route family; "" for a path outside every family.
func BetaFor(path string) string {
	for _, f := range betaFamilies {
		if path == f.prefix || strings.HasPrefix(path, f.prefix+"/") {
			return f.beta
		}
	}
	return ""
}

var betaFamilies = []struct{ prefix, beta string }{
	{"/v1/memory_stores", BetaMemoryStores},
	{"/v1/environments", BetaManagedAgents},
	{"/v1/sessions", BetaManagedAgents},
	{"/v1/agents", BetaManagedAgents},
}

// HasBeta reports whether the anthropic-beta header values (each a
// comma-separated list, as the SDK joins them) include beta.
func HasBeta(values []string, beta string) bool {
	for _, v := range values {
		for _, b := range strings.Split(v, ",") {
			if strings.TrimSpace(b) == beta {
				return true
			}
		}
	}
	return false
}
