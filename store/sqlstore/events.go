package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memfs/memfs/store"
)

// Session event logs (schemaV4). An append locks the session's row (FOR
// UPDATE on PostgreSQL, the one writer on SQLite), numbers its events
// after sessions.last_event_seq and raises it in the same transaction, so
// per session, seq order is commit order and a reader that sees a head
// sees every event up to it.

// eventsKey is the hub key, and the NOTIFY payload, of a session's log
// (store ids, the other keys, begin with memstore_ or queue:).
func eventsKey(sessionID string) string { return "events:" + sessionID }

// lockSessionLog locks a session's row in tx and returns its log's head
// and whether it is archived.
func (db *DB) lockSessionLog(ctx context.Context, tx *sql.Tx, sessionID string) (head int64, archived bool, err error) {
	var at sql.NullInt64
	err = tx.QueryRowContext(ctx, db.d.q(`SELECT archived_at, last_event_seq FROM sessions WHERE id = ?`+db.d.forUpdate), sessionID).Scan(&at, &head)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, store.Errorf(store.ErrNotFound, "session %s not found", sessionID)
	}
	return head, at.Valid, mapErr(err)
}

// appendEvents inserts events after head in tx (whose caller holds the
// session's row lock), raises the head and, on PostgreSQL, notifies other
// processes at commit. The caller wakes this process's waiters after the
// commit.
func (db *DB) appendEvents(ctx context.Context, tx *sql.Tx, sessionID string, head, now int64, events []store.NewEvent) ([]store.Event, error) {
	out := make([]store.Event, 0, len(events))
	for _, ev := range events {
		e := ev.Stored(store.NewID(store.PrefixEvent), micros(now))
		head++
		e.Seq = head
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO session_events (session_id, seq, id, type, processed_at, data) VALUES (?, ?, ?, ?, ?, ?)`),
			sessionID, e.Seq, e.ID, e.Type, now, string(e.JSON)); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, e)
	}
	if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE sessions SET last_event_seq = ? WHERE id = ?`), head, sessionID); err != nil {
		return nil, mapErr(err)
	}
	if db.d.notify != "" {
		if _, err := tx.ExecContext(ctx, db.d.q(db.d.notify), eventsKey(sessionID)); err != nil {
			return nil, mapErr(err)
		}
	}
	return out, nil
}

