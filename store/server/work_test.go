package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

// Environments, sessions, the work queue and scoped credentials over
// HTTP (docs/api.md, "Sessions, environments and the work queue" and
// "Authentication").

// queueObserved is the real backend with one observation point: it
// reports each poll that found nothing, so a test knows a blocking poll
// has subscribed, looked, and is about to wait; a session created after
// that can only reach it by waking it.
type queueObserved struct {
	store.Backend
	emptyPolls chan struct{}
	polls      atomic.Int64 // Poll calls returned
}

func (b *queueObserved) Poll(ctx context.Context, in store.PollInput) (*store.Work, error) {
	w, err := b.Backend.Poll(ctx, in)
	b.polls.Add(1)
	if err == nil && w == nil {
		select {
		case b.emptyPolls <- struct{}{}:
		default:
		}
	}
	return w, err
}

// startWorkServer is startServer with the poll observation point.
func startWorkServer(t *testing.T, dsn string) (*testServer, *queueObserved) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := server.EnsureAdminKey(ctx, db, testKey, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	qo := &queueObserved{Backend: db, emptyPolls: make(chan struct{}, 1)}
	ob := &observedBackend{Backend: qo, emptyReads: make(chan struct{}, 1)}
	srv, err := server.New(server.Options{Backend: ob, Log: warnLog()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(srv.BeginShutdown)
	return &testServer{URL: hs.URL, srv: srv, ob: ob}, qo
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// newEnv creates an environment and returns it with its key.
func (s *testServer) newEnv(t *testing.T, name string) (store.Environment, string) {
	t.Helper()
	var e store.Environment
	s.request(t, "POST", "/v1/environments", map[string]any{"name": name}).decode(t, &e)
	if !strings.HasPrefix(e.ID, "env_") || !strings.HasPrefix(e.EnvironmentKey, "sk-memfs-env-") {
		t.Fatalf("created environment %+v: want an env_ id and an environment_key", e)
	}
	return e, e.EnvironmentKey
}

// memoryStore is a session resource as a client sends it.
func memoryStore(id, access string) map[string]any {
	r := map[string]any{"type": "memory_store", "memory_store_id": id}
	if access != "" {
		r["access"] = access
	}
	return r
}

// newSession creates a session on envID with the given resources.
func (s *testServer) newSession(t *testing.T, envID string, resources ...map[string]any) store.Session {
	t.Helper()
	var sess store.Session
	s.request(t, "POST", "/v1/sessions", map[string]any{"environment_id": envID, "resources": resources}).decode(t, &sess)
	if !strings.HasPrefix(sess.ID, "sesn_") {
		t.Fatalf("created session %+v", sess)
	}
	return sess
}

// sessionToken decodes a work item's secret: base64url (no padding) of a
// JSON object whose sessions_token is the token.
func sessionToken(t *testing.T, secret *string) string {
	t.Helper()
	if secret == nil {
		t.Fatal("work item has no secret")
	}
	if strings.ContainsAny(*secret, "+/=") {
		t.Errorf("secret %q is not unpadded base64url", *secret)
	}
	raw, err := base64.RawURLEncoding.DecodeString(*secret)
	if err != nil {
		t.Fatalf("secret %q is not base64url: %v", *secret, err)
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("secret decodes to %q, not a JSON object: %v", raw, err)
	}
	tok, _ := fields["sessions_token"].(string)
	if !strings.HasPrefix(tok, "sk-memfs-session-") {
		t.Fatalf("secret %s has no sessions_token", raw)
	}
	return tok
}

// claim polls envID with its key, expecting an item, acknowledges it and
// returns it (as polled, with its secret) and its session token.
func (s *testServer) claim(t *testing.T, envID, key string) (store.Work, string) {
	t.Helper()
	var w store.Work
	s.requestWith(t, "GET", "/v1/environments/"+envID+"/work/poll", nil, bearer(key)).decode(t, &w)
	if w.ID == "" {
		t.Fatalf("poll of %s found nothing", envID)
	}
	tok := sessionToken(t, w.Secret)
	var a store.Work
	s.requestWith(t, "POST", "/v1/environments/"+envID+"/work/"+w.ID+"/ack", nil, bearer(key)).decode(t, &a)
	if a.State != store.WorkStarting || a.Secret != nil {
		t.Fatalf("ack answered %+v, want starting with secret null", a)
	}
	return w, tok
}

// heartbeatPath is a heartbeat URL with its query.
func heartbeatPath(envID, workID, expected string) string {
	return "/v1/environments/" + envID + "/work/" + workID + "/heartbeat?expected_last_heartbeat=" + expected
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestEnvironmentKeyShownOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		r := s.request(t, "POST", "/v1/environments", map[string]any{"name": "e", "config": map[string]any{"type": "self_hosted"}})
		var raw map[string]any
		r.decode(t, &raw)
		want := []string{"archived_at", "config", "created_at", "description", "environment_key", "id", "metadata", "name", "scope", "type", "updated_at"}
		if got := keysOf(raw); !slices.Equal(got, want) {
			t.Errorf("create answered fields %q, want %q", got, want)
		}
		if raw["description"] != nil || raw["archived_at"] != nil || raw["type"] != "environment" {
			t.Errorf("create answered %s: want description and archived_at null, type environment", r.Body)
		}
		id, key := raw["id"].(string), raw["environment_key"].(string)
		for _, q := range []struct {
			hdr  http.Header
			path string
		}{
			{http.Header{"X-Api-Key": {testKey}}, "/v1/environments/" + id},
			{bearer(key), "/v1/environments/" + id},
			{http.Header{"X-Api-Key": {testKey}}, "/v1/environments"},
		} {
			got := s.requestWith(t, "GET", q.path, nil, q.hdr)
			if got.Status != 200 || strings.Contains(string(got.Body), "environment_key") || strings.Contains(string(got.Body), key) {
				t.Errorf("GET %s: %s; want 200 without the key", q.path, got)
			}
		}
		wantError(t, "environment without a name", s.request(t, "POST", "/v1/environments", map[string]any{}), 400, "invalid_request_error")
		wantError(t, "environment with an empty name", s.request(t, "POST", "/v1/environments", map[string]any{"name": ""}), 400, "invalid_request_error")
	})
}

func TestSessionCreateRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, envKey := s.newEnv(t, "env")
		gone, _ := s.newEnv(t, "gone")
		s.request(t, "POST", "/v1/environments/"+gone.ID+"/archive", nil).decode(t, &store.Environment{})
		var ids []string
		for i := range 9 {
			ids = append(ids, s.createStore(t, fmt.Sprintf("store %d", i)))
		}
		archived := s.createStore(t, "archived")
		s.request(t, "POST", "/v1/memory_stores/"+archived+"/archive", nil).decode(t, &store.Store{})
		stores := func(n int) []map[string]any {
			var rs []map[string]any
			for _, id := range ids[:n] {
				rs = append(rs, memoryStore(id, ""))
			}
			return rs
		}
		withInstructions := func(n int) []map[string]any {
			r := memoryStore(ids[0], "")
			r["instructions"] = strings.Repeat("i", n)
			return []map[string]any{r}
		}

		for _, tc := range []struct {
			what   string
			body   any
			status int
			typ    string
			code   string
		}{
			{"9 stores", map[string]any{"environment_id": env.ID, "resources": stores(9)}, 400, "invalid_request_error", "too_many_memory_stores"},
			{"the same store twice", map[string]any{"environment_id": env.ID, "resources": []any{memoryStore(ids[0], ""), memoryStore(ids[1], ""), memoryStore(ids[0], "read_only")}}, 400, "invalid_request_error", "duplicate_memory_store"},
			{"an archived store", map[string]any{"environment_id": env.ID, "resources": []any{memoryStore(archived, "read_only")}}, 400, "invalid_request_error", "memory_store_archived"},
			{"an unknown store", map[string]any{"environment_id": env.ID, "resources": []any{memoryStore("memstore_nope", "")}}, 400, "invalid_request_error", "memory_store_not_found"},
			{"4097-character instructions", map[string]any{"environment_id": env.ID, "resources": withInstructions(4097)}, 400, "invalid_request_error", "instructions_too_long"},
			{"access write", map[string]any{"environment_id": env.ID, "resources": []any{memoryStore(ids[0], "write")}}, 400, "invalid_request_error", "invalid_access"},
			{"no memory_store_id", map[string]any{"environment_id": env.ID, "resources": []any{map[string]any{"type": "memory_store"}}}, 400, "invalid_request_error", "invalid_resource"},
			{"missing environment_id", map[string]any{"resources": stores(1)}, 400, "invalid_request_error", ""},
			{"empty environment_id", map[string]any{"environment_id": "", "resources": stores(1)}, 400, "invalid_request_error", ""},
			{"an archived environment", map[string]any{"environment_id": gone.ID, "resources": stores(1)}, 400, "invalid_request_error", ""},
			{"an unknown environment", map[string]any{"environment_id": "env_nope", "resources": stores(1)}, 404, "not_found_error", ""},
			{"17 metadata pairs", map[string]any{"environment_id": env.ID, "metadata": manyPairs(17)}, 400, "invalid_request_error", ""},
			{"not JSON", `{"environment_id":`, 400, "invalid_request_error", ""},
			{"resources not an array", map[string]any{"environment_id": env.ID, "resources": "memstore_1"}, 400, "invalid_request_error", ""},
		} {
			e := wantError(t, tc.what, s.request(t, "POST", "/v1/sessions", tc.body), tc.status, tc.typ)
			if tc.code != "" && e.Error.Details["error_code"] != tc.code {
				t.Errorf("%s: error_code %q, want %q", tc.what, e.Error.Details["error_code"], tc.code)
			}
		}
		// Nothing was created or queued.
		var sessions store.Page[store.Session]
		s.request(t, "GET", "/v1/sessions", nil).decode(t, &sessions)
		if len(sessions.Data) != 0 {
			t.Errorf("refused creates made %d sessions", len(sessions.Data))
		}
		var st store.WorkQueueStats
		s.requestWith(t, "GET", "/v1/environments/"+env.ID+"/work/stats", nil, bearer(envKey)).decode(t, &st)
		if st.Depth != 0 || st.Pending != 0 {
			t.Errorf("refused creates queued work: %+v", st)
		}

		// The limits themselves are allowed: 8 stores, 4,096 characters.
		s.newSession(t, env.ID, stores(8)...)
		sess := s.newSession(t, env.ID, withInstructions(4096)...)
		if in := sess.Resources[0].Instructions; in == nil || len(*in) != 4096 {
			t.Errorf("4096-character instructions came back as %v", in)
		}
	})
}

