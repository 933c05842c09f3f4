package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/memfs/memfs/store"
)

// Environments, sessions and the work queue (docs/api.md, "Sessions,
// environments and the work queue"). Credentials: an
// admin key may do everything but poll and ack; an environment key works
// its own environment's queue and reads its sessions; a session token
// reads its session and heartbeats and stops its own work item.

type createEnvironmentBody struct {
	Name        *string           `json:"name"`
	Description *string           `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Config      json.RawMessage   `json:"config"`
	Scope       string            `json:"scope"`
}

func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	var body createEnvironmentBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Name == nil {
		return 0, nil, store.Errorf(store.ErrInvalid, "name is required")
	}
	if err := store.ValidateStoreName(*body.Name); err != nil {
		return 0, nil, err
	}
	if err := store.ValidateMetadata(body.Metadata); err != nil {
		return 0, nil, err
	}
	key := NewKey("sk-memfs-env-")
	env, err := s.b.CreateEnvironment(r.Context(), store.CreateEnvironmentInput{
		Name: *body.Name, Description: body.Description, Metadata: body.Metadata, Config: body.Config, Scope: body.Scope, KeyHash: HashKey(key)})
	if err != nil {
		return 0, nil, err
	}
	env.EnvironmentKey = key // returned once, here
	return http.StatusOK, env, nil
}

// envAccess allows an admin key or the environment's own key.
func envAccess(p *principal, envID string) error {
	if p.kind == store.KeyKindAdmin || (p.kind == store.KeyKindEnvironment && p.envID == envID) {
		return nil
	}
	return store.Errorf(store.ErrForbidden, "this credential may not use environment %s", envID)
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id := r.PathValue("env_id")
	if err := envAccess(p, id); err != nil {
		return 0, nil, err
	}
	env, err := s.b.GetEnvironment(r.Context(), id)
	return http.StatusOK, env, err
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	limit, page, all := q.limit(), q.str("page"), q.boolean("include_archived")
	if q.err != nil {
		return 0, nil, q.err
	}
	out, err := s.b.ListEnvironments(r.Context(), limit, page, all)
	return http.StatusOK, out, err
}

func (s *Server) archiveEnvironment(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	env, err := s.b.ArchiveEnvironment(r.Context(), r.PathValue("env_id"))
	return http.StatusOK, env, err
}

func (s *Server) enqueueHealthcheck(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	wk, err := s.b.EnqueueHealthcheck(r.Context(), r.PathValue("env_id"))
	return http.StatusOK, wk, err
}

type sessionResourceBody struct {
	Type          string  `json:"type"`
	MemoryStoreID string  `json:"memory_store_id"`
	Access        string  `json:"access"`
	Instructions  *string `json:"instructions"`
}

type createSessionBody struct {
	EnvironmentID *string               `json:"environment_id"`
	Title         *string               `json:"title"`
	Metadata      map[string]string     `json:"metadata"`
	Agent         json.RawMessage       `json:"agent"`
	VaultIDs      []string              `json:"vault_ids"`
	Resources     []sessionResourceBody `json:"resources"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	var body createSessionBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.EnvironmentID == nil || *body.EnvironmentID == "" {
		return 0, nil, store.Errorf(store.ErrInvalid, "environment_id is required")
	}
	if err := store.ValidateMetadata(body.Metadata); err != nil {
		return 0, nil, err
	}
	// The agent is resolved and snapshotted by the backend; without one
	// the session gets memfs serve's default agent (the hosted API
	// requires one; memfs's commands always send it).
	ref, given, err := store.ParseAgentRef(body.Agent)
	if err != nil {
		return 0, nil, err
	}
	in := store.CreateSessionInput{EnvironmentID: *body.EnvironmentID, Title: body.Title, Metadata: body.Metadata,
		VaultIDs: body.VaultIDs, MemoryRoot: s.opts.MemoryRoot}
	if given {
		in.Agent = &ref
	}
	for _, res := range body.Resources {
		// Other resource types (repositories, files) are not served by memfs.
		if res.Type == store.ResourceMemoryStore {
			in.Resources = append(in.Resources, store.SessionResource{MemoryStoreID: res.MemoryStoreID, Access: res.Access, Instructions: res.Instructions})
		}
	}
	if err := store.ValidateSessionResources(in.Resources); err != nil {
		return 0, nil, err
	}
	sess, err := s.b.CreateSession(r.Context(), in)
	return http.StatusOK, sess, err
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id := r.PathValue("session_id")
	if p.kind == store.KeyKindSession && p.sessionID != id {
		return 0, nil, store.Errorf(store.ErrNotFound, "session %s not found", id)
	}
	sess, err := s.b.GetSession(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	if p.kind == store.KeyKindEnvironment && sess.EnvironmentID != p.envID {
		return 0, nil, store.Errorf(store.ErrNotFound, "session %s not found", id)
	}
	return http.StatusOK, sess, nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	limit, page := q.limit(), q.str("page")
	if q.err != nil {
		return 0, nil, q.err
	}
	out, err := s.b.ListSessions(r.Context(), limit, page)
	return http.StatusOK, out, err
}

func (s *Server) archiveSession(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	sess, err := s.b.ArchiveSession(r.Context(), r.PathValue("session_id"))
	return http.StatusOK, sess, err
}

// requireEnvKey allows only the environment's own key (poll, ack).
func requireEnvKey(p *principal, envID string) error {
	if p.kind == store.KeyKindEnvironment && p.envID == envID {
		return nil
	}
	return store.Errorf(store.ErrForbidden, "polling and acknowledging work take the environment's key")
}

// workAccess allows an admin key, the environment's key or the item's own
// session token.
func workAccess(p *principal, envID, workID string) error {
	if p.kind == store.KeyKindAdmin || (p.kind == store.KeyKindEnvironment && p.envID == envID) {
		return nil
	}
	if p.kind == store.KeyKindSession && p.envID == envID && p.workID == workID {
		return nil
	}
	return store.Errorf(store.ErrForbidden, "this credential may not use work item %s", workID)
}

// secretJSON is what a work item's secret decodes to.
type secretJSON struct {
	SessionsToken string `json:"sessions_token"`
}

// pollWork claims an item, or blocks up to block_ms for one. It subscribes
// before each poll, so an enqueue committed during the poll still wakes
// it. An enqueue wakes one blocked poll per process, not every one
// (sqlstore's queuewake.go), so every exit path calls release: a wake
// this poll was handed but did not take (it claimed an item, or left at
// its deadline, at shutdown or with its request) goes to the next waiter.
func (s *Server) pollWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	envID := r.PathValue("env_id")
	if err := requireEnvKey(p, envID); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	block := time.Duration(q.intIn("block_ms", 0, 1, 999)) * time.Millisecond
	reclaim := time.Duration(q.intIn("reclaim_older_than_ms", store.DefaultReclaimAfter.Milliseconds(), 0, 1<<31)) * time.Millisecond
	if q.err != nil {
		return 0, nil, q.err
	}
	if _, err := s.b.GetEnvironment(r.Context(), envID); err != nil {
		return 0, nil, err
	}
	deadline := time.NewTimer(block)
	defer deadline.Stop()
	for {
		woken, release := s.b.SubscribeQueue(envID)
		token := NewKey("sk-memfs-session-")
		wk, err := s.b.Poll(r.Context(), store.PollInput{EnvironmentID: envID, WorkerID: r.Header.Get("Anthropic-Worker-ID"), ReclaimAfter: reclaim, TokenHash: HashKey(token)})
		if err != nil || wk != nil {
			release()
			if wk != nil {
				b, _ := json.Marshal(secretJSON{SessionsToken: token})
				secret := base64.RawURLEncoding.EncodeToString(b)
				wk.Secret = &secret
			}
			return http.StatusOK, wk, err
		}
		if block <= 0 {
			release()
			return http.StatusOK, nil, nil // JSON null: nothing to do
		}
		select {
		case <-woken:
			release()
		case <-deadline.C:
			release()
			return http.StatusOK, nil, nil
		case <-s.shutdown:
			release()
			return http.StatusOK, nil, nil
		case <-r.Context().Done():
			release()
			return 0, nil, r.Context().Err()
		}
	}
}

