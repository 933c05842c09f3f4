package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Session events: each session has an append-only event log, the
// self-hosted stand-in for the agent loop's log (SDK v2.15.0,
// BetaSessionEventService). The agent side (an admin key, in tests and
// demos) posts agent.* and session.* events; the session's tool runner
// reads them and posts user.tool_result / user.custom_tool_result back.
//
// Wire shape: an event is the JSON object its poster sent, with two
// fields the server assigns put first after its type:
//
//	{"type":"agent.tool_use","id":"sevt_…","processed_at":"2026-05-11T12:00:00.123456Z","name":"write","input":{…}}
//
// The other fields are kept as sent (compacted, in their order); memfs
// checks only what the SDK's tool runner depends on (see ParseEvent).

// Event types memfs looks at; every type of the SDK's
// BetaManagedAgentsSessionEventType is accepted (eventTypes).
const (
	PrefixEvent                  = "sevt_"
	EventAgentToolUse            = "agent.tool_use"
	EventAgentCustomToolUse      = "agent.custom_tool_use"
	EventUserToolResult          = "user.tool_result"
	EventUserCustomToolResult    = "user.custom_tool_result"
	EventUserToolConfirmation    = "user.tool_confirmation"
	EventSessionStatusIdle       = "session.status_idle"
	EventSessionStatusTerminated = "session.status_terminated"
	EventSessionDeleted          = "session.deleted"
)

// Limits of the events endpoints. A request body is capped at 1 MiB by
// the server (413), which bounds one event too.
const (
	// MaxEventsPerRequest bounds the events of one POST (one transaction).
	MaxEventsPerRequest = 1000
	// DefaultEventListLimit and MaxEventListLimit: the SDK's tool runner
	// lists with limit=1000.
	DefaultEventListLimit = 100
	MaxEventListLimit     = 1000
	// MaxEventPageBytes ends a page early once its events hold this many
	// bytes (a page of 1,000 events of up to 1 MiB each would be 1 GB);
	// next_page carries on from there.
	MaxEventPageBytes = 4 << 20
)

// eventTypes is BetaManagedAgentsSessionEventType of the SDK (v2.15.0):
// every type a session's log can hold. The stream-only previews
// (event_start, event_delta) are not events of the log.
var eventTypes = map[string]bool{
	"user.message": true, "user.interrupt": true, "user.tool_confirmation": true,
	"user.custom_tool_result": true, "user.tool_result": true, "user.define_outcome": true,
	"agent.custom_tool_use": true, "agent.message": true, "agent.thinking": true,
	"agent.mcp_tool_use": true, "agent.mcp_tool_result": true, "agent.tool_use": true,
	"agent.tool_result": true, "agent.thread_message_received": true,
	"agent.thread_message_sent": true, "agent.thread_context_compacted": true,
	"session.error": true, "session.status_rescheduled": true, "session.status_running": true,
	"session.status_idle": true, "session.status_terminated": true, "session.thread_created": true,
	"session.deleted": true, "session.thread_status_running": true, "session.thread_status_idle": true,
	"session.thread_status_terminated": true, "session.thread_status_rescheduled": true,
	"session.updated": true, "session.usage": true,
	"span.outcome_evaluation_start": true, "span.outcome_evaluation_end": true,
	"span.model_request_start": true, "span.model_request_end": true,
	"span.outcome_evaluation_ongoing": true, "system.message": true,
	"workflow_run.created": true, "workflow_run.status_running": true, "workflow_run.status_idle": true,
	"workflow_run.status_ended": true, "workflow_run.error": true,
	"workflow_run.phase_started": true, "workflow_run.phase_ended": true,
}

// KnownEventType reports whether t is a type of the SDK's session events.
func KnownEventType(t string) bool { return eventTypes[t] }

// SessionTokenMayPost reports whether a session's own token may post an
// event of type t: only the results of tool calls, which is what its
// tool runner sends. Everything else is the agent's (the admin key's).
func SessionTokenMayPost(t string) bool {
	return t == EventUserToolResult || t == EventUserCustomToolResult
}

// Event is one event of a session's log, as stored and served.
type Event struct {
	// Seq is the event's place in its session's log: 1, 2, 3, ... in
	// commit order. It is not on the wire (pages and streams use it).
	Seq         int64
	ID          string
	Type        string
	ProcessedAt time.Time
	// JSON is the whole event as served (see the package comment above).
	JSON json.RawMessage
}

// MarshalJSON writes the event as stored.
func (e Event) MarshalJSON() ([]byte, error) { return e.JSON, nil }

