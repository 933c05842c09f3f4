package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
	"github.com/memfs/memfs/test/harness"
)

// jsonEntries parses every line logged as a JSON log entry, failing the
// test on a line that is not one.
func jsonEntries(t *testing.T, logs *harness.LockedBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("a log line is not JSON (%v): %s", err, line)
		}
		out = append(out, e)
	}
	return out
}

// startLoggedServer is startServer (SQLite) logging JSON at debug level
// into a buffer, as memfs serve --log-format json --log-level debug does.
func startLoggedServer(t *testing.T, opts server.Options) (*testServer, *harness.LockedBuffer) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, sqltest.SQLite(t), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := server.EnsureAdminKey(ctx, db, testKey, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	buf := &harness.LockedBuffer{}
	log := logrus.New()
	log.SetOutput(buf)
	log.SetFormatter(&logrus.JSONFormatter{})
	log.SetLevel(logrus.DebugLevel)
	opts.Backend, opts.Log = db, log
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(srv.BeginShutdown)
	return &testServer{URL: hs.URL, srv: srv}, buf
}

// accessLine returns the access line of the request with this id.
func accessLine(t *testing.T, buf *harness.LockedBuffer, requestID string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, e := range jsonEntries(t, buf) {
		if e["msg"] == "request" && e["request_id"] == requestID {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d access lines for %s, want 1:\n%s", len(found), requestID, buf)
	}
	return found[0]
}

// TestAccessLog: every request gets one JSON access line with its method,
// route pattern, status, duration, size, actor and address; no line holds
// a credential, a query string or an id from the path; idle long polls
// are debug.
func TestAccessLog(t *testing.T) {
	s, buf := startLoggedServer(t, server.Options{})
	type want struct {
		level, method, route, actor, actorIDPrefix string
		status                                     int
	}
	check := func(what string, r response, w want) {
		t.Helper()
		e := accessLine(t, buf, r.Header.Get("request-id"))
		for k, v := range map[string]any{"level": w.level, "method": w.method, "route": w.route, "actor": w.actor, "status": float64(w.status), "bytes": float64(len(r.Body))} {
			if e[k] != v {
				t.Errorf("%s: %s = %v, want %v (%v)", what, k, e[k], v, e)
			}
		}
		id, _ := e["actor_id"].(string)
		if w.actorIDPrefix == "" && id != "" || w.actorIDPrefix != "" && !strings.HasPrefix(id, w.actorIDPrefix) {
			t.Errorf("%s: actor_id = %q, want %q...", what, id, w.actorIDPrefix)
		}
		if d, ok := e["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("%s: duration_ms = %v, want a number of milliseconds", what, e["duration_ms"])
		}
		if a, _ := e["remote"].(string); !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("%s: remote = %q, want the client's address", what, a)
		}
	}

	// The admin key, in the header and (wrongly, by a client) in the query.
	var st store.Store
	r := s.request(t, "POST", "/v1/memory_stores", map[string]any{"name": "logged"})
	r.decode(t, &st)
	check("create a store", r, want{"info", "POST", "/v1/memory_stores", "admin", "apikey_", 200})
	m := s.createMemory(t, st.ID, "/a.md", "a")
	r = s.request(t, "GET", "/v1/memory_stores/"+st.ID+"/memories/"+m.ID+"?api_key="+testKey, nil)
	check("get a memory", r, want{"info", "GET", "/v1/memory_stores/{store_id}/memories/{memory_id}", "admin", "apikey_", 200})

	// An environment key claims a session's work item; its token reads the session.
	env, envKey := s.newEnv(t, "logged")
	sess := s.newSession(t, env.ID, memoryStore(st.ID, ""))
	r = s.requestWith(t, "GET", "/v1/environments/"+env.ID+"/work/poll?block_ms=1", nil, bearer(envKey))
	var w store.Work
	r.decode(t, &w)
	check("a poll that finds work", r, want{"info", "GET", "/v1/environments/{env_id}/work/poll", "environment", "apikey_", 200})
	token := sessionToken(t, w.Secret)
	r = s.requestWith(t, "GET", "/v1/sessions/"+sess.ID, nil, bearer(token))
	check("a session token", r, want{"info", "GET", "/v1/sessions/{session_id}", "session", sess.ID, 200})
	r = s.requestWith(t, "GET", "/v1/environments/"+env.ID+"/work/poll?block_ms=1", nil, bearer(envKey))
	check("an idle poll", r, want{"debug", "GET", "/v1/environments/{env_id}/work/poll", "environment", "apikey_", 200})
	var head store.ChangePage
	r = s.request(t, "GET", "/v1/memory_stores/"+st.ID+"/changes?after=0", nil)
	r.decode(t, &head)
	r = s.request(t, "GET", "/v1/memory_stores/"+st.ID+"/changes?wait_ms=1&after="+strconv.FormatInt(head.NextCursor, 10), nil)
	check("an idle change-feed poll", r, want{"debug", "GET", "/v1/memory_stores/{store_id}/changes", "admin", "apikey_", 200})
	r = s.request(t, "GET", "/v1/memory_stores/"+st.ID+"/changes?after=1", nil)
	check("a change-feed read with changes", r, want{"info", "GET", "/v1/memory_stores/{store_id}/changes", "admin", "apikey_", 200})

	// Refused and unknown.
	const wrongKey = "sk-memfs-wrong-key-for-the-access-log"
	r = s.requestWith(t, "GET", "/v1/memory_stores", nil, http.Header{"X-Api-Key": {wrongKey}})
	check("a wrong key", r, want{"info", "GET", "/v1/memory_stores", "none", "", 401})
	r = s.requestWith(t, "GET", "/v1/memory_stores", nil, nil)
	check("no key", r, want{"info", "GET", "/v1/memory_stores", "none", "", 401})
	r = s.request(t, "GET", "/v2/nothing/"+st.ID, nil)
	check("no route", r, want{"info", "GET", "/", "none", "", 404})

	log := buf.String()
	for what, secret := range map[string]string{"the admin key": testKey, "a wrong key": wrongKey, "the environment key": envKey,
		"the session token": token, "a query string": "api_key=", "a store id from a path": st.ID, "a memory id from a path": m.ID} {
		if strings.Contains(log, secret) {
			t.Errorf("the log shows %s (%q):\n%s", what, secret, log)
		}
	}
}