func manyPairs(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func TestSessionCreateShape(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, _ := s.newEnv(t, "env")
		a := s.createStore(t, "Team Notes")
		b := s.createStore(t, "team_notes")
		r := s.request(t, "POST", "/v1/sessions", map[string]any{
			"environment_id": env.ID,
			"resources": []any{memoryStore(a, ""), memoryStore(b, "read_only"),
				map[string]any{"type": "github_repository", "url": "https://github.com/x/y", "mount_path": "/src"}},
		})
		var raw map[string]any
		r.decode(t, &raw)
		wantKeys := []string{"agent", "archived_at", "budget", "created_at", "deployment_id", "environment_id", "id", "metadata",
			"outcome_evaluations", "resources", "stats", "status", "title", "type", "updated_at", "usage", "vault_ids"}
		if got := keysOf(raw); !slices.Equal(got, wantKeys) {
			t.Errorf("session fields %q, want %q", got, wantKeys)
		}
		agent, _ := raw["agent"].(map[string]any)
		if raw["status"] != "idle" || raw["type"] != "session" || agent["type"] != "agent" || agent["id"] != store.DefaultAgentID || raw["title"] != nil {
			t.Errorf("session %s: want status idle, type session, the default agent, title null", r.Body)
		}
		res, _ := raw["resources"].([]any)
		if len(res) != 2 {
			t.Fatalf("resources %v: want the two memory stores only", raw["resources"])
		}
		wantRes := []string{"access", "created_at", "description", "id", "instructions", "memory_store_id", "mount_path", "name", "type", "updated_at"}
		for i, want := range []map[string]any{
			{"type": "memory_store", "memory_store_id": a, "access": "read_write", "name": "Team Notes", "description": "", "instructions": nil, "mount_path": "/mnt/memory/team-notes"},
			{"type": "memory_store", "memory_store_id": b, "access": "read_only", "name": "team_notes", "description": "", "instructions": nil, "mount_path": "/mnt/memory/team-notes-2"},
		} {
			got := res[i].(map[string]any)
			if k := keysOf(got); !slices.Equal(k, wantRes) {
				t.Errorf("resource %d fields %q, want %q", i, k, wantRes)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("resource %d: %s = %v, want %v", i, k, got[k], v)
				}
			}
		}
	})
}

func TestWorkPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s, qo := startWorkServer(t, dsn)
		env, key := s.newEnv(t, "env")
		pollPath := "/v1/environments/" + env.ID + "/work/poll"

		// Nothing queued, no block_ms: 200, JSON null, at once.
		start := time.Now()
		r := s.requestWith(t, "GET", pollPath, nil, bearer(key))
		if r.Status != 200 || strings.TrimSuffix(string(r.Body), "\n") != "null" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("empty poll: %d %q Content-Type %q; want 200, body null, application/json", r.Status, r.Body, r.Header.Get("Content-Type"))
		}
		if d := time.Since(start); d > 900*time.Millisecond { // a blocking poll would hold it 999 ms
			t.Errorf("a non-blocking empty poll took %v", d)
		}
		for _, q := range []string{"block_ms=0", "block_ms=1000", "block_ms=-1", "block_ms=abc", "block_ms=1.5", "reclaim_older_than_ms=-1", "reclaim_older_than_ms=x"} {
			wantError(t, "poll "+q, s.requestWith(t, "GET", pollPath+"?"+q, nil, bearer(key)), 400, "invalid_request_error")
		}
		// A short block on an empty queue waits it out, then answers null.
		start = time.Now()
		r = s.requestWith(t, "GET", pollPath+"?block_ms=50", nil, bearer(key))
		if r.Status != 200 || strings.TrimSpace(string(r.Body)) != "null" || time.Since(start) < 50*time.Millisecond {
			t.Errorf("poll block_ms=50: %s after %v; want null after at least 50ms", r, time.Since(start))
		}
		wantError(t, "poll of an unknown environment", s.requestWith(t, "GET", "/v1/environments/env_nope/work/poll", nil, bearer(key)), 403, "permission_error")

		// A blocking poll is woken by a session create and returns its item.
		select {
		case <-qo.emptyPolls:
		default:
		}
		type answer struct {
			r   response
			err error
		}
		done := make(chan answer, 1)
		go func() {
			r, err := s.send(context.Background(), "GET", pollPath+"?block_ms=900", nil, http.Header{"Authorization": {"Bearer " + key}, "Anthropic-Worker-Id": {"worker-1"}})
			done <- answer{r, err}
		}()
		select {
		case <-qo.emptyPolls:
		case <-time.After(10 * time.Second):
			t.Fatal("the blocking poll never looked at the queue")
		}
		sess := s.newSession(t, env.ID)
		var w store.Work
		select {
		case a := <-done:
			if a.err != nil {
				t.Fatal(a.err)
			}
			a.r.decode(t, &w)
		case <-time.After(10 * time.Second):
			t.Fatal("the blocking poll did not answer")
		}
		if w.Data != (store.WorkData{Type: "session", ID: sess.ID}) || w.State != store.WorkQueued || w.EnvironmentID != env.ID || w.Type != "work" {
			t.Fatalf("woken poll answered %+v, want %s's item, queued", w, sess.ID)
		}
		sessionToken(t, w.Secret)

		// The secret is only in the poll answer.
		var got store.Work
		s.request(t, "GET", "/v1/environments/"+env.ID+"/work/"+w.ID, nil).decode(t, &got)
		if got.Secret != nil || got.ID != w.ID {
			t.Errorf("GET work: %+v, want secret null", got)
		}
		var raw map[string]any
		s.request(t, "GET", "/v1/environments/"+env.ID+"/work/"+w.ID, nil).decode(t, &raw)
		wantKeys := []string{"acknowledged_at", "created_at", "data", "environment_id", "id", "latest_heartbeat_at", "metadata", "secret", "started_at", "state", "stop_requested_at", "stopped_at", "type"}
		if k := keysOf(raw); !slices.Equal(k, wantKeys) {
			t.Errorf("work fields %q, want %q", k, wantKeys)
		}
		// The claimed item is not offered again at once; the worker id counts.
		r = s.requestWith(t, "GET", pollPath, nil, bearer(key))
		if strings.TrimSpace(string(r.Body)) != "null" {
			t.Errorf("second poll: %s, want null", r)
		}
		var st map[string]any
		s.requestWith(t, "GET", "/v1/environments/"+env.ID+"/work/stats", nil, bearer(key)).decode(t, &st)
		if want := map[string]any{"type": "work_queue_stats", "depth": 0.0, "pending": 1.0, "oldest_queued_at": st["oldest_queued_at"], "workers_polling": 1.0}; !reflect.DeepEqual(st, want) || st["oldest_queued_at"] == nil {
			t.Errorf("stats %v, want %v with oldest_queued_at set", st, want)
		}
		// reclaim_older_than_ms=1 hands the unacknowledged item out again.
		deadline := time.Now().Add(10 * time.Second)
		for ; ; time.Sleep(5 * time.Millisecond) {
			var again *store.Work
			s.requestWith(t, "GET", pollPath+"?reclaim_older_than_ms=1", nil, bearer(key)).decode(t, &again)
			if again != nil {
				if again.ID != w.ID || sessionToken(t, again.Secret) == sessionToken(t, w.Secret) {
					t.Errorf("reclaimed %+v, want %s with a new token", again, w.ID)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the item was never reclaimed")
			}
		}
	})
}

func TestWorkLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		env, key := s.newEnv(t, "env")
		sess := s.newSession(t, env.ID)
		w, _ := s.claim(t, env.ID, key)
		base := "/v1/environments/" + env.ID + "/work/" + w.ID

		wantError(t, "heartbeat without expected_last_heartbeat", s.requestWith(t, "POST", base+"/heartbeat", nil, bearer(key)), 400, "invalid_request_error")
		for _, ttl := range []string{"0", "3601", "x"} {
			wantError(t, "desired_ttl_seconds="+ttl, s.requestWith(t, "POST", heartbeatPath(env.ID, w.ID, "NO_HEARTBEAT")+"&desired_ttl_seconds="+ttl, nil, bearer(key)), 400, "invalid_request_error")
		}

		// A refused first heartbeat: no lease yet.
		r := s.requestWith(t, "POST", heartbeatPath(env.ID, w.ID, "hb-1"), nil, bearer(key))
		want412(t, "first heartbeat expecting hb-1", r, "hb-1", map[string]any{
			"state": "starting", "last_heartbeat": nil, "lease_updated_at": nil, "lease_extended": false, "ttl_seconds": 30.0})

		var hb map[string]any
		s.requestWith(t, "POST", heartbeatPath(env.ID, w.ID, "NO_HEARTBEAT"), nil, bearer(key)).decode(t, &hb)
		last, _ := hb["last_heartbeat"].(string)
		if want := map[string]any{"type": "work_heartbeat", "last_heartbeat": last, "lease_extended": true, "state": "active", "ttl_seconds": 30.0}; !reflect.DeepEqual(hb, want) || last == "" {
			t.Fatalf("first heartbeat %v, want %v with a last_heartbeat", hb, want)
		}
		var work store.Work
		s.request(t, "GET", base, nil).decode(t, &work)
		if work.LatestHeartbeatAt == nil {
			t.Fatal("no latest_heartbeat_at after a heartbeat")
		}
		leaseAt := work.LatestHeartbeatAt.Format(time.RFC3339Nano)

		// A mismatch is 412 with the current lease, exactly in the official shape.
		r = s.requestWith(t, "POST", heartbeatPath(env.ID, w.ID, "NO_HEARTBEAT"), nil, bearer(key))
		want412(t, "second NO_HEARTBEAT", r, "NO_HEARTBEAT", map[string]any{
			"state": "active", "last_heartbeat": last, "lease_updated_at": leaseAt, "lease_extended": false, "ttl_seconds": 30.0})

		var hb2 store.Heartbeat
		s.requestWith(t, "POST", heartbeatPath(env.ID, w.ID, last)+"&desired_ttl_seconds=10", nil, bearer(key)).decode(t, &hb2)
		if hb2.TTLSeconds != 10 || hb2.LastHeartbeat == last || !hb2.LeaseExtended || hb2.State != "active" {
			t.Errorf("echoed heartbeat %+v, want ttl 10, a new value, extended, active", hb2)
		}

		// Archiving the session moves the item to stopping; the heartbeat
		// says so whatever it echoes.
		var archived store.Session
		s.request(t, "POST", "/v1/sessions/"+sess.ID+"/archive", nil).decode(t, &archived)
		if archived.Status != "terminated" || archived.ArchivedAt == nil {
			t.Errorf("archived session %+v", archived)
		}
		var hb3 store.Heartbeat
		s.requestWith(t, "POST", heartbeatPath(env.ID, w.ID, "stale"), nil, bearer(key)).decode(t, &hb3)
		if hb3.State != "stopping" {
			t.Errorf("heartbeat after archive: %+v, want stopping", hb3)
		}

		// Stop: {} → stopping (again is fine), {"force":true} → stopped, then 409.
		var st store.Work
		s.requestWith(t, "POST", base+"/stop", map[string]any{}, bearer(key)).decode(t, &st)
		if st.State != "stopping" || st.ID != w.ID || st.Secret != nil {
			t.Errorf("stop {}: %+v, want the work object, stopping", st)
		}
		s.requestWith(t, "POST", base+"/stop", nil, bearer(key)).decode(t, &st)
		if st.State != "stopping" {
			t.Errorf("stop without a body: %s, want stopping", st.State)
		}
		s.requestWith(t, "POST", base+"/stop", map[string]any{"force": true}, bearer(key)).decode(t, &st)
		if st.State != "stopped" || st.StoppedAt == nil {
			t.Errorf("stop force: %+v, want stopped", st)
		}
		for _, body := range []any{map[string]any{"force": true}, map[string]any{}} {
			wantError(t, "stop a stopped item", s.requestWith(t, "POST", base+"/stop", body, bearer(key)), 409, "invalid_request_error")
		}
		wantError(t, "ack a stopped item", s.requestWith(t, "POST", base+"/ack", nil, bearer(key)), 409, "invalid_request_error")
		wantError(t, "stop with a bad body", s.requestWith(t, "POST", base+"/stop", `{"force":"yes"}`, bearer(key)), 400, "invalid_request_error")
		wantError(t, "stop an unknown item", s.requestWith(t, "POST", "/v1/environments/"+env.ID+"/work/work_nope/stop", map[string]any{}, bearer(key)), 404, "not_found_error")
		wantError(t, "ack an unknown item", s.requestWith(t, "POST", "/v1/environments/"+env.ID+"/work/work_nope/ack", nil, bearer(key)), 404, "not_found_error")

		// Metadata (admin): a merge patch.
		var md store.Work
		s.request(t, "POST", base, map[string]any{"metadata": map[string]any{"a": "1", "b": "2"}}).decode(t, &md)
		if !reflect.DeepEqual(md.Metadata, map[string]string{"a": "1", "b": "2"}) {
			t.Errorf("metadata %v, want {a: 1, b: 2}", md.Metadata)
		}
		var md2 store.Work // a fresh value: decoding into md would merge maps
		s.request(t, "POST", base, map[string]any{"metadata": map[string]any{"a": nil}}).decode(t, &md2)
		if !reflect.DeepEqual(md2.Metadata, map[string]string{"b": "2"}) {
			t.Errorf("metadata %v, want {b: 2}", md2.Metadata)
		}
	})
}

