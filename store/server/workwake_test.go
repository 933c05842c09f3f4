package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// TestWorkPollWakesOne: with several work polls blocked on one
// environment, a session create wakes ONE of them (not the herd): one
// poll answers the item well before its block_ms, the others answer null
// when theirs runs out, and the create costs at most two more Poll
// queries (the woken poll's, and the one its claim hands the wake to),
// where a broadcast wake costs one per blocked poll.
func TestWorkPollWakesOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		const pollers = 5
		s, qo := startWorkServer(t, dsn)
		env, key := s.newEnv(t, "env")
		pollPath := "/v1/environments/" + env.ID + "/work/poll?block_ms=999"

		type answer struct {
			r    response
			took time.Duration
			err  error
		}
		answers := make(chan answer, pollers)
		for range pollers {
			go func() {
				start := time.Now()
				r, err := s.send(context.Background(), "GET", pollPath, nil, bearer(key))
				answers <- answer{r, time.Since(start), err}
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for qo.polls.Load() < pollers {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d blocking polls looked at the queue", qo.polls.Load(), pollers)
			}
			time.Sleep(time.Millisecond)
		}
		before := qo.polls.Load()
		created := time.Now()
		sess := s.newSession(t, env.ID)

		claimed := 0
		for range pollers {
			a := <-answers
			if a.err != nil {
				t.Fatal(a.err)
			}
			if strings.TrimSpace(string(a.r.Body)) == "null" {
				if a.took < 999*time.Millisecond {
					t.Errorf("a poll answered null after %v, before its block_ms", a.took)
				}
				continue
			}
			var w store.Work
			a.r.decode(t, &w)
			if w.Data.ID != sess.ID {
				t.Errorf("a poll claimed %+v, want %s's item", w, sess.ID)
			}
			if since := time.Since(created); since > 500*time.Millisecond {
				t.Errorf("the item was claimed %v after the create, want well under block_ms", since)
			}
			claimed++
		}
		if claimed != 1 {
			t.Errorf("%d polls claimed the item, want 1", claimed)
		}
		if extra := qo.polls.Load() - before; extra > 2 {
			t.Errorf("one session create with %d polls blocked cost %d Poll queries, want at most 2", pollers, extra)
		}
	})
}
