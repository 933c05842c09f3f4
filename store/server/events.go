package server

import (
	"encoding/json"
	"net/http"

	"github.com/memfs/memfs/store"
)

// Session events (store/events.go): a session's log, listed, appended to
// and streamed (events_stream.go) as the SDK's BetaSessionEventService
// expects. Credentials: the admin key reads every log and posts any event
// (it stands in for the agent loop); a session's own token reads its log
// and posts only user.tool_result and user.custom_tool_result, what its
// tool runner sends. Another session's token gets a 404, as for the
// session itself; an environment key gets a 403.

// eventsAccess allows the admin key and the session's own token.
func eventsAccess(p *principal, sessionID string) error {
	switch {
	case p.kind == store.KeyKindAdmin:
		return nil
	case p.kind == store.KeyKindSession && p.sessionID == sessionID:
		return nil
	case p.kind == store.KeyKindSession:
		return store.Errorf(store.ErrNotFound, "session %s not found", sessionID)
	}
	return store.Errorf(store.ErrForbidden, "a session's events take the admin key or the session's own token, not an environment key")
}

// listEvents serves GET /v1/sessions/{id}/events: limit (1-1000, default
// 100), order (asc, the default, or desc), page (an opaque next_page),
// types[] (repeatable; types works too) and created_at[gt|gte|lt|lte]
// (RFC 3339, compared with processed_at), as the SDK sends them.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id := r.PathValue("session_id")
	if err := eventsAccess(p, id); err != nil {
		return 0, nil, err
	}
	q := query{r: r}
	opts := store.ListEventsOptions{
		Limit:      int(q.intIn("limit", store.DefaultEventListLimit, 1, store.MaxEventListLimit)),
		Page:       q.str("page"),
		Desc:       q.enum("order", "asc", "desc") == "desc",
		CreatedGT:  q.time("created_at[gt]"),
		CreatedGTE: q.time("created_at[gte]"),
		CreatedLT:  q.time("created_at[lt]"),
		CreatedLTE: q.time("created_at[lte]"),
	}
	values := r.URL.Query()
	for _, t := range append(values["types[]"], values["types"]...) {
		if !store.KnownEventType(t) {
			q.fail("types: unknown event type %q", t)
		}
		opts.Types = append(opts.Types, t)
	}
	if q.err != nil {
		return 0, nil, q.err
	}
	page, err := s.b.ListEvents(r.Context(), id, opts)
	return http.StatusOK, page, err
}

type sendEventsBody struct {
	Events *[]json.RawMessage `json:"events"`
}

// sentEvents is the answer to a POST: the events as stored.
type sentEvents struct {
	Data []store.Event `json:"data"`
}

// sendEvents serves POST /v1/sessions/{id}/events {"events":[…]}: every
// event is checked (store.ParseEvent) and the credential's right to post
// its type, then all are appended in order in one transaction, or none.
func (s *Server) sendEvents(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id := r.PathValue("session_id")
	if err := eventsAccess(p, id); err != nil {
		return 0, nil, err
	}
	var body sendEventsBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	switch {
	case body.Events == nil:
		return 0, nil, store.Errorf(store.ErrInvalid, "events is required: {\"events\":[{\"type\":…},…]}")
	case len(*body.Events) == 0:
		return 0, nil, store.Errorf(store.ErrInvalid, "events is empty; send at least one event")
	case len(*body.Events) > store.MaxEventsPerRequest:
		return 0, nil, store.Errorf(store.ErrInvalid, "events holds %d events; the limit is %d per request", len(*body.Events), store.MaxEventsPerRequest)
	}
	events := make([]store.NewEvent, len(*body.Events))
	for i, raw := range *body.Events {
		ev, err := store.ParseEvent(i, raw)
		if err != nil {
			return 0, nil, err
		}
		if p.kind == store.KeyKindSession && !store.SessionTokenMayPost(ev.Type) {
			return 0, nil, store.Errorf(store.ErrForbidden, "events[%d]: a session token may post only user.tool_result and user.custom_tool_result events, not %s (the agent's events take the admin key)", i, ev.Type)
		}
		events[i] = ev
	}
	out, err := s.b.AppendEvents(r.Context(), id, events)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, sentEvents{Data: out}, nil
}