// want412 checks a refused heartbeat: 412, x-should-retry false, and the
// official body (lib/environments worker_test.go's leaseLostBody).
func want412(t *testing.T, what string, r response, expected string, current map[string]any) {
	t.Helper()
	if r.Status != http.StatusPreconditionFailed || r.Header.Get("x-should-retry") != "false" {
		t.Fatalf("%s: %s (x-should-retry %q), want 412 with x-should-retry false", what, r, r.Header.Get("x-should-retry"))
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("%s: body %s: %v", what, r.Body, err)
	}
	actual := "NULL"
	if s, ok := current["last_heartbeat"].(string); ok {
		actual = s
	}
	want := map[string]any{
		"type": "error",
		"error": map[string]any{
			"type":    "invalid_request_error",
			"message": "Heartbeat precondition failed: expected " + expected + ", actual was " + actual,
			"details": map[string]any{
				"error_code":       "heartbeat_precondition_failed",
				"error_visibility": "user_facing",
				"current_state":    current,
			},
		},
		"request_id": r.Header.Get("request-id"),
	}
	if !reflect.DeepEqual(body, want) {
		gotJ, _ := json.Marshal(body)
		wantJ, _ := json.Marshal(want)
		t.Errorf("%s: 412 body\n got  %s\n want %s", what, gotJ, wantJ)
	}
}

