package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// Session event logs (store/events.go).

var eventTests = []test{
	{"AppendKeepsFields", testEventAppendKeepsFields},
	{"Pagination", testEventPagination},
	{"Filters", testEventFilters},
	{"AppendRefused", testEventAppendRefused},
	{"Wake", testEventWake},
	{"ArchiveTerminatesOnce", testEventArchiveTerminatesOnce},
	{"ConcurrentAppends", testEventConcurrentAppends},
}

// parseEvents parses posted events as the server does.
func parseEvents(t *testing.T, raws ...string) []store.NewEvent {
	t.Helper()
	out := make([]store.NewEvent, len(raws))
	for i, raw := range raws {
		ev, err := store.ParseEvent(i, json.RawMessage(raw))
		ok(t, err, "ParseEvent "+raw)
		out[i] = ev
	}
	return out
}

func appendEvents(t *testing.T, b store.Backend, sessionID string, raws ...string) []store.Event {
	t.Helper()
	out, err := b.AppendEvents(t.Context(), sessionID, parseEvents(t, raws...))
	ok(t, err, "AppendEvents")
	if len(out) != len(raws) {
		t.Fatalf("AppendEvents of %d events returned %d", len(raws), len(out))
	}
	return out
}

// eventSession is a fresh session, on an environment of its own, to log
// events in.
func eventSession(t *testing.T, b store.Backend) *store.Session {
	t.Helper()
	return newSession(t, b, newEnv(t, b, store.NewID("events-")).ID)
}

func toolUse(name string) string {
	return `{"type":"agent.tool_use","name":"` + name + `","input":{"command":"ls"},"evaluated_permission":"allow"}`
}

// allEvents pages through a session's log.
func allEvents(t *testing.T, b store.Backend, sessionID string, opts store.ListEventsOptions) []store.Event {
	t.Helper()
	var all []store.Event
	for range maxPages {
		p, err := b.ListEvents(t.Context(), sessionID, opts)
		ok(t, err, "ListEvents")
		if opts.Limit > 0 && len(p.Data) > opts.Limit {
			t.Fatalf("ListEvents limit %d returned %d", opts.Limit, len(p.Data))
		}
		all = append(all, p.Data...)
		if opts.Page = p.NextPage; opts.Page == "" {
			return all
		}
	}
	t.Fatalf("ListEvents: more than %d pages", maxPages)
	return nil
}

func eventIDs(es []store.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// decoded is an event's JSON as a map.
func decoded(t *testing.T, e store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.JSON, &m); err != nil {
		t.Fatalf("event %s is not a JSON object: %v", e.JSON, err)
	}
	return m
}

