package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/memfs/memfs/store"
)

// principal is the authenticated caller of a request: an admin key, an
// environment key (scoped to its environment's work queue and sessions) or
// a session token (scoped to its work item, its session and the memory
// stores attached to that session).
type principal struct {
	kind      string // store.KeyKindAdmin, KeyKindEnvironment or KeyKindSession
	keyID     string
	envID     string // environment keys and session tokens
	workID    string // session tokens
	sessionID string // session tokens
}

// actor is who a write by p is attributed to.
func (p *principal) actor() store.Actor {
	if p.kind == store.KeyKindSession {
		return store.SessionActor(p.sessionID)
	}
	return store.APIActor(p.keyID)
}

// requireAdmin refuses any principal but an admin key.
func (p *principal) requireAdmin() error {
	if p.kind != store.KeyKindAdmin {
		return store.Errorf(store.ErrForbidden, "this credential may not use this endpoint")
	}
	return nil
}

// HashKey is how keys are stored: SHA-256 of the key's bytes.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// NewKey returns a fresh random key (256 bits) with a readable prefix.
func NewKey(prefix string) string {
	var b [32]byte
	rand.Read(b[:]) //nolint:errcheck
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// credential extracts the key from x-api-key or Authorization: Bearer.
func credential(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// authenticate finds the request's principal; a success also marks its
// connection authenticated (conns.go), which keeps it out of the limits
// on unauthenticated connections.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	p, err := s.principalOf(r)
	if err == nil {
		connOf(r.Context()).update((*connTable).authenticate)
	}
	return p, err
}

func (s *Server) principalOf(r *http.Request) (*principal, error) {
	key := credential(r)
	if key == "" {
		return nil, store.Errorf(store.ErrUnauthorized, "missing credential: send x-api-key or Authorization: Bearer")
	}
	hash := HashKey(key)
	if p := s.keys.get(hash); p != nil {
		return p, nil
	}
	k, err := s.b.LookupAPIKey(r.Context(), hash)
	if err != nil {
		return nil, err
	}
	p := &principal{kind: k.Kind, keyID: k.ID}
	switch k.Kind {
	case store.KeyKindEnvironment:
		p.envID = k.ScopeID
	case store.KeyKindSession:
		// A session token works until its work item is stopped, so it is
		// checked on every request, never cached. Only a work item that is
		// stopped or gone makes the token invalid: a failed look-up (the
		// database away) is answered as itself, a 503 the worker retries,
		// not a 401 that would make it tear the session down.
		w, err := s.b.FindWork(r.Context(), k.ScopeID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, store.Errorf(store.ErrUnauthorized, "this session token is no longer valid: its work item is gone")
		case err != nil:
			return nil, err
		case w.State == store.WorkStopped:
			return nil, store.Errorf(store.ErrUnauthorized, "this session token is no longer valid: its work item is stopped")
		}
		p.envID, p.workID, p.sessionID = w.EnvironmentID, w.ID, w.Data.ID
		return p, nil
	}
	s.keys.put(hash, p)
	return p, nil
}

// keyCache remembers verified keys for a short while, so a request costs
// no database look-up for its credential. Only successes are cached.
type keyCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]keyCacheEntry // GUARDED_BY(mu)
}

type keyCacheEntry struct {
	p       *principal
	expires time.Time
}

func (c *keyCache) get(hash []byte) *principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[string(hash)]
	if !ok || time.Now().After(e.expires) {
		return nil
	}
	return e.p
}

func (c *keyCache) put(hash []byte, p *principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > 10000 {
		c.m = map[string]keyCacheEntry{}
	}
	c.m[string(hash)] = keyCacheEntry{p: p, expires: time.Now().Add(c.ttl)}
}