func TestCredentialScopes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, sqlstore.Options{})
		admin := http.Header{"X-Api-Key": {testKey}}
		envA, keyA := s.newEnv(t, "a")
		envB, keyB := s.newEnv(t, "b")
		rw := s.createStore(t, "rw")
		ro := s.createStore(t, "ro")
		other := s.createStore(t, "unattached")
		roMem := s.createMemory(t, ro, "/ro.md", "read only")
		s.createMemory(t, other, "/x.md", "x")
		s1 := s.newSession(t, envA.ID, memoryStore(rw, "read_write"), memoryStore(ro, "read_only"))
		s2 := s.newSession(t, envA.ID)
		s3 := s.newSession(t, envB.ID)
		w1, tok1 := s.claim(t, envA.ID, keyA)
		w2, tok2 := s.claim(t, envA.ID, keyA)
		w3, _ := s.claim(t, envB.ID, keyB)
		if w1.Data.ID != s1.ID || w2.Data.ID != s2.ID || w3.Data.ID != s3.ID {
			t.Fatalf("claimed %s %s %s, want the items of %s %s %s", w1.Data.ID, w2.Data.ID, w3.Data.ID, s1.ID, s2.ID, s3.ID)
		}
		workA := "/v1/environments/" + envA.ID + "/work"
		workB := "/v1/environments/" + envB.ID + "/work"

		type call struct {
			method, path string
			body         any
			status       int // 200, or the error status
		}
		check := func(who string, hdr http.Header, calls []call) {
			t.Helper()
			for _, c := range calls {
				r := s.requestWith(t, c.method, c.path, c.body, hdr)
				what := who + ": " + c.method + " " + c.path
				switch c.status {
				case 200:
					if r.Status != 200 {
						t.Errorf("%s: %s, want 200", what, r)
					}
				case 401:
					wantError(t, what, r, 401, "authentication_error")
				case 403:
					wantError(t, what, r, 403, "permission_error")
				case 404:
					wantError(t, what, r, 404, "not_found_error")
				default:
					t.Fatalf("bad status %d", c.status)
				}
			}
		}
		memCalls := func(storeID string, status int) []call {
			return []call{
				{"GET", "/v1/memory_stores/" + storeID, nil, status},
				{"GET", "/v1/memory_stores/" + storeID + "/memories", nil, status},
				{"POST", "/v1/memory_stores/" + storeID + "/memories", map[string]any{"path": "/nope.md", "content": "x"}, status},
				{"GET", "/v1/memory_stores/" + storeID + "/memory_versions", nil, status},
				{"GET", "/v1/memory_stores/" + storeID + "/changes", nil, status},
			}
		}
		adminOnly := func(status int) []call {
			return []call{
				{"POST", "/v1/environments", map[string]any{"name": "x"}, status},
				{"GET", "/v1/environments", nil, status},
				{"POST", "/v1/environments/" + envA.ID + "/healthcheck", nil, status},
				{"POST", "/v1/sessions", map[string]any{"environment_id": envA.ID}, status},
				{"GET", "/v1/sessions", nil, status},
				{"POST", "/v1/sessions/" + s2.ID + "/archive", nil, status},
				{"GET", workA + "/" + w1.ID, nil, status},
				{"POST", workA + "/" + w1.ID, map[string]any{"metadata": map[string]any{"k": "v"}}, status},
				{"POST", "/v1/memory_stores", map[string]any{"name": "x"}, status},
				{"GET", "/v1/memory_stores", nil, status},
				{"POST", "/v1/environments/" + envA.ID + "/archive", nil, status}, // last: it ends the environment
			}
		}

		// The environment key: its own environment's queue and sessions.
		rwBefore, roBefore, otherBefore := s.state(t, rw), s.state(t, ro), s.state(t, other)
		check("environment key", bearer(keyA), append(append(append([]call{
			{"GET", workA + "/poll", nil, 200},
			{"POST", workA + "/" + w1.ID + "/ack", nil, 200},
			{"POST", workA + "/" + w2.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, 200},
			{"GET", workA, nil, 200},
			{"GET", workA + "/stats", nil, 200},
			{"GET", "/v1/sessions/" + s1.ID, nil, 200},
			{"GET", "/v1/environments/" + envA.ID, nil, 200},
			// Another environment.
			{"GET", workB + "/poll", nil, 403},
			{"POST", workB + "/" + w3.ID + "/ack", nil, 403},
			{"POST", workB + "/" + w3.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, 403},
			{"POST", workB + "/" + w3.ID + "/stop", map[string]any{"force": true}, 403},
			{"GET", workB, nil, 403},
			{"GET", workB + "/stats", nil, 403},
			{"GET", "/v1/environments/" + envB.ID, nil, 403},
			{"GET", "/v1/sessions/" + s3.ID, nil, 404},
			// Another environment's item through this one's path.
			{"POST", workA + "/" + w3.ID + "/stop", map[string]any{"force": true}, 404},
		}, memCalls(rw, 403)...), memCalls(other, 403)...), adminOnly(403)...))
		s.unchanged(t, "the environment key", rw, rwBefore)
		s.unchanged(t, "the environment key", other, otherBefore)

		// A session token: its session, its item, its stores.
		check("session token", bearer(tok1), append(append(append([]call{
			{"GET", "/v1/sessions/" + s1.ID, nil, 200},
			{"GET", "/v1/sessions/" + s2.ID, nil, 404},
			{"GET", "/v1/sessions/" + s3.ID, nil, 404},
			{"POST", workA + "/" + w1.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, 200},
			{"POST", workA + "/" + w2.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, 403},
			{"POST", workA + "/" + w2.ID + "/stop", map[string]any{"force": true}, 403},
			{"POST", workB + "/" + w3.ID + "/stop", map[string]any{"force": true}, 403},
			{"GET", workA + "/poll", nil, 403},
			{"POST", workA + "/" + w1.ID + "/ack", nil, 403},
			{"GET", workA, nil, 403},
			{"GET", workA + "/stats", nil, 403},
			{"GET", "/v1/environments/" + envA.ID, nil, 403},
			// The read-only attachment reads but never writes.
			{"GET", "/v1/memory_stores/" + ro + "/memories", nil, 200},
			{"GET", "/v1/memory_stores/" + ro + "/memories/" + roMem.ID, nil, 200},
			{"POST", "/v1/memory_stores/" + ro + "/memories", map[string]any{"path": "/new.md", "content": "x"}, 403},
			{"POST", "/v1/memory_stores/" + ro + "/memories/" + roMem.ID, map[string]any{"content": "changed"}, 403},
			{"DELETE", "/v1/memory_stores/" + ro + "/memories/" + roMem.ID, nil, 403},
			{"POST", "/v1/memory_stores/" + ro + "/memory_versions/" + roMem.MemoryVersionID + "/redact", nil, 403},
		}, memCalls(other, 404)...), adminOnly(403)...), memCalls(rw, 200)[:2]...))
		s.unchanged(t, "the session token", ro, roBefore)
		s.unchanged(t, "the session token", other, otherBefore)
		// A session without stores sees none.
		check("storeless session token", bearer(tok2), memCalls(rw, 404))
		s.unchanged(t, "the storeless session token", rw, rwBefore)

		// Writes through the token are attributed to the session.
		var m store.Memory
		s.requestWith(t, "POST", "/v1/memory_stores/"+rw+"/memories", map[string]any{"path": "/by-session.md", "content": "v1"}, bearer(tok1)).decode(t, &m)
		s.requestWith(t, "POST", "/v1/memory_stores/"+rw+"/memories/"+m.ID, map[string]any{"content": "v2"}, bearer(tok1)).decode(t, &m)
		r := s.requestWith(t, "DELETE", "/v1/memory_stores/"+rw+"/memories/"+m.ID, nil, bearer(tok1))
		if r.Status != 200 {
			t.Fatalf("delete through the token: %s", r)
		}
		var versions struct {
			Data []map[string]any `json:"data"`
		}
		s.request(t, "GET", "/v1/memory_stores/"+rw+"/memory_versions", nil).decode(t, &versions)
		if len(versions.Data) != 3 {
			t.Fatalf("%d versions, want 3", len(versions.Data))
		}
		for _, v := range versions.Data {
			if want := map[string]any{"type": "session_actor", "session_id": s1.ID}; !reflect.DeepEqual(v["created_by"], want) {
				t.Errorf("version %v (%v) created_by %v, want %v", v["id"], v["operation"], v["created_by"], want)
			}
		}
		// An admin write is attributed to the admin key, for contrast.
		s.createMemory(t, rw, "/by-admin.md", "a")
		s.request(t, "GET", "/v1/memory_stores/"+rw+"/memory_versions?limit=1", nil).decode(t, &versions)
		if cb, _ := versions.Data[0]["created_by"].(map[string]any); cb["type"] != "api_actor" || cb["session_id"] != nil {
			t.Errorf("admin write created_by %v, want an api_actor", versions.Data[0]["created_by"])
		}

		// The token outlives stopping (the final sync) but not stopped.
		var st store.Work
		s.requestWith(t, "POST", workA+"/"+w1.ID+"/stop", map[string]any{}, bearer(tok1)).decode(t, &st)
		if st.State != "stopping" {
			t.Fatalf("stop through the token: %s, want stopping", st.State)
		}
		check("session token while stopping", bearer(tok1), []call{
			{"GET", "/v1/sessions/" + s1.ID, nil, 200},
			{"GET", "/v1/memory_stores/" + rw + "/memories", nil, 200},
			{"POST", "/v1/memory_stores/" + rw + "/memories", map[string]any{"path": "/final.md", "content": "final"}, 200},
		})
		s.requestWith(t, "POST", workA+"/"+w1.ID+"/stop", map[string]any{"force": true}, bearer(tok1)).decode(t, &st)
		if st.State != "stopped" {
			t.Fatalf("force-stop through the token: %s, want stopped", st.State)
		}
		rwStopped := s.state(t, rw)
		check("session token once stopped", bearer(tok1), []call{
			{"GET", "/v1/sessions/" + s1.ID, nil, 401},
			{"GET", "/v1/memory_stores/" + rw + "/memories", nil, 401},
			{"POST", "/v1/memory_stores/" + rw + "/memories", map[string]any{"path": "/late.md", "content": "late"}, 401},
			{"POST", workA + "/" + w1.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, 401},
			{"POST", workA + "/" + w1.ID + "/stop", map[string]any{"force": true}, 401},
		})
		s.unchanged(t, "the stopped token", rw, rwStopped)
		check("environment key after the stop", bearer(keyA), []call{{"GET", "/v1/sessions/" + s1.ID, nil, 200}})

		// The admin key: everything but poll and ack.
		check("admin key", admin, append([]call{
			{"GET", workA + "/poll", nil, 403},
			{"POST", workA + "/" + w2.ID + "/ack", nil, 403},
			{"POST", workB + "/" + w3.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, 200},
			{"GET", workA + "/" + w2.ID, nil, 200},
			{"GET", workA, nil, 200},
			{"GET", workA + "/stats", nil, 200},
			{"GET", "/v1/sessions/" + s3.ID, nil, 200},
			{"POST", workB + "/" + w3.ID + "/stop", map[string]any{"force": true}, 200},
		}, adminOnly(200)...))
	})
}
