package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// Environments and sessions (docs/api.md, "Sessions, environments and
// the work queue"). The work queue itself is in workqueue.go.

var environmentTests = []test{
	{"CreateGet", testEnvironmentCreateGet},
	{"ListArchive", testEnvironmentListArchive},
}

var sessionTests = []test{
	{"CreateResources", testSessionCreateResources},
	{"CreateRefused", testSessionCreateRefused},
	{"GetList", testSessionGetList},
	{"Archive", testSessionArchive},
}

// memoryRoot is the mount-path root the tests give CreateSession.
const memoryRoot = "/mnt/memory"

// keyHash is the hash a server would store for key.
func keyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// newEnv creates an environment whose key is "envkey-"+name.
func newEnv(t *testing.T, b store.Backend, name string) *store.Environment {
	t.Helper()
	e, err := b.CreateEnvironment(t.Context(), store.CreateEnvironmentInput{Name: name, KeyHash: keyHash("envkey-" + name)})
	ok(t, err, "CreateEnvironment "+name)
	return e
}

// attach is a memory_store resource as a client sends it.
func attach(storeID, access string, instructions *string) store.SessionResource {
	return store.SessionResource{MemoryStoreID: storeID, Access: access, Instructions: instructions}
}

// newSession validates the resources as the server does, then creates a
// session on envID.
func newSession(t *testing.T, b store.Backend, envID string, rs ...store.SessionResource) *store.Session {
	t.Helper()
	s, err := createSession(t, b, envID, rs...)
	ok(t, err, "CreateSession")
	return s
}

func createSession(t *testing.T, b store.Backend, envID string, rs ...store.SessionResource) (*store.Session, error) {
	t.Helper()
	if err := store.ValidateSessionResources(rs); err != nil {
		t.Fatalf("ValidateSessionResources: %v", err)
	}
	return b.CreateSession(t.Context(), store.CreateSessionInput{EnvironmentID: envID, Resources: rs, MemoryRoot: memoryRoot})
}

// allWork lists every work item of an environment, newest first.
func allWork(t *testing.T, b store.Backend, envID string) []store.Work {
	t.Helper()
	var all []store.Work
	page := ""
	for range maxPages {
		p, err := b.ListWork(t.Context(), envID, 100, page)
		ok(t, err, "ListWork")
		all = append(all, p.Data...)
		if page = p.NextPage; page == "" {
			return all
		}
	}
	t.Fatalf("ListWork: more than %d pages", maxPages)
	return nil
}

// workOf returns the only work item of a session.
func workOf(t *testing.T, b store.Backend, envID, sessionID string) *store.Work {
	t.Helper()
	var found []store.Work
	for _, w := range allWork(t, b, envID) {
		if w.Data.ID == sessionID {
			found = append(found, w)
		}
	}
	if len(found) != 1 {
		t.Fatalf("session %s has %d work items, want 1: %+v", sessionID, len(found), found)
	}
	return &found[0]
}

func testEnvironmentCreateGet(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	e := newEnv(t, b, "builders")
	if !strings.HasPrefix(e.ID, store.PrefixEnvironment) || e.Type != store.TypeEnvironment || e.Name != "builders" {
		t.Fatalf("created %+v, want an env_ id, type environment, name builders", e)
	}
	if e.Description != nil || e.ArchivedAt != nil || len(e.Metadata) != 0 || e.Metadata == nil {
		t.Errorf("created %+v: want description and archived_at nil, metadata {}", e)
	}
	if string(e.Config) != `{"type":"self_hosted"}` || e.Scope != "organization" {
		t.Errorf("defaults: config %s scope %q, want {\"type\":\"self_hosted\"} and organization", e.Config, e.Scope)
	}
	if e.EnvironmentKey != "" {
		t.Errorf("the backend returned an environment_key %q; only the server knows the key", e.EnvironmentKey)
	}
	checkUTC(t, "created_at", e.CreatedAt)
	if !e.UpdatedAt.Equal(e.CreatedAt) {
		t.Errorf("updated_at %v != created_at %v", e.UpdatedAt, e.CreatedAt)
	}
	got, err := b.GetEnvironment(ctx, e.ID)
	ok(t, err, "GetEnvironment")
	if !sameEnv(got, e) {
		t.Errorf("GetEnvironment = %+v, want %+v", got, e)
	}

	// The key's hash authenticates it, scoped to the environment.
	k, err := b.LookupAPIKey(ctx, keyHash("envkey-builders"))
	ok(t, err, "LookupAPIKey of the environment key")
	if k.Kind != store.KeyKindEnvironment || k.ScopeID != e.ID {
		t.Errorf("environment key = %+v, want kind environment scope %s", k, e.ID)
	}

	desc := "the build farm"
	cfg := json.RawMessage(`{"type":"cloud","networking":{"type":"unrestricted"}}`)
	e2, err := b.CreateEnvironment(ctx, store.CreateEnvironmentInput{Name: "cloudy", Description: &desc,
		Metadata: map[string]string{"team": "infra"}, Config: cfg, Scope: "account", KeyHash: keyHash("k2")})
	ok(t, err, "CreateEnvironment with every field")
	if e2.Description == nil || *e2.Description != desc || e2.Metadata["team"] != "infra" || len(e2.Metadata) != 1 ||
		e2.Scope != "account" || string(e2.Config) != string(cfg) {
		t.Errorf("created %+v (config %s), want every field kept", e2, e2.Config)
	}
	if e2.ID == e.ID {
		t.Error("two environments got the same id")
	}

	_, err = b.GetEnvironment(ctx, "env_nope")
	wantErr(t, err, store.ErrNotFound, "GetEnvironment unknown")
}

