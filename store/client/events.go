package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/memfs/memfs/store"
)

// Session events (store/events.go): a session's log, read with the admin
// key or the session's token, appended to with the admin key (any event)
// or the token (tool results only).

// ListEventsOptions page and filter ListEvents.
type ListEventsOptions struct {
	Limit int // 1-1000; 0 = the server's default (100)
	Page  string
	Desc  bool
	Types []string
}

// ListEvents reads one page of a session's events.
func (c *Client) ListEvents(ctx context.Context, sessionID string, opts ListEventsOptions) (store.Page[store.Event], error) {
	q := url.Values{}
	setInt(q, "limit", opts.Limit)
	setStr(q, "page", opts.Page)
	if opts.Desc {
		q.Set("order", "desc")
	}
	for _, t := range opts.Types {
		q.Add("types[]", t)
	}
	var p store.Page[store.Event]
	err := c.do(ctx, request{method: http.MethodGet, path: eventsPath(sessionID), query: q}, &p)
	return p, err
}

// AllEvents reads a session's whole log, oldest first.
func (c *Client) AllEvents(ctx context.Context, sessionID string) ([]store.Event, error) {
	var all []store.Event
	opts := ListEventsOptions{Limit: store.MaxEventListLimit}
	for {
		p, err := c.ListEvents(ctx, sessionID, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Data...)
		if p.NextPage == "" {
			return all, nil
		}
		opts.Page = p.NextPage
	}
}

// SendEvents appends events (JSON objects) to a session's log and returns
// them as stored. It makes one attempt: an append is not idempotent, and
// a retry after a lost answer would log the events twice (an agent's tool
// use run twice).
func (c *Client) SendEvents(ctx context.Context, sessionID string, events []json.RawMessage) ([]store.Event, error) {
	var out struct {
		Data []store.Event `json:"data"`
	}
	err := c.do(store.WithCallerRetries(ctx), request{method: http.MethodPost, path: eventsPath(sessionID),
		body: map[string]any{"events": events}}, &out)
	return out.Data, err
}

func eventsPath(sessionID string) string {
	return "/v1/sessions/" + url.PathEscape(sessionID) + "/events"
}

// EventStream is an open session event stream (StreamEvents).
type EventStream struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	sc     *bufio.Scanner
	ev     store.Event
	err    error
}

// StreamEvents opens a session's event stream: the events appended from
// now on. The server ends it after session.status_terminated; Next then
// returns false with Err nil. Connecting is bounded by the client's
// Timeout; the stream itself is not. Close it when done.
func (c *Client) StreamEvents(ctx context.Context, sessionID string) (*EventStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	path := eventsPath(sessionID) + "/stream"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	c.setProtocol(req.Header, path)
	req.Header.Set("accept", "text/event-stream")
	// The server answers with its headers at once; one that doesn't
	// within the timeout is as good as gone.
	late := time.AfterFunc(c.timeout, cancel)
	resp, err := c.streams.Do(req)
	timedOut := !late.Stop()
	if err != nil {
		cancel()
		if timedOut {
			err = fmt.Errorf("%w (%s)", errAttemptTimeout, c.timeout)
		} else if ctx.Err() != nil {
			return nil, fmt.Errorf("GET %s: %w", path, ctx.Err())
		}
		return nil, noAnswer(c.base, "GET "+path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		defer cancel()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, decodeError(resp, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20) // an event is at most a 1 MiB request's worth of JSON
	return &EventStream{body: resp.Body, cancel: cancel, sc: sc}, nil
}

// Next reads the next event, skipping pings; false at the end of the
// stream (Err says whether it failed).
func (s *EventStream) Next() bool {
	var typ string
	var data []byte
	for s.err == nil && s.sc.Scan() {
		line := s.sc.Bytes()
		switch {
		case len(line) == 0:
			if typ == "" || typ == "ping" || len(data) == 0 {
				typ, data = "", nil
				continue
			}
			if err := json.Unmarshal(data, &s.ev); err != nil {
				s.err = fmt.Errorf("event stream: %s event is not JSON: %w", typ, err)
				return false
			}
			return true
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[len("data: "):]...)
		}
	}
	if s.err == nil {
		s.err = s.sc.Err()
	}
	return false
}

// Event is the event Next read.
func (s *EventStream) Event() store.Event { return s.ev }

// Err is why the stream ended, nil when the server ended it.
func (s *EventStream) Err() error { return s.err }

// Close ends the stream.
func (s *EventStream) Close() error {
	s.cancel()
	return s.body.Close()
}
