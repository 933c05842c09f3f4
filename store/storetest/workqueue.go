package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// The work queue: claims, reclaims, leases and stops (workviews.go has
// the rest). Leases and reclaims run on the real clock with
// short windows (1 s TTL, 100 ms reclaim); the tests poll for the outcome
// with a deadline, never sleeping a fixed time.

var workTests = []test{
	{"ClaimAck", testWorkClaimAck},
	{"Reclaim", testWorkReclaim},
	{"Heartbeat", testWorkHeartbeat},
	{"LeaseLapse", testWorkLeaseLapse},
	{"Stop", testWorkStop},
	{"Metadata", testWorkMetadata},
	{"List", testWorkList},
	{"Stats", testWorkStats},
	{"Healthcheck", testWorkHealthcheck},
	{"Wakeups", testWorkWakeups},
	{"WakeOne", testWorkWakeOne},
	{"WakePassedOn", testWorkWakePassedOn},
	{"WakeHandedOn", testWorkWakeHandedOn},
	{"FeedWakesAll", testFeedWakesAll},
	{"ConcurrentPolls", testWorkConcurrentPolls},
}

// pollOnce polls env once as worker with the default reclaim window.
func pollOnce(t *testing.T, b store.Backend, envID, worker string) *store.Work {
	t.Helper()
	w, err := b.Poll(t.Context(), store.PollInput{EnvironmentID: envID, WorkerID: worker, ReclaimAfter: store.DefaultReclaimAfter})
	ok(t, err, "Poll")
	return w
}

// pollNothing fails unless a poll finds nothing.
func pollNothing(t *testing.T, b store.Backend, envID, what string) {
	t.Helper()
	if w := pollOnce(t, b, envID, "w-nothing"); w != nil {
		t.Fatalf("%s: Poll claimed %s (%s), want nothing", what, w.ID, w.State)
	}
}

// pollFor polls env until it offers an item (bounded by waitBound), with
// the given reclaim window, and returns it.
func pollFor(t *testing.T, b store.Backend, envID string, reclaim time.Duration) *store.Work {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		w, err := b.Poll(t.Context(), store.PollInput{EnvironmentID: envID, WorkerID: "w-wait", ReclaimAfter: reclaim})
		ok(t, err, "Poll")
		if w != nil {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("no item offered within %v", waitBound)
		}
		<-tick.C
	}
}

// claimAck polls once, expecting want's item, and acknowledges it.
func claimAck(t *testing.T, b store.Backend, envID string, want *store.Work) *store.Work {
	t.Helper()
	got := pollOnce(t, b, envID, "w1")
	if got == nil || got.ID != want.ID {
		t.Fatalf("Poll = %+v, want %s", got, want.ID)
	}
	w, err := b.Ack(t.Context(), envID, got.ID)
	ok(t, err, "Ack")
	return w
}

// heartbeat renews a lease, failing the test on an error.
func heartbeat(t *testing.T, b store.Backend, envID, workID, expected string, ttl time.Duration) *store.Heartbeat {
	t.Helper()
	hb, err := b.Heartbeat(t.Context(), envID, workID, store.HeartbeatInput{Expected: expected, TTL: ttl})
	ok(t, err, "Heartbeat expecting "+expected)
	return hb
}

// wantHeartbeatError checks a refused heartbeat: a *store.HeartbeatError
// (errors.Is ErrHeartbeat) carrying the expected value and the current lease.
func wantHeartbeatError(t *testing.T, err error, expected string, cur store.HeartbeatState, what string) {
	t.Helper()
	var he *store.HeartbeatError
	if !errors.Is(err, store.ErrHeartbeat) || !errors.As(err, &he) {
		t.Fatalf("%s: error %v (%T), want a *store.HeartbeatError", what, err, err)
	}
	if he.Expected != expected {
		t.Errorf("%s: Expected = %q, want %q", what, he.Expected, expected)
	}
	if !reflect.DeepEqual(he.Current, cur) {
		t.Errorf("%s: Current = %s, want %s", what, leaseString(he.Current), leaseString(cur))
	}
	actual := "NULL"
	if cur.LastHeartbeat != nil {
		actual = *cur.LastHeartbeat
	}
	if want := "Heartbeat precondition failed: expected " + expected + ", actual was " + actual; err.Error() != want {
		t.Errorf("%s: message %q, want %q", what, err.Error(), want)
	}
}