// UnmarshalJSON reads an event as served (a client's view: Seq stays 0).
func (e *Event) UnmarshalJSON(b []byte) error {
	var head struct {
		ID          string    `json:"id"`
		Type        string    `json:"type"`
		ProcessedAt time.Time `json:"processed_at"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	*e = Event{ID: head.ID, Type: head.Type, ProcessedAt: head.ProcessedAt, JSON: append(json.RawMessage(nil), b...)}
	return nil
}

// NewEvent is a validated event to append (ParseEvent).
type NewEvent struct {
	Type string
	// members are the event's fields as sent, in order, without type.
	members []member
	// ToolUseID is, for a tool result, the tool use it answers: the
	// backend checks that it names one of the session's tool uses of the
	// matching kind (AnswersType).
	ToolUseID string
}

// AnswersType is the type of event a tool result answers ("" for
// events that are not tool results).
func (n NewEvent) AnswersType() string {
	switch n.Type {
	case EventUserToolResult:
		return EventAgentToolUse
	case EventUserCustomToolResult:
		return EventAgentCustomToolUse
	}
	return ""
}

// member is one field of a JSON object: its name and compacted value.
type member struct {
	name  string
	value json.RawMessage
}

// Stored returns the event as the log keeps it, with the id and time the
// server assigned.
func (n NewEvent) Stored(id string, at time.Time) Event {
	at = at.UTC()
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeJSONString(&b, n.Type)
	b.WriteString(`,"id":`)
	writeJSONString(&b, id)
	b.WriteString(`,"processed_at":`)
	writeJSONString(&b, at.Format(time.RFC3339Nano))
	for _, m := range n.members {
		b.WriteByte(',')
		writeJSONString(&b, m.name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return Event{ID: id, Type: n.Type, ProcessedAt: at, JSON: b.Bytes()}
}

// TerminatedEvent is the session.status_terminated event that archiving a
// session appends.
func TerminatedEvent() NewEvent { return NewEvent{Type: EventSessionStatusTerminated} }

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// ParseEvent checks one posted event: a JSON object with a known type,
// without id or processed_at (the server assigns them), and with the
// fields the SDK's tool runner acts on:
//
//   - agent.tool_use, agent.custom_tool_use: name (a string) and input (an
//     object); evaluated_permission, when present, allow, ask or deny;
//   - user.tool_result: tool_use_id; user.custom_tool_result:
//     custom_tool_use_id (non-empty strings);
//   - user.tool_confirmation: tool_use_id and result (allow or deny);
//   - session.status_idle: stop_reason, an object with a string type.
//
// session.status_terminated is refused: archiving the session appends
// it, once, and ends its streams; session.deleted likewise (memfs never
// deletes a session). raw must be valid JSON (the server has decoded the
// request body); i names the event in errors.
func ParseEvent(i int, raw json.RawMessage) (NewEvent, error) {
	bad := func(format string, args ...any) (NewEvent, error) {
		return NewEvent{}, invalid("invalid_event", "events[%d]: %s", i, fmt.Sprintf(format, args...))
	}
	members, err := objectMembers(raw)
	if err != nil {
		return bad("%v", err)
	}
	fields := map[string]json.RawMessage{}
	var n NewEvent
	for _, m := range members {
		if _, dup := fields[m.name]; dup {
			return bad("the field %q appears twice", m.name)
		}
		fields[m.name] = m.value
		switch m.name {
		case "type":
		case "id", "processed_at":
			return bad("%s is assigned by the server; leave it out", m.name)
		default:
			n.members = append(n.members, m)
		}
	}
	typ, err := eventType(fields["type"])
	if err != nil {
		return bad("%v", err)
	}
	n.Type = typ
	if err := (eventFields{typ: typ, m: fields}).check(&n); err != nil {
		return bad("%v", err)
	}
	return n, nil
}

// eventType checks an event's type, v: a string naming a type a client
// may post.
func eventType(v json.RawMessage) (string, error) {
	typ, ok := jsonString(v)
	switch {
	case v == nil:
		return "", errors.New("type is required")
	case !ok:
		return "", fmt.Errorf("type must be a string, not %s", v)
	case typ == EventSessionStatusTerminated:
		return "", errors.New("session.status_terminated is appended by archiving the session (POST /v1/sessions/{id}/archive), which also ends its streams; it can't be posted")
	case typ == EventSessionDeleted:
		return "", errors.New("session.deleted can't be posted: memfs never deletes a session")
	case !eventTypes[typ]:
		return "", fmt.Errorf("unknown event type %q (the SDK's session event types: agent.*, user.*, session.*, span.*, system.message, workflow_run.*)", typ)
	}
	return typ, nil
}

// eventFields are the members of a posted event of type typ, by name.
type eventFields struct {
	typ string
	m   map[string]json.RawMessage
}

// check checks the fields that events of f's type require, and sets
// n.ToolUseID for a tool result.
func (f eventFields) check(n *NewEvent) error {
	var err error
	switch f.typ {
	case EventAgentToolUse, EventAgentCustomToolUse:
		if _, err = f.str("name"); err == nil {
			err = f.object("input")
		}
		if err == nil && f.m["evaluated_permission"] != nil {
			err = f.oneOf("evaluated_permission", "allow", "ask", "deny")
		}
	case EventUserToolResult:
		n.ToolUseID, err = f.str("tool_use_id")
	case EventUserCustomToolResult:
		n.ToolUseID, err = f.str("custom_tool_use_id")
	case EventUserToolConfirmation:
		if _, err = f.str("tool_use_id"); err == nil {
			err = f.oneOf("result", "allow", "deny")
		}
	case EventSessionStatusIdle:
		if err = f.object("stop_reason"); err == nil {
			var sr struct {
				Type *string `json:"type"`
			}
			if json.Unmarshal(f.m["stop_reason"], &sr) != nil || sr.Type == nil || *sr.Type == "" {
				err = fmt.Errorf("stop_reason must have a string type (end_turn, requires_action, ...), not %s", f.m["stop_reason"])
			}
		}
	}
	return err
}

// str is the required non-empty string field name.
func (f eventFields) str(name string) (string, error) {
	v, ok := jsonString(f.m[name])
	switch {
	case f.m[name] == nil:
		return "", fmt.Errorf("a %s event needs %s", f.typ, name)
	case !ok || v == "":
		return "", fmt.Errorf("%s must be a non-empty string, not %s", name, f.m[name])
	}
	return v, nil
}

// oneOf checks that the required string field name is one of allowed.
func (f eventFields) oneOf(name string, allowed ...string) error {
	v, err := f.str(name)
	if err != nil {
		return err
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%s must be one of %q, not %q", name, allowed, v)
}

// object checks that the required field name is a JSON object.
func (f eventFields) object(name string) error {
	v := f.m[name]
	if v == nil {
		return fmt.Errorf("a %s event needs %s", f.typ, name)
	}
	if v[0] != '{' {
		return fmt.Errorf("%s must be a JSON object, not %s", name, v)
	}
	return nil
}

// jsonString decodes a JSON string value.
func jsonString(v json.RawMessage) (string, bool) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// objectMembers splits a JSON object into its fields, in order, each
// value compacted (so that an event is one line of an SSE frame).
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("an event must be a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, err
		}
		out = append(out, member{name: name, value: c.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("an event must be one JSON object")
	}
	return out, nil
}

// ListEventsOptions page and filter a session's log. The page token
// holds its order: a token from an ascending listing continues only an
// ascending one.
type ListEventsOptions struct {
	Limit int
	Page  string
	// Desc lists newest first (default: oldest first).
	Desc bool
	// Types keeps only events of these types (empty: all).
	Types []string
	// Created* bound processed_at (the SDK's created_at[gt] etc.).
	CreatedGT, CreatedGTE, CreatedLT, CreatedLTE *time.Time
}

// EventTail is what a stream reads: the events after its cursor, the
// log's head (the Seq of its last event) and whether the session is
// terminated, read at one moment, so that an event at or below Head is
// never missed and nothing is appended after a terminated session's
// session.status_terminated.
type EventTail struct {
	Events     []Event
	Head       int64
	Terminated bool
}

// EventLog keeps each session's event log.
type EventLog interface {
	// AppendEvents appends events to a session's log in order, in one
	// transaction, assigning ids and processed_at; it returns them as
	// stored. ErrNotFound for an unknown session; ErrForbidden for a
	// terminated one (its log is closed); ErrInvalid for a tool result
	// whose ToolUseID names no tool use of the session of its kind.
	AppendEvents(ctx context.Context, sessionID string, events []NewEvent) ([]Event, error)
	// ListEvents lists a session's log (ErrNotFound for an unknown session).
	ListEvents(ctx context.Context, sessionID string, opts ListEventsOptions) (Page[Event], error)
	// EventsAfter returns up to limit events with Seq > after, oldest
	// first, with the head and the session's state (see EventTail).
	// limit 0 reads only the head and the state.
	EventsAfter(ctx context.Context, sessionID string, after int64, limit int) (EventTail, error)
	// SubscribeEvents returns a channel closed at the next append to the
	// session's log (in this process or, on PostgreSQL, any process
	// sharing the database), and a function to release it. Subscribe
	// before reading, then wait, to miss nothing.
	SubscribeEvents(sessionID string) (<-chan struct{}, func())
}
