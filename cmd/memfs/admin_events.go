package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// memfs sessions events: a session's event log (store/events.go) from the
// admin's side, which stands in for the agent loop: post an
// agent.tool_use, and the session's worker (memfs worker --run-tools)
// runs the tool and posts its user.tool_result.

var sessionsEventsGroup = &adminGroup{
	name: "sessions events",
	about: `Reads and appends to a session's event log. memfs serve keeps the log; the
admin key stands in for the agent: 'post --tool NAME --input JSON' appends an
agent.tool_use, which the session's worker (memfs worker --run-tools) runs in
its sandbox and answers with a user.tool_result.`,
	verbs: []verb{
		{"ls", "SESSION", "list the session's events, oldest first", eventsLs},
		{"post", "SESSION (--tool NAME [--input JSON] | --event JSON) [--wait-result]", "append an agent.tool_use, or any event", eventsPost},
		{"stream", "SESSION", "print the session's events as they are appended, until it ends", eventsStream},
	},
}

func init() {
	nestedGroups["sessions events"] = sessionsEventsGroup
}

func eventsLs(a *admin, args []string) error {
	a.flags("SESSION", `
Lists a session's events, oldest first: when each was processed, its type,
its id and what it is about (a tool use's name and input, a result's text
and whether it is an error, an idle session's stop reason). --json prints
the events as the API has them.

Example:
  memfs sessions events ls sesn_...`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	evs, err := c.AllEvents(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(append([]store.Event{}, evs...))
	}
	if len(evs) == 0 {
		a.note("no events")
		return nil
	}
	w := a.table("PROCESSED", "TYPE", "ID", "DETAIL")
	for _, e := range evs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", fmtTime(e.ProcessedAt), e.Type, e.ID, eventDetail(e))
	}
	return w.Flush()
}

// eventFields is what eventDetail reads of an event.
type eventFields struct {
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	ToolUseID  string          `json:"tool_use_id"`
	CustomID   string          `json:"custom_tool_use_id"`
	IsError    bool            `json:"is_error"`
	Content    json.RawMessage `json:"content"`
	StopReason struct {
		Type string `json:"type"`
	} `json:"stop_reason"`
}

// eventDetail is one line about an event, at most 100 characters.
func eventDetail(e store.Event) string {
	var f eventFields
	_ = json.Unmarshal(e.JSON, &f) // a field of another shape leaves it empty
	var d string
	switch e.Type {
	case store.EventAgentToolUse, store.EventAgentCustomToolUse:
		d = f.Name + " " + string(f.Input)
	case store.EventUserToolResult, store.EventUserCustomToolResult:
		d = "for " + f.ToolUseID + f.CustomID
		if f.IsError {
			d += " (error)"
		}
		if t := contentText(f.Content); t != "" {
			d += ": " + t
		}
	case store.EventSessionStatusIdle:
		d = f.StopReason.Type
	default:
		d = contentText(f.Content)
	}
	d = strings.TrimSpace(oneLine(d))
	if r := []rune(d); len(r) > 100 {
		d = string(r[:99]) + "…"
	}
	return d
}

// contentText is the text of a content field: a string, or the text of
// its text blocks, one per line ([image] and the like for other blocks).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