func leaseString(s store.HeartbeatState) string {
	last, at := "<nil>", "<nil>"
	if s.LastHeartbeat != nil {
		last = *s.LastHeartbeat
	}
	if s.LeaseUpdatedAt != nil {
		at = s.LeaseUpdatedAt.String()
	}
	return fmt.Sprintf("{state %s last_heartbeat %s lease_updated_at %s lease_extended %v ttl %d}", s.State, last, at, s.LeaseExtended, s.TTLSeconds)
}

// getWork reads an item.
func getWork(t *testing.T, b store.Backend, envID, workID string) *store.Work {
	t.Helper()
	w, err := b.GetWork(t.Context(), envID, workID)
	ok(t, err, "GetWork")
	return w
}

// wantTimes checks which of an item's optional timestamps are set.
func wantTimes(t *testing.T, what string, w *store.Work, acked, started, hb, stopReq, stopped bool) {
	t.Helper()
	for _, f := range []struct {
		name string
		v    *time.Time
		set  bool
	}{
		{"acknowledged_at", w.AcknowledgedAt, acked}, {"started_at", w.StartedAt, started},
		{"latest_heartbeat_at", w.LatestHeartbeatAt, hb}, {"stop_requested_at", w.StopRequestedAt, stopReq},
		{"stopped_at", w.StoppedAt, stopped},
	} {
		if (f.v != nil) != f.set {
			t.Errorf("%s: %s = %v, want set=%v", what, f.name, f.v, f.set)
		} else if f.v != nil {
			checkUTC(t, what+" "+f.name, *f.v)
		}
	}
}

func testWorkClaimAck(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")
	s1 := newSession(t, b, env.ID)
	s2 := newSession(t, b, env.ID)

	w1 := workOf(t, b, env.ID, s1.ID)
	if !strings.HasPrefix(w1.ID, store.PrefixWork) || w1.Type != store.TypeWork || w1.EnvironmentID != env.ID ||
		w1.Data != (store.WorkData{Type: "session", ID: s1.ID}) || w1.State != store.WorkQueued ||
		w1.Secret != nil || w1.Metadata == nil || len(w1.Metadata) != 0 {
		t.Fatalf("queued item %+v: want a work_ id, type work, data {session %s}, state queued, no secret, metadata {}", w1, s1.ID)
	}
	checkUTC(t, "work created_at", w1.CreatedAt)
	wantTimes(t, "queued", w1, false, false, false, false, false)
	w2 := workOf(t, b, env.ID, s2.ID)

	// Oldest first; a claimed item is not offered again within the
	// reclaim window, to this worker or another.
	got := pollOnce(t, b, env.ID, "w1")
	if got == nil || got.ID != w1.ID || got.State != store.WorkQueued || got.Data != w1.Data || !got.CreatedAt.Equal(w1.CreatedAt) {
		t.Fatalf("first Poll = %+v, want %s queued", got, w1.ID)
	}
	wantTimes(t, "claimed", got, false, false, false, false, false)
	tokenHash := keyHash("session token of w2")
	got, err := b.Poll(ctx, store.PollInput{EnvironmentID: env.ID, WorkerID: "w2", ReclaimAfter: store.DefaultReclaimAfter, TokenHash: tokenHash})
	ok(t, err, "Poll")
	if got == nil || got.ID != w2.ID {
		t.Fatalf("second Poll = %+v, want %s", got, w2.ID)
	}
	pollNothing(t, b, env.ID, "every item claimed")
	pollNothing(t, b, other.ID, "another environment")

	// The token minted with the claim is a session key scoped to the item.
	k, err := b.LookupAPIKey(ctx, tokenHash)
	ok(t, err, "LookupAPIKey of the session token")
	if k.Kind != store.KeyKindSession || k.ScopeID != w2.ID {
		t.Errorf("session token = %+v, want kind session scope %s", k, w2.ID)
	}

	// Ack: queued → starting, once; again is harmless.
	a, err := b.Ack(ctx, env.ID, w1.ID)
	ok(t, err, "Ack")
	if a.State != store.WorkStarting {
		t.Errorf("acked state %s, want starting", a.State)
	}
	wantTimes(t, "acked", a, true, false, false, false, false)
	if s, _ := b.GetSession(ctx, s1.ID); s == nil || s.Status != store.SessionRunning {
		t.Errorf("an acknowledged item's session: %+v, want status running", s)
	}
	a2, err := b.Ack(ctx, env.ID, w1.ID)
	ok(t, err, "Ack again")
	if a2.State != store.WorkStarting || !a2.AcknowledgedAt.Equal(*a.AcknowledgedAt) {
		t.Errorf("second Ack: %s at %v, want starting at %v", a2.State, a2.AcknowledgedAt, a.AcknowledgedAt)
	}
	_, err = b.Ack(ctx, other.ID, w2.ID)
	wantErr(t, err, store.ErrNotFound, "Ack through another environment")
	_, err = b.Ack(ctx, env.ID, "work_nope")
	wantErr(t, err, store.ErrNotFound, "Ack unknown")

	f, err := b.FindWork(ctx, w2.ID)
	ok(t, err, "FindWork")
	if f.ID != w2.ID || f.EnvironmentID != env.ID || f.State != store.WorkQueued {
		t.Errorf("FindWork = %+v", f)
	}
	_, err = b.FindWork(ctx, "work_nope")
	wantErr(t, err, store.ErrNotFound, "FindWork unknown")
	_, err = b.GetWork(ctx, other.ID, w2.ID)
	wantErr(t, err, store.ErrNotFound, "GetWork through another environment")
}