func sameEnv(a, b *store.Environment) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}

func envIDs(es []store.Environment) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// allEnvs pages through the environments with the given page size.
func allEnvs(t *testing.T, b store.Backend, limit int, archived bool) []store.Environment {
	t.Helper()
	var all []store.Environment
	page := ""
	for range maxPages {
		p, err := b.ListEnvironments(t.Context(), limit, page, archived)
		ok(t, err, "ListEnvironments")
		if len(p.Data) > limit {
			t.Fatalf("ListEnvironments limit %d returned %d", limit, len(p.Data))
		}
		all = append(all, p.Data...)
		if page = p.NextPage; page == "" {
			return all
		}
	}
	t.Fatalf("ListEnvironments: more than %d pages", maxPages)
	return nil
}

func testEnvironmentListArchive(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	var ids []string // newest first
	for _, n := range []string{"e1", "e2", "e3"} {
		ids = append([]string{newEnv(t, b, n).ID}, ids...)
	}
	equalStrings(t, "environments, limit 1", envIDs(allEnvs(t, b, 1, false)), ids)
	equalStrings(t, "environments, limit 100", envIDs(allEnvs(t, b, 100, false)), ids)

	a, err := b.ArchiveEnvironment(ctx, ids[1])
	ok(t, err, "ArchiveEnvironment")
	if a.ArchivedAt == nil {
		t.Fatalf("archived environment %+v has no archived_at", a)
	}
	checkUTC(t, "archived_at", *a.ArchivedAt)
	again, err := b.ArchiveEnvironment(ctx, ids[1])
	ok(t, err, "ArchiveEnvironment again")
	if again.ArchivedAt == nil || !again.ArchivedAt.Equal(*a.ArchivedAt) {
		t.Errorf("archiving twice moved archived_at from %v to %v", a.ArchivedAt, again.ArchivedAt)
	}
	got, err := b.GetEnvironment(ctx, ids[1])
	ok(t, err, "GetEnvironment archived")
	if got.ArchivedAt == nil {
		t.Error("GetEnvironment of an archived environment has no archived_at")
	}
	equalStrings(t, "environments without archived", envIDs(allEnvs(t, b, 1, false)), []string{ids[0], ids[2]})
	equalStrings(t, "environments with archived", envIDs(allEnvs(t, b, 2, true)), ids)

	_, err = b.ArchiveEnvironment(ctx, "env_nope")
	wantErr(t, err, store.ErrNotFound, "ArchiveEnvironment unknown")
}

