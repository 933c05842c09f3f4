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
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// credential extracts the key from Authorization: Bearer or x-api-key,
// and says which header carried it. Two different keys are refused: which
// one the caller meant is a guess.
func credential(r *http.Request) (key string, apiKeyHeader bool, err error) {
	var bearer string
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		bearer = strings.TrimSpace(a[7:])
	}
	xkey := r.Header.Get("x-api-key")
	switch {
	case bearer != "" && xkey != "" && bearer != xkey:
		return "", false, store.Errorf(store.ErrUnauthorized, "two different credentials: send one, as Authorization: Bearer (or an admin key as x-api-key)")
	case bearer != "":
		return bearer, false, nil
	case xkey != "":
		return xkey, true, nil
	}
	return "", false, store.Errorf(store.ErrUnauthorized, "missing credential: send Authorization: Bearer KEY (an admin key may also come as x-api-key)")
}

// bearerOnly refuses an environment key or a session token that came as
// x-api-key: the hosted API takes only API keys there, and the official
// worker sends both as Authorization: Bearer.
func bearerOnly(kind string, apiKeyHeader bool) error {
	if !apiKeyHeader || kind == store.KeyKindAdmin {
		return nil
	}
	what := "an environment key"
	if kind == store.KeyKindSession {
		what = "a session token"
	}
	return store.Errorf(store.ErrUnauthorized, "%s is sent as Authorization: Bearer, not as x-api-key", what)
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
	key, apiKeyHeader, err := credential(r)
	if err != nil {
		return nil, err
	}
	hash := HashKey(key)
	if p := s.keys.get(hash); p != nil {
		if err := bearerOnly(p.kind, apiKeyHeader); err != nil {
			return nil, err
		}
		return p, nil
	}
	k, err := s.b.LookupAPIKey(r.Context(), hash)
	if err != nil {
		return nil, err
	}
	if err := bearerOnly(k.Kind, apiKeyHeader); err != nil {
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
