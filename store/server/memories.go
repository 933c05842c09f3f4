package server

import (
	"net/http"

	"github.com/memfs/memfs/store"
)

// storeAccess checks that p may use the memories of the request's store:
// an admin key may use every store; a session token only the stores
// attached to its session (another store is 404: its existence is not
// revealed), and writes only through a read_write attachment (403
// otherwise); an environment key never reads memory contents.
func (s *Server) storeAccess(r *http.Request, p *principal, write bool) (string, error) {
	id := r.PathValue("store_id")
	switch p.kind {
	case store.KeyKindAdmin:
		return id, nil
	case store.KeyKindSession:
		sess, err := s.b.GetSession(r.Context(), p.sessionID)
		if err != nil {
			return "", err
		}
		for _, res := range sess.Resources {
			if res.MemoryStoreID != id {
				continue
			}
			if write && res.Access == store.AccessReadOnly {
				return "", store.Errorf(store.ErrForbidden, "memory store %s is attached to this session read-only", id)
			}
			return id, nil
		}
		return "", store.Errorf(store.ErrNotFound, "memory store %s not found", id)
	}
	return "", store.Errorf(store.ErrForbidden, "this credential may not read or write memories")
}

// withView returns m with content dropped unless full.
func withView(m *store.Memory, full bool) *store.Memory {
	if m != nil && !full {
		m.Content = nil
	}
	return m
}

type createMemoryBody struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

func (s *Server) createMemory(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, true)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	full := q.view(store.ViewBasic)
	if q.err != nil {
		return 0, nil, q.err
	}
	var body createMemoryBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Path == nil {
		return 0, nil, store.Errorf(store.ErrInvalid, "path is required")
	}
	if body.Content == nil {
		return 0, nil, store.Errorf(store.ErrInvalid, "content is required (use \"\" for an empty memory)")
	}
	if err := store.ValidatePath(*body.Path); err != nil {
		return 0, nil, err
	}
	if err := store.ValidateContent(*body.Content); err != nil {
		return 0, nil, err
	}
	m, err := s.b.CreateMemory(r.Context(), storeID, store.CreateMemoryInput{Path: *body.Path, Content: *body.Content, Actor: p.actor()})
	return http.StatusOK, withView(m, full), err
}

func (s *Server) listMemories(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	opts := store.ListMemoriesOptions{
		PathPrefix: q.str("path_prefix"), Depth: int(q.intIn("depth", 0, 0, store.MaxPathSegments)),
		Page: q.str("page"), Full: q.view(store.ViewBasic),
	}
	// limit: 1-100; a full view clamps it to 20 rather than refusing.
	opts.Limit = q.limit()
	if q.err != nil {
		return 0, nil, q.err
	}
	if opts.PathPrefix != "" {
		if err := store.ValidatePathPrefix(opts.PathPrefix); err != nil {
			return 0, nil, err
		}
	}
	page, err := s.b.ListMemories(r.Context(), storeID, opts)
	return http.StatusOK, page, err
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	full := q.view(store.ViewFull)
	if q.err != nil {
		return 0, nil, q.err
	}
	m, err := s.b.GetMemory(r.Context(), storeID, r.PathValue("memory_id"))
	return http.StatusOK, withView(m, full), err
}

type preconditionBody struct {
	Type          string `json:"type"`
	ContentSHA256 string `json:"content_sha256"`
}

type updateMemoryBody struct {
	Content      *string           `json:"content"`
	Path         *string           `json:"path"`
	Precondition *preconditionBody `json:"precondition"`
}

func (s *Server) updateMemory(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, true)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	full := q.view(store.ViewBasic)
	if q.err != nil {
		return 0, nil, q.err
	}
	var body updateMemoryBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	in := store.UpdateMemoryInput{Content: body.Content, Path: body.Path, Actor: p.actor()}
	if body.Path != nil {
		if err := store.ValidatePath(*body.Path); err != nil {
			return 0, nil, err
		}
	}
	if body.Content != nil {
		if err := store.ValidateContent(*body.Content); err != nil {
			return 0, nil, err
		}
	}
	if pc := body.Precondition; pc != nil {
		if pc.Type != "content_sha256" {
			return 0, nil, store.Errorf(store.ErrInvalid, "precondition.type must be content_sha256, not %q", pc.Type)
		}
		if err := store.ValidateSHA256(pc.ContentSHA256); err != nil {
			return 0, nil, err
		}
		in.ExpectedSHA256 = &pc.ContentSHA256
	}
	m, err := s.b.UpdateMemory(r.Context(), storeID, r.PathValue("memory_id"), in)
	return http.StatusOK, withView(m, full), err
}

func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, true)
	if err != nil {
		return 0, nil, err
	}
	in := store.DeleteMemoryInput{Actor: p.actor()}
	if sha := r.URL.Query().Get("expected_content_sha256"); sha != "" {
		if err := store.ValidateSHA256(sha); err != nil {
			return 0, nil, err
		}
		in.ExpectedSHA256 = &sha
	}
	id := r.PathValue("memory_id")
	if err := s.b.DeleteMemory(r.Context(), storeID, id, in); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, store.DeletedObject{ID: id, Type: store.TypeMemoryDeleted}, nil
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	opts := store.ListVersionsOptions{
		MemoryID: q.str("memory_id"), Operation: q.enum("operation", store.OpCreated, store.OpModified, store.OpDeleted),
		SessionID: q.str("session_id"), APIKeyID: q.str("api_key_id"),
		CreatedGTE: q.time("created_at[gte]"), CreatedLTE: q.time("created_at[lte]"),
		Limit: q.limit(), Page: q.str("page"), Full: q.view(store.ViewBasic),
	}
	if q.err != nil {
		return 0, nil, q.err
	}
	// The SDK can filter by service_account_id; memfs has no service
	// accounts, so no version matches (ignoring the filter would list all).
	if q.str("service_account_id") != "" {
		if _, err := s.b.GetStore(r.Context(), storeID); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, store.Page[store.Version]{}, nil
	}
	page, err := s.b.ListVersions(r.Context(), storeID, opts)
	return http.StatusOK, page, err
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	storeID, err := s.storeAccess(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	full := q.view(store.ViewFull)
	if q.err != nil {
		return 0, nil, q.err
	}
	v, err := s.b.GetVersion(r.Context(), storeID, r.PathValue("version_id"))
	if v != nil && !full {
		v.Content = nil
	}
	return http.StatusOK, v, err
}

func (s *Server) redactVersion(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	// Redaction is an administrator's act: sessions never redact.
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	v, err := s.b.RedactVersion(r.Context(), r.PathValue("store_id"), r.PathValue("version_id"), p.actor())
	return http.StatusOK, v, err
}