func (s *Server) ackWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	envID := r.PathValue("env_id")
	if err := requireEnvKey(p, envID); err != nil {
		return 0, nil, err
	}
	wk, err := s.b.Ack(r.Context(), envID, r.PathValue("work_id"))
	return http.StatusOK, wk, err
}

func (s *Server) heartbeatWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	envID, workID := r.PathValue("env_id"), r.PathValue("work_id")
	if err := workAccess(p, envID, workID); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	expected := q.str("expected_last_heartbeat")
	ttl := time.Duration(q.intIn("desired_ttl_seconds", 0, 1, 3600)) * time.Second
	if q.err != nil {
		return 0, nil, q.err
	}
	if expected == "" {
		return 0, nil, store.Errorf(store.ErrInvalid, "expected_last_heartbeat is required (NO_HEARTBEAT to take the lease)")
	}
	hb, err := s.b.Heartbeat(r.Context(), envID, workID, store.HeartbeatInput{Expected: expected, TTL: ttl})
	return http.StatusOK, hb, err
}

type stopBody struct {
	Force bool `json:"force"`
}

func (s *Server) stopWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	envID, workID := r.PathValue("env_id"), r.PathValue("work_id")
	if err := workAccess(p, envID, workID); err != nil {
		return 0, nil, err
	}
	var body stopBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	wk, err := s.b.StopWork(r.Context(), envID, workID, body.Force)
	return http.StatusOK, wk, err
}

func (s *Server) getWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	wk, err := s.b.GetWork(r.Context(), r.PathValue("env_id"), r.PathValue("work_id"))
	return http.StatusOK, wk, err
}

type updateWorkBody struct {
	Metadata map[string]*string `json:"metadata"`
}

func (s *Server) updateWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	var body updateWorkBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	wk, err := s.b.UpdateWorkMetadata(r.Context(), r.PathValue("env_id"), r.PathValue("work_id"), body.Metadata)
	return http.StatusOK, wk, err
}

func (s *Server) listWork(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	envID := r.PathValue("env_id")
	if err := envAccess(p, envID); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	limit, page := q.limit(), q.str("page")
	if q.err != nil {
		return 0, nil, q.err
	}
	out, err := s.b.ListWork(r.Context(), envID, limit, page)
	return http.StatusOK, out, err
}

func (s *Server) workStats(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	envID := r.PathValue("env_id")
	if err := envAccess(p, envID); err != nil {
		return 0, nil, err
	}
	st, err := s.b.WorkStats(r.Context(), envID)
	return http.StatusOK, st, err
}
