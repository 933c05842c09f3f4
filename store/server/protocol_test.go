package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// TestProtocolRefused: memfs serve refuses what the hosted API refuses
// (docs/api.md, "Headers, as the hosted API wants them" and
// "Authentication"): a request without anthropic-version, or a beta
// route without its beta value, is a 400 invalid_request_error naming
// the header, in the error envelope, and changes nothing; an environment
// key or a session token is a bearer credential (x-api-key is for API
// keys); the memory routes refuse the environment key.
func TestProtocolRefused(t *testing.T) {
	s, _ := startWorkServer(t, sqltest.SQLite(t))
	storeID := s.createStore(t, "proto")
	env, envKey := s.newEnv(t, "proto")
	sess := s.newSession(t, env.ID, memoryStore(storeID, ""))
	work, token := s.claim(t, env.ID, envKey)
	before := s.state(t, storeID)

	noVersion := http.Header{"X-Api-Key": {testKey}, "Anthropic-Version": nil}
	noBeta := http.Header{"X-Api-Key": {testKey}, "Anthropic-Beta": nil}
	memoryBeta := http.Header{"Authorization": {"Bearer " + envKey}, "Anthropic-Beta": {store.BetaMemoryStores}}
	for _, c := range []struct {
		what, method, path string
		hdr                http.Header
		want               []string // in the message
	}{
		{"no anthropic-version", "GET", "/v1/memory_stores", noVersion, []string{"anthropic-version", store.APIVersion}},
		{"no anthropic-version", "POST", "/v1/memory_stores/" + storeID + "/memories", noVersion, []string{"anthropic-version"}},
		{"no anthropic-version", "GET", "/v1/sessions/" + sess.ID, noVersion, []string{"anthropic-version"}},
		{"no anthropic-version", "GET", "/v1/environments/" + env.ID + "/work/poll",
			http.Header{"Authorization": {"Bearer " + envKey}, "Anthropic-Version": nil}, []string{"anthropic-version"}},
		{"no anthropic-beta", "POST", "/v1/memory_stores/" + storeID + "/memories", noBeta, []string{"anthropic-beta", store.BetaMemoryStores}},
		{"no anthropic-beta", "GET", "/v1/memory_stores/" + storeID + "/changes", noBeta, []string{"anthropic-beta", store.BetaMemoryStores}},
		{"no anthropic-beta", "GET", "/v1/sessions/" + sess.ID + "/events", noBeta, []string{"anthropic-beta", store.BetaManagedAgents}},
		{"no anthropic-beta", "POST", "/v1/environments", noBeta, []string{"anthropic-beta", store.BetaManagedAgents}},
		{"the memory beta on a work route", "GET", "/v1/environments/" + env.ID + "/work/poll", memoryBeta,
			[]string{"anthropic-beta", store.BetaManagedAgents}},
		{"another beta only", "POST", "/v1/memory_stores/" + storeID + "/memories",
			http.Header{"X-Api-Key": {testKey}, "Anthropic-Beta": {"files-api-2025-04-14"}}, []string{"anthropic-beta", store.BetaMemoryStores}},
	} {
		r := s.requestWith(t, c.method, c.path, map[string]any{"name": "x", "path": "/x", "content": "x"}, c.hdr)
		e := wantError(t, c.what+": "+c.method+" "+c.path, r, http.StatusBadRequest, "invalid_request_error")
		for _, w := range c.want {
			if !strings.Contains(e.Error.Message, w) {
				t.Errorf("%s: %s %s: message %q does not name %q", c.what, c.method, c.path, e.Error.Message, w)
			}
		}
	}

	// The event stream, read only as far as its status: a stream that
	// opened would never end.
	for what, hdr := range map[string]http.Header{"no anthropic-version": noVersion, "no anthropic-beta": noBeta} {
		req, err := http.NewRequest("GET", s.URL+"/v1/sessions/"+sess.ID+"/events/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		setProtocol(req)
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("content-type") != "application/json" {
			t.Errorf("%s: the event stream answered %d %q, want a 400 error", what, resp.StatusCode, resp.Header.Get("content-type"))
		}
	}

	// Credentials in the wrong header, or on a route that refuses them.
	for _, c := range []struct {
		what, method, path string
		hdr                http.Header
		status             int
		typ                string
		want               string
	}{
		{"the environment key as x-api-key", "GET", "/v1/environments/" + env.ID + "/work/poll",
			http.Header{"X-Api-Key": {envKey}}, 401, "authentication_error", "Authorization: Bearer"},
		{"a session token as x-api-key", "GET", "/v1/sessions/" + sess.ID,
			http.Header{"X-Api-Key": {token}}, 401, "authentication_error", "Authorization: Bearer"},
		{"a session token as x-api-key", "GET", "/v1/memory_stores/" + storeID + "/memories",
			http.Header{"X-Api-Key": {token}}, 401, "authentication_error", "Authorization: Bearer"},
		{"two different keys", "GET", "/v1/memory_stores",
			http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer " + token}}, 401, "authentication_error", "two different credentials"},
		{"the environment key on a memory route", "GET", "/v1/memory_stores/" + storeID + "/memories",
			bearer(envKey), 403, "permission_error", "may not read or write memories"},
		{"the environment key on a memory write", "POST", "/v1/memory_stores/" + storeID + "/memories",
			bearer(envKey), 403, "permission_error", "may not read or write memories"},
	} {
		r := s.requestWith(t, c.method, c.path, map[string]any{"path": "/y", "content": "y"}, c.hdr)
		e := wantError(t, c.what+": "+c.method+" "+c.path, r, c.status, c.typ)
		if !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %s %s: message %q does not say %q", c.what, c.method, c.path, e.Error.Message, c.want)
		}
	}
	s.unchanged(t, "refused requests", storeID, before)

	// Accepted where the hosted API accepts them: an admin key as either
	// header, the session token as a bearer on its session and stores,
	// the memory routes under either beta, betas comma-joined.
	for _, c := range []struct {
		what, method, path string
		hdr                http.Header
	}{
		{"an admin key as x-api-key", "GET", "/v1/memory_stores", http.Header{"X-Api-Key": {testKey}}},
		{"an admin key as a bearer", "GET", "/v1/memory_stores", bearer(testKey)},
		{"the same key in both headers", "GET", "/v1/memory_stores", http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer " + testKey}}},
		{"the managed-agents beta on a memory route", "GET", "/v1/memory_stores/" + storeID + "/memories",
			http.Header{"X-Api-Key": {testKey}, "Anthropic-Beta": {store.BetaManagedAgents}}},
		{"betas comma-joined", "GET", "/v1/sessions/" + sess.ID,
			http.Header{"X-Api-Key": {testKey}, "Anthropic-Beta": {"files-api-2025-04-14, " + store.BetaManagedAgents}}},
		{"the session token on its session", "GET", "/v1/sessions/" + sess.ID, bearer(token)},
		{"the session token on its store", "GET", "/v1/memory_stores/" + storeID + "/memories", bearer(token)},
		{"the environment key on its session", "GET", "/v1/sessions/" + sess.ID, bearer(envKey)},
		{"the session token on its heartbeat", "POST", heartbeatPath(env.ID, work.ID, "NO_HEARTBEAT"), bearer(token)},
	} {
		if r := s.requestWith(t, c.method, c.path, nil, c.hdr); r.Status != http.StatusOK {
			t.Errorf("%s: %s %s = %s, want 200", c.what, c.method, c.path, r)
		}
	}
}

// TestProtocolStrictOnBothBackends: the header rules are the server's,
// whatever the backend (PostgreSQL never skipped under CI=true).
func TestProtocolStrictOnBothBackends(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		r := s.requestWith(t, "GET", "/v1/memory_stores", nil, http.Header{"X-Api-Key": {testKey}, "Anthropic-Version": nil})
		wantError(t, "no anthropic-version", r, http.StatusBadRequest, "invalid_request_error")
		if r := s.request(t, "GET", "/v1/memory_stores", nil); r.Status != http.StatusOK {
			t.Errorf("with the headers: %s", r)
		}
	})
}