func testWorkReclaim(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	w := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	start := time.Now()
	if got := pollOnce(t, b, env.ID, "w1"); got == nil || got.ID != w.ID {
		t.Fatalf("Poll = %+v, want %s", got, w.ID)
	}
	pollNothing(t, b, env.ID, "just claimed")

	// Not acknowledged within the reclaim window: offered again, still queued.
	const reclaim = 100 * time.Millisecond
	got := pollFor(t, b, env.ID, reclaim)
	if got.ID != w.ID || got.State != store.WorkQueued {
		t.Fatalf("reclaimed %+v, want %s queued", got, w.ID)
	}
	if d := time.Since(start); d < reclaim {
		t.Errorf("reclaimed after %v, before the %v window", d, reclaim)
	}
	pollNothing(t, b, env.ID, "just reclaimed")

	// An acknowledged item is never reclaimed by the window.
	a, err := b.Ack(t.Context(), env.ID, w.ID)
	ok(t, err, "Ack")
	waitClockPast(t, *a.AcknowledgedAt)
	if got, err := b.Poll(t.Context(), store.PollInput{EnvironmentID: env.ID, ReclaimAfter: time.Microsecond}); err != nil || got != nil {
		t.Errorf("Poll after ack with a 1µs reclaim window = %+v, %v; want nothing", got, err)
	}
}