func testSessionCreateResources(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	prefs, err := b.CreateStore(ctx, store.CreateStoreInput{Name: "User Preferences", Description: "what the user likes"})
	ok(t, err, "CreateStore")
	prefs2 := newStore(t, b, "user  preferences!")
	symbols := newStore(t, b, "!!!")
	prefs3 := newStore(t, b, "USER-PREFERENCES")
	instr := "read me first"

	s := newSession(t, b, env.ID,
		attach(prefs.ID, "", &instr),
		attach(prefs2.ID, store.AccessReadOnly, nil),
		attach(symbols.ID, store.AccessReadWrite, nil),
		attach(prefs3.ID, "", nil))
	if !strings.HasPrefix(s.ID, store.PrefixSession) || s.Type != store.TypeSession || s.EnvironmentID != env.ID {
		t.Fatalf("created %+v, want a sesn_ id, type session, environment %s", s, env.ID)
	}
	if s.Status != store.SessionIdle || s.ArchivedAt != nil || s.Metadata == nil || len(s.Metadata) != 0 || s.Title != nil {
		t.Errorf("created %+v: want status idle, archived_at nil, metadata {}, title nil", s)
	}
	def, err := b.GetAgent(t.Context(), store.DefaultAgentID, 0)
	ok(t, err, "GetAgent default")
	if string(s.Agent) != string(def.SessionView()) || string(s.Budget) != "null" || s.VaultIDs == nil || len(s.VaultIDs) != 0 ||
		s.OutcomeEvaluations == nil || s.Stats == nil || s.Usage == nil || s.DeploymentID != nil {
		t.Errorf("created %+v: want the default agent, budget null, vault_ids and outcome_evaluations [], stats and usage objects, deployment_id nil", s)
	}
	checkUTC(t, "session created_at", s.CreatedAt)

	type want struct{ store, access, name, desc, mount string }
	wants := []want{
		{prefs.ID, store.AccessReadWrite, "User Preferences", "what the user likes", memoryRoot + "/user-preferences"},
		{prefs2.ID, store.AccessReadOnly, "user  preferences!", "", memoryRoot + "/user-preferences-2"},
		{symbols.ID, store.AccessReadWrite, "!!!", "", memoryRoot + "/" + symbols.ID},
		{prefs3.ID, store.AccessReadWrite, "USER-PREFERENCES", "", memoryRoot + "/user-preferences-3"},
	}
	if len(s.Resources) != len(wants) {
		t.Fatalf("session has %d resources, want %d: %+v", len(s.Resources), len(wants), s.Resources)
	}
	seen := map[string]bool{}
	for i, w := range wants {
		r := s.Resources[i]
		got := want{r.MemoryStoreID, r.Access, r.Name, r.Description, r.MountPath}
		if got != w {
			t.Errorf("resource %d = %+v, want %+v", i, got, w)
		}
		if !strings.HasPrefix(r.ID, store.PrefixResource) || seen[r.ID] || r.Type != store.ResourceMemoryStore {
			t.Errorf("resource %d: id %q type %q, want a fresh sesrsc_ id and type memory_store", i, r.ID, r.Type)
		}
		seen[r.ID] = true
		checkUTC(t, "resource created_at", r.CreatedAt)
		checkUTC(t, "resource updated_at", r.UpdatedAt)
	}
	if in := s.Resources[0].Instructions; in == nil || *in != instr {
		t.Errorf("resource 0 instructions = %v, want %q", in, instr)
	}
	if in := s.Resources[1].Instructions; in != nil {
		t.Errorf("resource 1 instructions = %q, want nil", *in)
	}

	// Names and descriptions are snapshots: renaming the store later
	// changes neither them nor the mount path.
	newName, newDesc := "Renamed", "changed"
	_, err = b.UpdateStore(ctx, prefs.ID, store.UpdateStoreInput{Name: &newName, Description: &newDesc})
	ok(t, err, "UpdateStore")
	got, err := b.GetSession(ctx, s.ID)
	ok(t, err, "GetSession")
	if r := got.Resources[0]; r.Name != "User Preferences" || r.Description != "what the user likes" || r.MountPath != memoryRoot+"/user-preferences" {
		t.Errorf("after renaming the store the resource is %+v, want the snapshot", r)
	}
	// A new session sees the new name.
	s2 := newSession(t, b, env.ID, attach(prefs.ID, "", nil))
	if r := s2.Resources[0]; r.Name != newName || r.Description != newDesc || r.MountPath != memoryRoot+"/renamed" {
		t.Errorf("new session's resource %+v, want name %q description %q mount %s/renamed", r, newName, newDesc, memoryRoot)
	}
	// The -2 rule is per session: alone, the second store gets the bare slug.
	s4 := newSession(t, b, env.ID, attach(prefs2.ID, "", nil))
	if r := s4.Resources[0]; r.MountPath != memoryRoot+"/user-preferences" || r.Access != store.AccessReadWrite {
		t.Errorf("a session of its own gives %s mount %s access %s, want %s/user-preferences read_write", prefs2.ID, r.MountPath, r.Access, memoryRoot)
	}

	// No resources at all is a valid session.
	s3 := newSession(t, b, env.ID)
	if s3.Resources == nil || len(s3.Resources) != 0 {
		t.Errorf("session without resources has resources %+v, want []", s3.Resources)
	}

	// Creating a session queues exactly one item for it.
	for _, id := range []string{s.ID, s2.ID, s3.ID, s4.ID} {
		w := workOf(t, b, env.ID, id)
		if w.State != store.WorkQueued || w.Data.Type != "session" {
			t.Errorf("session %s's item is %+v, want queued, data type session", id, w)
		}
	}
}