func testEventAppendKeepsFields(t *testing.T, open Opener) {
	b := open(t, 0)
	s := eventSession(t, b)
	before := time.Now().Add(-time.Second)
	got := appendEvents(t, b, s.ID,
		`{"type":"agent.tool_use", "name":"write","input":{"file_path":"/mnt/memory/n/a.md","content":"é <b> \u2028"},"evaluated_permission":"allow","x_extra":[1,2.50,{"k":null}]}`,
		`{"type":"session.status_idle","stop_reason":{"type":"end_turn"}}`)
	ids := map[string]bool{}
	for i, e := range got {
		if !strings.HasPrefix(e.ID, store.PrefixEvent) || ids[e.ID] {
			t.Errorf("event %d id %q: want a fresh sevt_ id", i, e.ID)
		}
		ids[e.ID] = true
		if e.Seq != int64(i+1) {
			t.Errorf("event %d seq %d, want %d", i, e.Seq, i+1)
		}
		checkUTC(t, "processed_at", e.ProcessedAt)
		if e.ProcessedAt.Before(before) || e.ProcessedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("event %d processed_at %v is not now", i, e.ProcessedAt)
		}
		m := decoded(t, e)
		if m["id"] != e.ID || m["type"] != e.Type || m["processed_at"] != e.ProcessedAt.Format(time.RFC3339Nano) {
			t.Errorf("event %d JSON %s: want id, type and processed_at %s", i, e.JSON, e.ProcessedAt.Format(time.RFC3339Nano))
		}
		if strings.Contains(string(e.JSON), "\n") {
			t.Errorf("event %d JSON spans lines: %q", i, e.JSON)
		}
	}
	// The fields sent are kept, values and order alike, after type, id and processed_at.
	want := `{"type":"agent.tool_use","id":"` + got[0].ID + `","processed_at":"` + got[0].ProcessedAt.Format(time.RFC3339Nano) +
		`","name":"write","input":{"file_path":"/mnt/memory/n/a.md","content":"é <b> \u2028"},"evaluated_permission":"allow","x_extra":[1,2.50,{"k":null}]}`
	if string(got[0].JSON) != want {
		t.Errorf("stored\n%s\nwant\n%s", got[0].JSON, want)
	}
	listed := allEvents(t, b, s.ID, store.ListEventsOptions{})
	if len(listed) != 2 || string(listed[0].JSON) != string(got[0].JSON) || string(listed[1].JSON) != string(got[1].JSON) {
		t.Fatalf("listed %+v, want what AppendEvents returned", listed)
	}
	// A tool result answers a tool use of its kind.
	r := appendEvents(t, b, s.ID, `{"type":"user.tool_result","tool_use_id":"`+got[0].ID+`","content":[{"type":"text","text":"done"}],"is_error":false}`)
	if m := decoded(t, r[0]); m["tool_use_id"] != got[0].ID || m["is_error"] != false {
		t.Errorf("result %s", r[0].JSON)
	}
	c := appendEvents(t, b, s.ID, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`)
	appendEvents(t, b, s.ID, `{"type":"user.custom_tool_result","custom_tool_use_id":"`+c[0].ID+`"}`)
}

func testEventPagination(t *testing.T, open Opener) {
	b := open(t, 0)
	s := eventSession(t, b)
	other := eventSession(t, b)
	var ids []string
	for i := range 7 {
		ids = append(ids, appendEvents(t, b, s.ID, toolUse(fmt.Sprint("t", i)))[0].ID)
		appendEvents(t, b, other.ID, toolUse("other"))
	}
	desc := slices.Clone(ids)
	slices.Reverse(desc)
	for _, limit := range []int{1, 2, 3, 7, 100} {
		equalStrings(t, fmt.Sprint("asc, limit ", limit), eventIDs(allEvents(t, b, s.ID, store.ListEventsOptions{Limit: limit})), ids)
		equalStrings(t, fmt.Sprint("desc, limit ", limit), eventIDs(allEvents(t, b, s.ID, store.ListEventsOptions{Limit: limit, Desc: true})), desc)
	}
	// Exactly limit events left: the page before them says there is more,
	// the last page says there isn't.
	p, err := b.ListEvents(t.Context(), s.ID, store.ListEventsOptions{Limit: 7})
	ok(t, err, "ListEvents limit 7")
	if len(p.Data) != 7 || p.NextPage != "" {
		t.Errorf("a page holding the whole log: %d events, next_page %q", len(p.Data), p.NextPage)
	}
	p, err = b.ListEvents(t.Context(), s.ID, store.ListEventsOptions{Limit: 3})
	ok(t, err, "ListEvents limit 3")
	// Events appended while paging show up on a later page, once.
	ids = append(ids, appendEvents(t, b, s.ID, toolUse("late"))[0].ID)
	rest := allEvents(t, b, s.ID, store.ListEventsOptions{Limit: 3, Page: p.NextPage})
	equalStrings(t, "pages after an append", append(eventIDs(p.Data), eventIDs(rest)...), ids)
	// A token continues only a listing in its own order; junk is refused.
	_, err = b.ListEvents(t.Context(), s.ID, store.ListEventsOptions{Limit: 3, Page: p.NextPage, Desc: true})
	wantErr(t, err, store.ErrInvalid, "an ascending token in a descending listing")
	_, err = b.ListEvents(t.Context(), s.ID, store.ListEventsOptions{Page: "not-a-token"})
	wantErr(t, err, store.ErrInvalid, "a junk page token")
	_, err = b.ListEvents(t.Context(), "sesn_nope", store.ListEventsOptions{})
	wantErr(t, err, store.ErrNotFound, "ListEvents of an unknown session")
	empty := eventSession(t, b)
	p, err = b.ListEvents(t.Context(), empty.ID, store.ListEventsOptions{})
	ok(t, err, "ListEvents of an empty log")
	if p.Data == nil || len(p.Data) != 0 || p.NextPage != "" {
		t.Errorf("empty log listed %+v, want no events and no next page", p)
	}
}

func testEventFilters(t *testing.T, open Opener) {
	b := open(t, 0)
	s := eventSession(t, b)
	first := appendEvents(t, b, s.ID, toolUse("a"), `{"type":"agent.message","content":[]}`)
	waitClockPast(t, first[1].ProcessedAt) // the next events get a later processed_at
	second := appendEvents(t, b, s.ID, toolUse("b"), `{"type":"session.status_idle","stop_reason":{"type":"end_turn"}}`)
	at := second[0].ProcessedAt
	all := append(slices.Clone(first), second...)
	cases := []struct {
		what string
		opts store.ListEventsOptions
		want []store.Event
	}{
		{"types tool_use", store.ListEventsOptions{Types: []string{"agent.tool_use"}}, []store.Event{first[0], second[0]}},
		{"two types", store.ListEventsOptions{Types: []string{"agent.message", "session.status_idle"}}, []store.Event{first[1], second[1]}},
		{"types, desc, limit 1", store.ListEventsOptions{Types: []string{"agent.tool_use"}, Desc: true, Limit: 1}, []store.Event{second[0], first[0]}},
		{"created_at gte", store.ListEventsOptions{CreatedGTE: &at}, second},
		{"created_at gt", store.ListEventsOptions{CreatedGT: &at}, nil},
		{"created_at lt", store.ListEventsOptions{CreatedLT: &at}, first},
		{"created_at lte", store.ListEventsOptions{CreatedLTE: &at}, all},
		{"gte a nanosecond later", store.ListEventsOptions{CreatedGTE: ptr(at.Add(time.Nanosecond))}, nil},
		{"lte a nanosecond later", store.ListEventsOptions{CreatedLTE: ptr(at.Add(time.Nanosecond))}, all},
		{"lt a nanosecond later", store.ListEventsOptions{CreatedLT: ptr(at.Add(time.Nanosecond))}, all},
		{"gt a nanosecond earlier", store.ListEventsOptions{CreatedGT: ptr(at.Add(-time.Nanosecond))}, second},
	}
	for _, c := range cases {
		equalStrings(t, c.what, eventIDs(allEvents(t, b, s.ID, c.opts)), eventIDs(c.want))
	}
}

func testEventAppendRefused(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := eventSession(t, b)
	other := eventSession(t, b)
	use := appendEvents(t, b, s.ID, toolUse("bash"))[0]
	custom := appendEvents(t, b, s.ID, `{"type":"agent.custom_tool_use","name":"f","input":{}}`)[0]
	otherUse := appendEvents(t, b, other.ID, toolUse("bash"))[0]

	_, err := b.AppendEvents(ctx, "sesn_nope", parseEvents(t, toolUse("x")))
	wantErr(t, err, store.ErrNotFound, "AppendEvents to an unknown session")
	for what, raw := range map[string]string{
		"a result for no event":                 `{"type":"user.tool_result","tool_use_id":"sevt_nope"}`,
		"a result for another session's use":    `{"type":"user.tool_result","tool_use_id":"` + otherUse.ID + `"}`,
		"a result for a custom tool use":        `{"type":"user.tool_result","tool_use_id":"` + custom.ID + `"}`,
		"a custom result for a tool use":        `{"type":"user.custom_tool_result","custom_tool_use_id":"` + use.ID + `"}`,
		"a result for an event of another type": `{"type":"user.tool_result","tool_use_id":"` + appendEvents(t, b, s.ID, `{"type":"agent.message","content":[]}`)[0].ID + `"}`,
	} {
		// A bad event refuses the whole request: the good one before it is not appended.
		_, err := b.AppendEvents(ctx, s.ID, parseEvents(t, toolUse("ok"), raw))
		wantErr(t, err, store.ErrInvalid, what)
	}
	if n := len(allEvents(t, b, s.ID, store.ListEventsOptions{})); n != 3 {
		t.Errorf("the log holds %d events after refused appends, want 3", n)
	}
	// A second result for one tool use is accepted (a retry after a lost answer).
	for range 2 {
		appendEvents(t, b, s.ID, `{"type":"user.tool_result","tool_use_id":"`+use.ID+`"}`)
	}
	_, err = b.ArchiveSession(ctx, s.ID)
	ok(t, err, "ArchiveSession")
	_, err = b.AppendEvents(ctx, s.ID, parseEvents(t, toolUse("late")))
	wantErr(t, err, store.ErrForbidden, "AppendEvents to a terminated session")
}

func testEventWake(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := eventSession(t, b)
	other := eventSession(t, b)
	tail, err := b.EventsAfter(ctx, s.ID, 0, 0)
	ok(t, err, "EventsAfter of an empty log")
	if tail.Head != 0 || tail.Terminated || len(tail.Events) != 0 {
		t.Fatalf("empty log tail %+v", tail)
	}
	ch, release := b.SubscribeEvents(s.ID)
	defer release()
	appendEvents(t, b, other.ID, toolUse("elsewhere"))
	select {
	case <-ch:
		// A spurious wake-up is allowed, but the log must not have moved.
		if tl, _ := b.EventsAfter(ctx, s.ID, 0, 10); tl.Head != 0 {
			t.Fatalf("another session's append moved this log to %d", tl.Head)
		}
	default:
	}
	ch2, release2 := b.SubscribeEvents(s.ID)
	defer release2()
	got := appendEvents(t, b, s.ID, toolUse("a"), toolUse("b"), toolUse("c"))
	waitClosed(t, ch2, "an append")
	tail, err = b.EventsAfter(ctx, s.ID, 0, 0)
	ok(t, err, "EventsAfter head")
	if tail.Head != 3 || len(tail.Events) != 0 {
		t.Fatalf("head-only tail %+v, want head 3 and no events", tail)
	}
	tail, err = b.EventsAfter(ctx, s.ID, 1, 10)
	ok(t, err, "EventsAfter 1")
	equalStrings(t, "events after 1", eventIDs(tail.Events), eventIDs(got[1:]))
	tail, err = b.EventsAfter(ctx, s.ID, 0, 2)
	ok(t, err, "EventsAfter limit 2")
	equalStrings(t, "events after 0, limit 2", eventIDs(tail.Events), eventIDs(got[:2]))
	tail, err = b.EventsAfter(ctx, s.ID, 3, 10)
	ok(t, err, "EventsAfter the head")
	if len(tail.Events) != 0 || tail.Head != 3 {
		t.Errorf("after the head: %+v", tail)
	}
	_, err = b.EventsAfter(ctx, "sesn_nope", 0, 0)
	wantErr(t, err, store.ErrNotFound, "EventsAfter of an unknown session")
}

func testEventArchiveTerminatesOnce(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := eventSession(t, b)
	appendEvents(t, b, s.ID, toolUse("a"))
	ch, release := b.SubscribeEvents(s.ID)
	defer release()
	_, err := b.ArchiveSession(ctx, s.ID)
	ok(t, err, "ArchiveSession")
	waitClosed(t, ch, "archiving the session")
	for range 2 {
		_, err = b.ArchiveSession(ctx, s.ID)
		ok(t, err, "ArchiveSession again")
	}
	all := allEvents(t, b, s.ID, store.ListEventsOptions{})
	var terminated []store.Event
	for _, e := range all {
		if e.Type == store.EventSessionStatusTerminated {
			terminated = append(terminated, e)
		}
	}
	if len(all) != 2 || len(terminated) != 1 || all[1].Type != store.EventSessionStatusTerminated {
		t.Fatalf("log after three archives: %+v; want the tool use, then one session.status_terminated", all)
	}
	m := decoded(t, terminated[0])
	if len(m) != 3 || m["id"] != terminated[0].ID || m["processed_at"] == nil {
		t.Errorf("terminated event %s: want exactly type, id and processed_at", terminated[0].JSON)
	}
	tail, err := b.EventsAfter(ctx, s.ID, 1, 10)
	ok(t, err, "EventsAfter")
	if !tail.Terminated || tail.Head != 2 || len(tail.Events) != 1 || tail.Events[0].ID != terminated[0].ID {
		t.Errorf("tail of the archived session %+v, want terminated, head 2, the terminated event", tail)
	}
}

func testEventConcurrentAppends(t *testing.T, open Opener) {
	b := open(t, 0)
	s := eventSession(t, b)
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				evs, err := store.ParseEvent(0, json.RawMessage(toolUse(fmt.Sprintf("w%d-%d", w, i))))
				if err == nil {
					_, err = b.AppendEvents(t.Context(), s.ID, []store.NewEvent{evs, evs})
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	all := allEvents(t, b, s.ID, store.ListEventsOptions{Limit: 7})
	if len(all) != 2*writers*each {
		t.Fatalf("%d events after %d appends of 2, want %d", len(all), writers*each, 2*writers*each)
	}
	for i, e := range all {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log must number its events 1, 2, 3, ...", i, e.Seq)
		}
		// The two events of one append are next to each other.
		if i%2 == 1 && decoded(t, e)["name"] != decoded(t, all[i-1])["name"] {
			t.Fatalf("events %d and %d come from different appends: one append's events were interleaved", i-1, i)
		}
	}
}