// TestAccessLogAuthStorm: the 5th 401 within a minute from one address
// warns once, naming the address; more 401s within that minute don't warn
// again; other addresses are counted apart, and 401s below the threshold
// never warn.
func TestAccessLogAuthStorm(t *testing.T) {
	s, buf := startLoggedServer(t, server.Options{})
	bad := http.Header{"X-Api-Key": {"sk-memfs-guessed-key-0123456789"}}
	for i := 0; i < 20; i++ {
		if r := s.requestWith(t, "GET", "/v1/memory_stores", nil, bad); r.Status != http.StatusUnauthorized {
			t.Fatalf("a wrong key got %s, want 401", r)
		}
	}
	// Other addresses, through the same handler (httptest can't dial from them).
	from := func(addr string, n int) {
		for i := 0; i < n; i++ {
			req := httptest.NewRequest("GET", "/v1/memory_stores", nil)
			req.RemoteAddr = addr
			setProtocol(req)
			rec := httptest.NewRecorder()
			s.srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("no key from %s got %d, want 401", addr, rec.Code)
			}
		}
	}
	from("192.0.2.10:5555", 4)
	from("[2001:db8::1]:443", 7)
	// A good key from the stormy address changes nothing.
	s.request(t, "GET", "/v1/memory_stores", nil)

	warned := map[string]int{}
	for _, e := range jsonEntries(t, buf) {
		if e["level"] == "warning" {
			if !strings.Contains(e["msg"].(string), "refused") {
				t.Errorf("unexpected warning: %v", e)
				continue
			}
			warned[e["remote"].(string)]++
			if e["refused"] != float64(5) {
				t.Errorf("warning %v: refused = %v, want 5 (the 5th 401 warns)", e, e["refused"])
			}
		}
	}
	if warned["127.0.0.1"] != 1 || warned["2001:db8::1"] != 1 || len(warned) != 2 {
		t.Errorf("warnings per address %v, want one for 127.0.0.1 (20 401s), one for 2001:db8::1 (7), none for 192.0.2.10 (4)", warned)
	}
	if strings.Contains(buf.String(), "sk-memfs-guessed-key") {
		t.Errorf("the log shows the refused key")
	}
}