func testSessionCreateRefused(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	gone := newEnv(t, b, "gone")
	_, err := b.ArchiveEnvironment(ctx, gone.ID)
	ok(t, err, "ArchiveEnvironment")
	live := newStore(t, b, "live")
	archived := newStore(t, b, "archived")
	_, err = b.ArchiveStore(ctx, archived.ID)
	ok(t, err, "ArchiveStore")

	for _, tc := range []struct {
		what  string
		env   string
		rs    []store.SessionResource
		kind  error
		code  string
		store string
	}{
		{"unknown environment", "env_nope", nil, store.ErrNotFound, "", ""},
		{"archived environment", gone.ID, nil, store.ErrInvalid, "", ""},
		{"unknown store", env.ID, []store.SessionResource{attach(live.ID, "", nil), attach("memstore_nope", "", nil)}, store.ErrInvalid, "memory_store_not_found", "memstore_nope"},
		{"archived store", env.ID, []store.SessionResource{attach(archived.ID, store.AccessReadOnly, nil)}, store.ErrInvalid, "memory_store_archived", archived.ID},
	} {
		_, err := createSession(t, b, tc.env, tc.rs...)
		wantErr(t, err, tc.kind, tc.what)
		var se *store.Error
		if tc.code != "" && (!errors.As(err, &se) || se.Code != tc.code || !strings.Contains(se.Message, tc.store)) {
			t.Errorf("%s: error %v, want code %s naming %s", tc.what, err, tc.code, tc.store)
		}
	}
	// Nothing was queued or created by the refused creates.
	if ws := allWork(t, b, env.ID); len(ws) != 0 {
		t.Errorf("refused creates queued %d items", len(ws))
	}
	p, err := b.ListSessions(ctx, 100, "")
	ok(t, err, "ListSessions")
	if len(p.Data) != 0 {
		t.Errorf("refused creates made %d sessions", len(p.Data))
	}
}

func testSessionGetList(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")
	st := newStore(t, b, "notes")
	title := "a title"
	ag := newAgent(t, b, "sessions")
	s1, err := b.CreateSession(ctx, store.CreateSessionInput{EnvironmentID: env.ID, Title: &title,
		Metadata: map[string]string{"k": "v"}, Agent: &store.AgentRef{ID: ag.ID}, VaultIDs: []string{"vlt_1"},
		Resources: []store.SessionResource{attach(st.ID, store.AccessReadOnly, nil)}, MemoryRoot: memoryRoot})
	ok(t, err, "CreateSession with every field")
	if s1.Title == nil || *s1.Title != title || s1.Metadata["k"] != "v" || string(s1.Agent) != string(ag.SessionView()) ||
		len(s1.VaultIDs) != 1 || s1.VaultIDs[0] != "vlt_1" {
		t.Errorf("created %+v, want title, metadata, agent and vault_ids kept", s1)
	}
	s2 := newSession(t, b, other.ID)
	s3 := newSession(t, b, env.ID)

	got, err := b.GetSession(ctx, s1.ID)
	ok(t, err, "GetSession")
	gj, _ := json.Marshal(got)
	sj, _ := json.Marshal(s1)
	if string(gj) != string(sj) {
		t.Errorf("GetSession:\n got  %s\n want %s", gj, sj)
	}
	_, err = b.GetSession(ctx, "sesn_nope")
	wantErr(t, err, store.ErrNotFound, "GetSession unknown")

	var ids []string
	page := ""
	for range maxPages {
		p, err := b.ListSessions(ctx, 1, page)
		ok(t, err, "ListSessions")
		if len(p.Data) > 1 {
			t.Fatalf("ListSessions limit 1 returned %d", len(p.Data))
		}
		for _, s := range p.Data {
			ids = append(ids, s.ID)
		}
		if page = p.NextPage; page == "" {
			break
		}
	}
	equalStrings(t, "sessions, newest first", ids, []string{s3.ID, s2.ID, s1.ID})
}

