package test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// TestServeCrossProcessWorkWake runs two memfs serve processes on one
// PostgreSQL database: a work poll blocked on A (block_ms=999, the API's
// longest) must answer with a session created through B while it blocks,
// woken by B's NOTIFY, instead of answering null when its block runs out.
// Each round uses a new environment, so the queue is empty when the poll
// starts. Without the cross-process wake every round answers null; a
// round is retried (up to 3) only so that a very slow machine, taking
// most of the 999 ms between A's poll and B's create, can't fail it.
func TestServeCrossProcessWorkWake(t *testing.T) {
	dsn := sqltest.Postgres(t)
	a := harness.StartServe(t, harness.ServeOptions{DB: dsn})
	b := harness.StartServe(t, harness.ServeOptions{DB: dsn})
	watch, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()

	type answer struct {
		work *store.Work
		err  error
	}
	for round := range 3 {
		var env store.Environment
		if ans := rawCall(t, a.URL, "POST", "/v1/environments", a.AdminKey, nil, map[string]any{"name": "wake"}); ans.status != 200 || json.Unmarshal(ans.body, &env) != nil {
			t.Fatalf("create environment: %s", ans)
		}
		done := make(chan answer, 1)
		go func() {
			w, err := pollWork(a.URL, env.ID, env.EnvironmentKey, "w1", 999)
			done <- answer{w, err}
		}()
		// Wait until A's poll has found the queue empty (its transaction
		// records the worker's poll): from then on, only a wake-up can
		// answer it with B's session.
		for deadline := time.Now().Add(10 * time.Second); workersPolled(t, watch, env.ID) == 0; {
			if time.Now().After(deadline) {
				t.Fatal("process A never polled (no workers row for the environment)")
			}
			time.Sleep(2 * time.Millisecond) // polling the database, bounded by the deadline
		}
		var sess store.Session
		if ans := rawCall(t, b.URL, "POST", "/v1/sessions", b.AdminKey, nil, map[string]any{"environment_id": env.ID}); ans.status != 200 || json.Unmarshal(ans.body, &sess) != nil {
			t.Fatalf("create session through B: %s", ans)
		}
		var ans answer
		select {
		case ans = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("A's poll did not answer within 20 s")
		}
		if ans.err != nil {
			t.Fatal(ans.err)
		}
		if ans.work != nil {
			if ans.work.Data.ID != sess.ID {
				t.Fatalf("A's poll answered %+v; want the work item of %s", ans.work, sess.ID)
			}
			return
		}
		t.Logf("round %d: A's blocked poll answered null: not woken by B's session create", round)
	}
	t.Fatal("a work poll blocked on A was never woken by a session created through B")
}

// pollWork sends one work poll as worker id and decodes its answer (nil
// for JSON null).
func pollWork(base, envID, key, worker string, blockMS int) (*store.Work, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/environments/"+envID+"/work/poll?block_ms="+strconv.Itoa(blockMS), nil)
	if err != nil {
		return nil, err
	}
	req.Header = harness.APIHeaders(req.URL.Path, key)
	req.Header.Set("Anthropic-Worker-ID", worker)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("work poll: %d %s", res.StatusCode, body)
	}
	var w *store.Work
	return w, json.Unmarshal(body, &w)
}

// workersPolled counts the workers recorded as having polled envID.
func workersPolled(t *testing.T, db *sql.DB, envID string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM workers WHERE environment_id = $1`, envID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