// AppendEvents appends events to a session's log in one transaction.
func (db *DB) AppendEvents(ctx context.Context, sessionID string, events []store.NewEvent) ([]store.Event, error) {
	var out []store.Event
	err := db.writeTx(ctx, "", func(tx *sql.Tx, _ *lockedStore) error {
		head, archived, err := db.lockSessionLog(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if archived {
			return store.Errorf(store.ErrForbidden, "session %s is terminated (archived); its event log takes no more events", sessionID)
		}
		for i, ev := range events {
			want := ev.AnswersType()
			if want == "" {
				continue
			}
			var typ string
			err := tx.QueryRowContext(ctx, db.d.q(`SELECT type FROM session_events WHERE id = ? AND session_id = ?`), ev.ToolUseID, sessionID).Scan(&typ)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return mapErr(err)
			}
			if typ != want {
				return &store.Error{Kind: store.ErrInvalid, Code: "invalid_event",
					Message: fmt.Sprintf("events[%d]: %s is not an %s event of session %s; a %s answers one", i, ev.ToolUseID, want, sessionID, ev.Type)}
			}
		}
		out, err = db.appendEvents(ctx, tx, sessionID, head, db.now(), events)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.hub.notify(eventsKey(sessionID))
	return out, nil
}

const eventColumns = `seq, id, type, processed_at, data`

func scanEvent(r rowScanner) (store.Event, error) {
	var e store.Event
	var at int64
	var data string
	if err := r.Scan(&e.Seq, &e.ID, &e.Type, &at, &data); err != nil {
		return e, err
	}
	e.ProcessedAt = micros(at)
	e.JSON = []byte(data)
	return e, nil
}

// ListEvents lists a session's log by seq, with keyset pagination.
func (db *DB) ListEvents(ctx context.Context, sessionID string, opts store.ListEventsOptions) (store.Page[store.Event], error) {
	page := store.Page[store.Event]{Data: []store.Event{}}
	tok, err := decodeToken(opts.Page)
	if err != nil {
		return page, err
	}
	if opts.Page != "" && tok.D != opts.Desc {
		return page, store.Errorf(store.ErrInvalid, "page: this next_page continues a listing in the other order; keep order as it was")
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = store.DefaultEventListLimit
	}
	limit = min(limit, store.MaxEventListLimit)
	var one int
	err = db.sql.QueryRowContext(ctx, db.d.q(`SELECT 1 FROM sessions WHERE id = ?`), sessionID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return page, store.Errorf(store.ErrNotFound, "session %s not found", sessionID)
	}
	if err != nil {
		return page, mapErr(err)
	}
	var where strings.Builder
	args := []any{sessionID}
	where.WriteString(`session_id = ?`)
	cond := func(c string, v any) {
		where.WriteString(" AND " + c)
		args = append(args, v)
	}
	if opts.Page != "" {
		if opts.Desc {
			cond("seq < ?", tok.N)
		} else {
			cond("seq > ?", tok.N)
		}
	}
	if len(opts.Types) > 0 {
		where.WriteString(" AND type IN (?" + strings.Repeat(", ?", len(opts.Types)-1) + ")")
		for _, t := range opts.Types {
			args = append(args, t)
		}
	}
	// processed_at is kept in microseconds; a bound with a finer fraction
	// is rounded the way that keeps the comparison exact.
	if t := opts.CreatedGT; t != nil {
		cond("processed_at > ?", floorMicro(*t))
	}
	if t := opts.CreatedGTE; t != nil {
		cond("processed_at >= ?", ceilMicro(*t))
	}
	if t := opts.CreatedLT; t != nil {
		cond("processed_at < ?", ceilMicro(*t))
	}
	if t := opts.CreatedLTE; t != nil {
		cond("processed_at <= ?", floorMicro(*t))
	}
	order := "ASC"
	if opts.Desc {
		order = "DESC"
	}
	args = append(args, limit+1)
	rows, err := db.sql.QueryContext(ctx, db.d.q(qEventsSelect+where.String()+` ORDER BY seq `+order+` LIMIT ?`), args...)
	if err != nil {
		return page, mapErr(err)
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		if n := len(page.Data); n == limit || (n > 0 && size >= store.MaxEventPageBytes) {
			page.NextPage = encodeToken(pageToken{N: page.Data[n-1].Seq, D: opts.Desc})
			break
		}
		e, err := scanEvent(rows)
		if err != nil {
			return store.Page[store.Event]{}, mapErr(err)
		}
		page.Data = append(page.Data, e)
		size += len(e.JSON)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Event]{}, mapErr(err)
	}
	return page, nil
}

func floorMicro(t time.Time) int64 { return t.UnixMicro() }

func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++
	}
	return us
}

// EventsAfter reads the head and state of a session's log, then up to
// limit events after a cursor and at or below that head.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, after int64, limit int) (store.EventTail, error) {
	var tail store.EventTail
	var archived sql.NullInt64
	err := db.sql.QueryRowContext(ctx, db.d.q(`SELECT archived_at, last_event_seq FROM sessions WHERE id = ?`), sessionID).Scan(&archived, &tail.Head)
	if errors.Is(err, sql.ErrNoRows) {
		return tail, store.Errorf(store.ErrNotFound, "session %s not found", sessionID)
	}
	if err != nil {
		return tail, mapErr(err)
	}
	tail.Terminated = archived.Valid
	if limit <= 0 || after >= tail.Head {
		return tail, nil
	}
	rows, err := db.sql.QueryContext(ctx, db.d.q(qEventsAfter),
		sessionID, after, tail.Head, limit)
	if err != nil {
		return tail, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return store.EventTail{}, mapErr(err)
		}
		tail.Events = append(tail.Events, e)
	}
	if err := rows.Err(); err != nil {
		return store.EventTail{}, mapErr(err)
	}
	return tail, nil
}

// SubscribeEvents returns a channel closed at the session log's next append.
func (db *DB) SubscribeEvents(sessionID string) (<-chan struct{}, func()) {
	return db.hub.subscribe(eventsKey(sessionID))
}