func testWorkHeartbeat(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")
	s1 := newSession(t, b, env.ID)
	s2 := newSession(t, b, env.ID)
	w1 := workOf(t, b, env.ID, s1.ID)
	w2 := workOf(t, b, env.ID, s2.ID)
	claimAck(t, b, env.ID, w1)
	claimAck(t, b, env.ID, w2)

	// The first heartbeat takes the lease: starting → active.
	hb1 := heartbeat(t, b, env.ID, w1.ID, store.NoHeartbeat, 0)
	if hb1.Type != store.TypeWorkHeartbeat || hb1.State != store.WorkActive || !hb1.LeaseExtended ||
		hb1.TTLSeconds != int(store.DefaultLeaseTTL.Seconds()) || hb1.LastHeartbeat == "" {
		t.Fatalf("first heartbeat %+v, want work_heartbeat, active, extended, ttl 30, a last_heartbeat", hb1)
	}
	hbAt, err := time.Parse(time.RFC3339Nano, hb1.LastHeartbeat)
	if err != nil {
		t.Fatalf("last_heartbeat %q is not RFC 3339: %v", hb1.LastHeartbeat, err)
	}
	checkUTC(t, "last_heartbeat", hbAt)
	got := getWork(t, b, env.ID, w1.ID)
	if got.State != store.WorkActive {
		t.Errorf("after the first heartbeat the item is %s, want active", got.State)
	}
	wantTimes(t, "active", got, true, true, true, false, false)
	if !got.LatestHeartbeatAt.Equal(hbAt) {
		t.Errorf("latest_heartbeat_at %v, want the last_heartbeat %v", got.LatestHeartbeatAt, hbAt)
	}
	if s, _ := b.GetSession(ctx, s1.ID); s == nil || s.Status != store.SessionRunning {
		t.Errorf("an active item's session: %+v, want status running", s)
	}

	// Anything but the exact last value is refused with the current lease.
	lease := func(last string, ttl int, at time.Time) store.HeartbeatState {
		return store.HeartbeatState{State: store.WorkActive, LastHeartbeat: &last, LeaseUpdatedAt: &at, TTLSeconds: ttl}
	}
	for _, bad := range []string{store.NoHeartbeat, "2020-01-01T00:00:00Z", strings.TrimSuffix(hb1.LastHeartbeat, "Z"), hbAt.Format(time.RFC3339)} {
		if bad == hb1.LastHeartbeat {
			continue
		}
		_, err := b.Heartbeat(ctx, env.ID, w1.ID, store.HeartbeatInput{Expected: bad})
		wantHeartbeatError(t, err, bad, lease(hb1.LastHeartbeat, 30, hbAt), "heartbeat expecting "+bad)
	}
	if g := getWork(t, b, env.ID, w1.ID); !g.LatestHeartbeatAt.Equal(hbAt) || g.State != store.WorkActive {
		t.Errorf("a refused heartbeat changed the item: %+v", g)
	}

	// Echoing it renews the lease, with the desired TTL.
	hb2 := heartbeat(t, b, env.ID, w1.ID, hb1.LastHeartbeat, 10*time.Second)
	if hb2.LastHeartbeat == hb1.LastHeartbeat || hb2.TTLSeconds != 10 || hb2.State != store.WorkActive || !hb2.LeaseExtended {
		t.Fatalf("second heartbeat %+v, want a new last_heartbeat, ttl 10, active, extended", hb2)
	}
	hb2At, err := time.Parse(time.RFC3339Nano, hb2.LastHeartbeat)
	ok(t, err, "parse last_heartbeat")
	if !hb2At.After(hbAt) {
		t.Errorf("last_heartbeat went from %v to %v, want later", hbAt, hb2At)
	}
	_, err = b.Heartbeat(ctx, env.ID, w1.ID, store.HeartbeatInput{Expected: hb1.LastHeartbeat})
	wantHeartbeatError(t, err, hb1.LastHeartbeat, lease(hb2.LastHeartbeat, 10, hb2At), "heartbeat echoing a stale value")
	hb3 := heartbeat(t, b, env.ID, w1.ID, hb2.LastHeartbeat, 0)
	if hb3.TTLSeconds != 30 || hb3.State != store.WorkActive {
		t.Errorf("third heartbeat %+v, want the default ttl 30 and active", hb3)
	}

	// An item nobody heartbeated has no lease: only NO_HEARTBEAT takes it.
	_, err = b.Heartbeat(ctx, env.ID, w2.ID, store.HeartbeatInput{Expected: hb1.LastHeartbeat})
	wantHeartbeatError(t, err, hb1.LastHeartbeat, store.HeartbeatState{State: store.WorkStarting, TTLSeconds: 30}, "first heartbeat not NO_HEARTBEAT")
	if g := getWork(t, b, env.ID, w2.ID); g.State != store.WorkStarting || g.StartedAt != nil {
		t.Errorf("a refused first heartbeat changed the item: %+v", g)
	}

	_, err = b.Heartbeat(ctx, env.ID, "work_nope", store.HeartbeatInput{Expected: store.NoHeartbeat})
	wantErr(t, err, store.ErrNotFound, "heartbeat on an unknown item")
	_, err = b.Heartbeat(ctx, other.ID, w2.ID, store.HeartbeatInput{Expected: store.NoHeartbeat})
	wantErr(t, err, store.ErrNotFound, "heartbeat through another environment")
}

func testWorkLeaseLapse(t *testing.T, open Opener) {
	b := open(t, 0)
	env := newEnv(t, b, "env")
	w := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	claimAck(t, b, env.ID, w)
	start := time.Now()
	hb := heartbeat(t, b, env.ID, w.ID, store.NoHeartbeat, time.Second)
	if hb.TTLSeconds != 1 {
		t.Fatalf("heartbeat ttl %d, want 1", hb.TTLSeconds)
	}
	if got := pollOnce(t, b, env.ID, "w2"); got != nil && time.Since(start) < 900*time.Millisecond {
		t.Fatalf("Poll claimed %s under a live lease", got.ID)
	}

	// Not renewed within its TTL, the lease lapses: the item is offered
	// again as queued, with no lease.
	got := pollFor(t, b, env.ID, store.DefaultReclaimAfter)
	if got.ID != w.ID || got.State != store.WorkQueued {
		t.Fatalf("after the lease lapsed Poll = %+v, want %s queued", got, w.ID)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the 1 s lease lapsed after %v", d)
	}
	// The old holder's echo is refused; the new worker takes the lease
	// with NO_HEARTBEAT.
	_, err := b.Heartbeat(t.Context(), env.ID, w.ID, store.HeartbeatInput{Expected: hb.LastHeartbeat})
	wantHeartbeatError(t, err, hb.LastHeartbeat, store.HeartbeatState{State: store.WorkQueued, TTLSeconds: 1}, "the lapsed lease's last value")
	a, err := b.Ack(t.Context(), env.ID, w.ID)
	ok(t, err, "Ack after the lapse")
	if a.State != store.WorkStarting {
		t.Errorf("ack after the lapse: %s, want starting", a.State)
	}
	hb2 := heartbeat(t, b, env.ID, w.ID, store.NoHeartbeat, 0)
	if hb2.State != store.WorkActive || !hb2.LeaseExtended || hb2.TTLSeconds != 30 || hb2.LastHeartbeat == hb.LastHeartbeat {
		t.Errorf("NO_HEARTBEAT after the lapse: %+v, want active, extended, ttl 30, a new value", hb2)
	}
	pollNothing(t, b, env.ID, "a renewed lease")
}

