package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// errDatabaseAway is what sqlstore answers when its database went away:
// an ErrUnavailable wrapping the driver's error.
var errDatabaseAway = fmt.Errorf("%w: %w",
	&store.Error{Kind: store.ErrUnavailable, Message: "the database is unavailable; retry shortly"}, syscall.ECONNREFUSED)

// findWorkAway is the real backend whose FindWork fails, when told to,
// as if the database went away between the look-up of a session token
// and that of its work item: a timing a real database can't be made to
// hit on cue.
type findWorkAway struct {
	store.Backend
	away atomic.Bool
}

func (b *findWorkAway) FindWork(ctx context.Context, workID string) (*store.Work, error) {
	if b.away.Load() {
		return nil, errDatabaseAway
	}
	return b.Backend.FindWork(ctx, workID)
}

// wantUnavailable checks a 503 overloaded_error that tells the client to
// retry: retry-after (seconds) and retry-after-ms, and no x-should-retry:
// false.
func wantUnavailable(t *testing.T, what string, r response) apiError {
	t.Helper()
	e := wantError(t, what, r, http.StatusServiceUnavailable, "overloaded_error")
	if s, err := strconv.Atoi(r.Header.Get("retry-after")); err != nil || s < 1 {
		t.Errorf("%s: retry-after %q, want a whole number of seconds >= 1", what, r.Header.Get("retry-after"))
	}
	if ms, err := strconv.Atoi(r.Header.Get("retry-after-ms")); err != nil || ms < 1 {
		t.Errorf("%s: retry-after-ms %q, want a whole number of milliseconds >= 1", what, r.Header.Get("retry-after-ms"))
	}
	if r.Header.Get("x-should-retry") == "false" {
		t.Errorf("%s: x-should-retry: false on a 503", what)
	}
	return e
}

// TestSessionTokenCheckDuringOutage: a session token is checked against
// its work item on every request. When that look-up fails because the
// database is away, the answer is 503 with retry-after, never 401: a 401
// tells the worker its token is dead, and it tears the session down.
func TestSessionTokenCheckDuringOutage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlstore.Open(ctx, sqltest.SQLite(t), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := server.EnsureAdminKey(ctx, db, testKey, dir); err != nil {
		t.Fatal(err)
	}
	b := &findWorkAway{Backend: db}
	logs := &harness.LockedBuffer{}
	log := logrus.New()
	log.SetOutput(logs)
	srv, err := server.New(server.Options{Backend: b, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(srv.BeginShutdown)
	s := &testServer{URL: hs.URL, srv: srv}

	env, envKey := s.newEnv(t, "env")
	storeID := s.createStore(t, "attached")
	sess := s.newSession(t, env.ID, memoryStore(storeID, ""))
	w, tok := s.claim(t, env.ID, envKey)
	calls := []struct{ method, path string }{
		{"GET", "/v1/sessions/" + sess.ID},
		{"GET", "/v1/memory_stores/" + storeID + "/memories"},
		{"POST", "/v1/environments/" + env.ID + "/work/" + w.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT"},
	}
	for _, c := range calls {
		if r := s.requestWith(t, c.method, c.path, nil, bearer(tok)); r.Status != http.StatusOK {
			t.Fatalf("session token, database up: %s %s: %s, want 200", c.method, c.path, r)
		}
	}

	b.away.Store(true)
	for _, c := range calls {
		r := s.requestWith(t, c.method, c.path, nil, bearer(tok))
		wantUnavailable(t, "session token, database away: "+c.method+" "+c.path, r)
		// The cause is logged once, with the request id; the client sees
		// only that the database is unavailable.
		rid := r.Header.Get("request-id")
		if line := lineWith(logs.String(), rid); !strings.Contains(line, syscall.ECONNREFUSED.Error()) {
			t.Errorf("%s %s: no log line with request id %s and the cause %q:\n%s", c.method, c.path, rid, syscall.ECONNREFUSED, logs)
		}
		if strings.Contains(string(r.Body), syscall.ECONNREFUSED.Error()) {
			t.Errorf("%s %s: the answer shows the driver's error: %s", c.method, c.path, r)
		}
	}

	b.away.Store(false)
	for _, c := range calls[:2] {
		if r := s.requestWith(t, c.method, c.path, nil, bearer(tok)); r.Status != http.StatusOK {
			t.Errorf("session token, database back: %s %s: %s, want 200", c.method, c.path, r)
		}
	}
}

// lineWith returns the first line of logs containing s ("" if none).
func lineWith(logs, s string) string {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