func eventsPost(a *admin, args []string) error {
	fs := a.flags("SESSION (--tool NAME [--input JSON] | --event JSON) [--wait-result]", `
Appends an event to a session's log with the admin key, which stands in for
the agent. --tool NAME posts an agent.tool_use of that tool (bash, read,
write, edit, glob, grep, ...) with --input as its input and
evaluated_permission allow; the session's worker (memfs worker --run-tools)
runs it and posts a user.tool_result. --event posts any event, a JSON object
with its type ("-" reads it from stdin). It prints the new event's id.

--wait-result waits for the tool use's result and prints its text (the
whole event with --json); the exit status is 1 when the tool reported an
error (is_error), or when the session ends first.

Examples:
  memfs sessions events post sesn_... --tool bash --input '{"command":"ls /mnt/memory"}' --wait-result
  memfs sessions events post sesn_... --event '{"type":"session.status_idle","stop_reason":{"type":"end_turn"}}'`)
	tool := fs.String("tool", "", "post an agent.tool_use of this tool")
	input := fs.String("input", "", "the tool's input, a JSON object (default {})")
	event := fs.String("event", "", `post this event: a JSON object with its "type"; - reads it from stdin`)
	wait := fs.Bool("wait-result", false, "wait for the tool use's result and print it")
	pos, err := a.parse(args, 1, 1)
	if err != nil {
		return err
	}
	raw, err := postedEvent(a.io.stdin, *tool, *input, *event)
	if err != nil {
		return err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head) // postedEvent checked it is an object
	if *wait && head.Type != store.EventAgentToolUse && head.Type != store.EventAgentCustomToolUse {
		return usagef("--wait-result waits for a tool use's result: post --tool NAME, or an --event of type agent.tool_use or agent.custom_tool_use, not %q", head.Type)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if !*wait {
		out, err := c.SendEvents(a.ctx, pos[0], []json.RawMessage{raw})
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(out[0])
		}
		a.printf("%s\n", out[0].ID)
		return nil
	}
	// Open the stream first, so that the result can't come between the
	// post and the wait.
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	st, err := c.StreamEvents(ctx, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	out, err := c.SendEvents(a.ctx, pos[0], []json.RawMessage{raw})
	if err != nil {
		return err
	}
	use := out[0]
	a.note("posted %s %s; waiting for its result (Ctrl-C stops waiting)", use.Type, use.ID)
	result, err := waitResult(a.ctx, c, st, pos[0], use)
	if err != nil {
		return err
	}
	var f eventFields
	_ = json.Unmarshal(result.JSON, &f)
	if a.json {
		if err := a.printJSON(result); err != nil {
			return err
		}
	} else if t := contentText(f.Content); t != "" {
		a.printf("%s\n", strings.TrimSuffix(t, "\n"))
	}
	if f.IsError {
		return fmt.Errorf("the tool reported an error (%s is_error: true)", result.ID)
	}
	return nil
}

// postedEvent builds the event to post from the flags: an agent.tool_use
// of tool with input, or the --event JSON (from stdin for "-").
func postedEvent(stdin io.Reader, tool, input, event string) (json.RawMessage, error) {
	switch {
	case tool == "" && event == "":
		return nil, usagef("nothing to post: give --tool NAME (with --input JSON) or --event JSON")
	case tool != "" && event != "":
		return nil, usagef("give --tool or --event, not both")
	case event != "" && input != "":
		return nil, usagef("--input goes with --tool; put an --event's fields in its JSON")
	}
	if event != "" {
		b := []byte(event)
		if event == "-" {
			var err error
			if b, err = io.ReadAll(stdin); err != nil {
				return nil, fmt.Errorf("reading the event from stdin: %w", err)
			}
		}
		b = bytes.TrimSpace(b)
		if !json.Valid(b) || len(b) == 0 || b[0] != '{' {
			return nil, usagef(`--event must be a JSON object with a "type", e.g. '{"type":"agent.message","content":[{"type":"text","text":"hi"}]}'`)
		}
		return b, nil
	}
	if input == "" {
		input = "{}"
	}
	in := []byte(strings.TrimSpace(input))
	if !json.Valid(in) || in[0] != '{' {
		return nil, usagef(`--input must be a JSON object, e.g. '{"command":"ls /mnt/memory"}', not %q`, input)
	}
	return json.Marshal(map[string]any{"type": store.EventAgentToolUse, "name": tool,
		"input": json.RawMessage(in), "evaluated_permission": "allow"})
}

// waitResult reads the stream until the result of use arrives. If the
// stream ends before it (a server restart), the log is read once more.
func waitResult(ctx context.Context, c *client.Client, st *client.EventStream, sessionID string, use store.Event) (store.Event, error) {
	answers := func(e store.Event) bool {
		var f eventFields
		_ = json.Unmarshal(e.JSON, &f)
		return (e.Type == store.EventUserToolResult && f.ToolUseID == use.ID) ||
			(e.Type == store.EventUserCustomToolResult && f.CustomID == use.ID)
	}
	ended := errors.New("the session ended (session.status_terminated) before the tool's result arrived")
	for st.Next() {
		e := st.Event()
		if answers(e) {
			return e, nil
		}
		if e.Type == store.EventSessionStatusTerminated {
			return store.Event{}, ended
		}
	}
	if ctx.Err() != nil {
		return store.Event{}, ctx.Err()
	}
	all, err := c.AllEvents(ctx, sessionID)
	if err != nil {
		return store.Event{}, err
	}
	for _, e := range all {
		if answers(e) {
			return e, nil
		}
		if e.Type == store.EventSessionStatusTerminated {
			return store.Event{}, ended
		}
	}
	return store.Event{}, fmt.Errorf("the server ended the event stream (%v) before the result of %s arrived; see it later with memfs sessions events ls %s", st.Err(), use.ID, sessionID)
}

func eventsStream(a *admin, args []string) error {
	a.flags("SESSION", `
Prints a session's events as they are appended, one line each (as in ls),
until the session ends (after its session.status_terminated) or Ctrl-C.
--json prints each event as one line of JSON. Events from before the
command started are not shown: see ls.

Example:
  memfs sessions events stream sesn_... --json`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	st, err := c.StreamEvents(a.ctx, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Next() {
		e := st.Event()
		if a.json {
			a.printf("%s\n", e.JSON)
		} else {
			a.printf("%s  %s  %s  %s\n", fmtTime(e.ProcessedAt), e.Type, e.ID, eventDetail(e))
		}
		if e.Type == store.EventSessionStatusTerminated {
			return nil
		}
	}
	if a.ctx.Err() != nil {
		return nil // Ctrl-C: the usual way to stop watching
	}
	return fmt.Errorf("the server ended the event stream before the session ended (%v); run the command again", st.Err())
}