func testWorkStop(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	env := newEnv(t, b, "env")
	other := newEnv(t, b, "other")
	s1 := newSession(t, b, env.ID)
	w := workOf(t, b, env.ID, s1.ID)
	claimAck(t, b, env.ID, w)
	heartbeat(t, b, env.ID, w.ID, store.NoHeartbeat, 0)

	// force=false: stopping; the worker learns it from its next heartbeat,
	// which is not compared.
	st, err := b.StopWork(ctx, env.ID, w.ID, false)
	ok(t, err, "StopWork force=false")
	if st.State != store.WorkStopping {
		t.Fatalf("stop force=false: %s, want stopping", st.State)
	}
	wantTimes(t, "stopping", st, true, true, true, true, false)
	st2, err := b.StopWork(ctx, env.ID, w.ID, false)
	ok(t, err, "StopWork force=false again")
	if st2.State != store.WorkStopping || !st2.StopRequestedAt.Equal(*st.StopRequestedAt) {
		t.Errorf("second stop: %s requested %v, want stopping requested %v", st2.State, st2.StopRequestedAt, st.StopRequestedAt)
	}
	for _, exp := range []string{"whatever", store.NoHeartbeat} {
		hb := heartbeat(t, b, env.ID, w.ID, exp, 0)
		if hb.State != store.WorkStopping {
			t.Errorf("heartbeat on a stopping item expecting %q: state %s, want stopping", exp, hb.State)
		}
	}

	// force=true: stopped, for good.
	st3, err := b.StopWork(ctx, env.ID, w.ID, true)
	ok(t, err, "StopWork force=true")
	if st3.State != store.WorkStopped || !st3.StopRequestedAt.Equal(*st.StopRequestedAt) {
		t.Errorf("stop force=true: %s requested %v, want stopped, stop_requested_at kept", st3.State, st3.StopRequestedAt)
	}
	wantTimes(t, "stopped", st3, true, true, true, true, true)
	for _, force := range []bool{true, false} {
		_, err := b.StopWork(ctx, env.ID, w.ID, force)
		wantErr(t, err, store.ErrConflict, "stop a stopped item")
	}
	hb, err := b.Heartbeat(ctx, env.ID, w.ID, store.HeartbeatInput{Expected: "whatever"})
	ok(t, err, "Heartbeat on a stopped item")
	if hb.State != store.WorkStopped || hb.LeaseExtended {
		t.Errorf("heartbeat on a stopped item: %+v, want stopped, not extended", hb)
	}
	_, err = b.Ack(ctx, env.ID, w.ID)
	wantErr(t, err, store.ErrConflict, "Ack a stopped item")
	if got, err := b.Poll(ctx, store.PollInput{EnvironmentID: env.ID, ReclaimAfter: time.Microsecond}); err != nil || got != nil {
		t.Errorf("Poll offered %+v (%v); a stopped item is never offered", got, err)
	}
	if s, _ := b.GetSession(ctx, s1.ID); s == nil || s.Status != store.SessionIdle {
		t.Errorf("session of a stopped item: %+v, want idle", s)
	}

	// A queued item stops at once when forced, moves to stopping otherwise.
	q1 := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	q2 := workOf(t, b, env.ID, newSession(t, b, env.ID).ID)
	if g, err := b.StopWork(ctx, env.ID, q1.ID, true); err != nil || g.State != store.WorkStopped {
		t.Errorf("force-stop a queued item: %+v, %v; want stopped", g, err)
	}
	if g, err := b.StopWork(ctx, env.ID, q2.ID, false); err != nil || g.State != store.WorkStopping {
		t.Errorf("stop a queued item: %+v, %v; want stopping", g, err)
	}

	_, err = b.StopWork(ctx, env.ID, "work_nope", true)
	wantErr(t, err, store.ErrNotFound, "stop an unknown item")
	_, err = b.StopWork(ctx, other.ID, q2.ID, true)
	wantErr(t, err, store.ErrNotFound, "stop through another environment")
}