func testSessionArchive(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	// Items are offered oldest first: the first three are claimed in turn,
	// the last one never is.
	polled := newSession(t, b, env.ID) // claimed by a poll, not acknowledged
	acked := newSession(t, b, env.ID)  // starting
	active := newSession(t, b, env.ID) // active: heartbeating
	never := newSession(t, b, env.ID)  // queued, never polled
	claim := func(s *store.Session) *store.Work {
		t.Helper()
		want := workOf(t, b, env.ID, s.ID)
		got, err := b.Poll(ctx, store.PollInput{EnvironmentID: env.ID, WorkerID: "w", ReclaimAfter: time.Hour})
		ok(t, err, "Poll")
		if got == nil || got.ID != want.ID {
			t.Fatalf("Poll = %+v, want %s's item %s", got, s.ID, want.ID)
		}
		return got
	}
	wPolled := claim(polled)
	wAcked := claim(acked)
	_, err := b.Ack(ctx, env.ID, wAcked.ID)
	ok(t, err, "Ack")
	wActive := claim(active)
	_, err = b.Ack(ctx, env.ID, wActive.ID)
	ok(t, err, "Ack")
	hb, err := b.Heartbeat(ctx, env.ID, wActive.ID, store.HeartbeatInput{Expected: store.NoHeartbeat})
	ok(t, err, "Heartbeat")
	if hb.State != store.WorkActive {
		t.Fatalf("heartbeat state %s, want active", hb.State)
	}
	if s, _ := b.GetSession(ctx, active.ID); s == nil || s.Status != store.SessionRunning {
		t.Errorf("an active item's session has status %+v, want running", s)
	}

	for _, tc := range []struct {
		s           *store.Session
		state       string
		stoppedAtOK bool
	}{
		// Nobody acknowledged these: there is nothing to tear down, they stop.
		{never, store.WorkStopped, true},
		{polled, store.WorkStopped, true},
		// A worker has these: it must end the session, so they move to stopping.
		{acked, store.WorkStopping, false},
		{active, store.WorkStopping, false},
	} {
		a, err := b.ArchiveSession(ctx, tc.s.ID)
		ok(t, err, "ArchiveSession")
		if a.Status != store.SessionTerminated || a.ArchivedAt == nil {
			t.Errorf("archived session %+v, want status terminated and archived_at set", a)
			continue
		}
		checkUTC(t, "session archived_at", *a.ArchivedAt)
		w := workOf(t, b, env.ID, tc.s.ID)
		if w.State != tc.state || w.StopRequestedAt == nil || (w.StoppedAt != nil) != tc.stoppedAtOK {
			t.Errorf("after archiving, the item is %s (stop_requested_at %v, stopped_at %v), want %s with stopped_at set=%v",
				w.State, w.StopRequestedAt, w.StoppedAt, tc.state, tc.stoppedAtOK)
		}
		again, err := b.ArchiveSession(ctx, tc.s.ID)
		ok(t, err, "ArchiveSession again")
		if again.ArchivedAt == nil || !again.ArchivedAt.Equal(*a.ArchivedAt) || again.Status != store.SessionTerminated {
			t.Errorf("archiving twice: %+v, want archived_at %v kept", again, a.ArchivedAt)
		}
		if w2 := workOf(t, b, env.ID, tc.s.ID); w2.State != tc.state {
			t.Errorf("archiving twice moved the item to %s", w2.State)
		}
	}

	// The archived session's worker learns it from its next heartbeat,
	// whatever it echoes.
	hb, err = b.Heartbeat(ctx, env.ID, wActive.ID, store.HeartbeatInput{Expected: "not what the server has"})
	ok(t, err, "Heartbeat on a stopping item")
	if hb.State != store.WorkStopping {
		t.Errorf("heartbeat after archive: state %s, want stopping", hb.State)
	}
	// The worker that polled the stopped item can't acknowledge it.
	_, err = b.Ack(ctx, env.ID, wPolled.ID)
	wantErr(t, err, store.ErrConflict, "Ack of an item stopped by the archive")

	_, err = b.ArchiveSession(ctx, "sesn_nope")
	wantErr(t, err, store.ErrNotFound, "ArchiveSession unknown")
}
