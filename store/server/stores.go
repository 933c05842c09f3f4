package server

import (
	"net/http"

	"github.com/memfs/memfs/store"
)

type createStoreBody struct {
	Name        *string           `json:"name"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
}

func (s *Server) createStore(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	var body createStoreBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Name == nil {
		return 0, nil, store.Errorf(store.ErrInvalid, "name is required")
	}
	for _, err := range []error{store.ValidateStoreName(*body.Name), store.ValidateDescription(body.Description), store.ValidateMetadata(body.Metadata)} {
		if err != nil {
			return 0, nil, err
		}
	}
	st, err := s.b.CreateStore(r.Context(), store.CreateStoreInput{Name: *body.Name, Description: body.Description, Metadata: body.Metadata})
	return http.StatusOK, st, err
}

func (s *Server) listStores(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	opts := store.ListStoresOptions{
		Limit: q.limit(), Page: q.str("page"), IncludeArchived: q.boolean("include_archived"),
		CreatedGTE: q.time("created_at[gte]"), CreatedLTE: q.time("created_at[lte]"),
	}
	if q.err != nil {
		return 0, nil, q.err
	}
	page, err := s.b.ListStores(r.Context(), opts)
	return http.StatusOK, page, err
}

// getStore answers an admin key, or a session token for a store attached
// to its session (the worker reads the store it mounts).
func (s *Server) getStore(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := s.storeAccess(r, p, false)
	if err != nil {
		return 0, nil, err
	}
	st, err := s.b.GetStore(r.Context(), id)
	return http.StatusOK, st, err
}

type updateStoreBody struct {
	Name        *string            `json:"name"`
	Description *string            `json:"description"`
	Metadata    map[string]*string `json:"metadata"`
}

func (s *Server) updateStore(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	var body updateStoreBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Name != nil {
		if err := store.ValidateStoreName(*body.Name); err != nil {
			return 0, nil, err
		}
	}
	if body.Description != nil {
		if err := store.ValidateDescription(*body.Description); err != nil {
			return 0, nil, err
		}
	}
	// Check the patch's own keys and values; the merged map is checked
	// (pair count) by the backend.
	patch := map[string]string{}
	for k, v := range body.Metadata {
		if v != nil {
			patch[k] = *v
		} else {
			patch[k] = ""
		}
	}
	if len(patch) <= store.MaxMetadataPairs {
		if err := store.ValidateMetadata(patch); err != nil {
			return 0, nil, err
		}
	}
	st, err := s.b.UpdateStore(r.Context(), r.PathValue("store_id"), store.UpdateStoreInput{Name: body.Name, Description: body.Description, Metadata: body.Metadata})
	return http.StatusOK, st, err
}

func (s *Server) archiveStore(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	st, err := s.b.ArchiveStore(r.Context(), r.PathValue("store_id"))
	return http.StatusOK, st, err
}

func (s *Server) deleteStore(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	if err := p.requireAdmin(); err != nil {
		return 0, nil, err
	}
	id := r.PathValue("store_id")
	if err := s.b.DeleteStore(r.Context(), id); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, store.DeletedObject{ID: id, Type: store.TypeMemoryStoreDeleted}, nil
}
