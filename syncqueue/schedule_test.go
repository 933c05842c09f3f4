package syncqueue

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server/servertest"
)

// The schedule's tests run the real engine against the real store service
// (in process, on SQLite) inside a testing/synctest bubble: time is
// virtual, it moves only when every goroutine of the test waits, and
// time.Sleep(d) returns after exactly d of it. So "the pass runs 1 s
// after the last close, not before" is checked to the nanosecond without
// a timed test, and a 5 s interval costs no wall time. The server's
// handler is called in the caller's goroutine (no sockets, which a bubble
// can't wait on); schedRT records the requests and fails writes on demand.

// schedRT is an http.RoundTripper straight into the server's handler.
type schedRT struct {
	h http.Handler

	mu     sync.Mutex
	writes []time.Time // when each create or update arrived. GUARDED_BY(mu)
	down   bool        // creates and updates fail as on a refused connection. GUARDED_BY(mu)
}

func (rt *schedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := mgKind(r)
	if kind == "create" || kind == "update" {
		rt.mu.Lock()
		rt.writes = append(rt.writes, time.Now())
		down := rt.down
		rt.mu.Unlock()
		if down {
			return nil, &netError{syscall.ECONNREFUSED}
		}
	}
	rec := httptest.NewRecorder()
	rt.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// netError is a failed dial, as the client sees one.
type netError struct{ err error }

func (e *netError) Error() string { return "dial tcp 127.0.0.1:1: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

func (rt *schedRT) setDown(down bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.down = down
}

// writeTimes is when each create or update arrived so far.
func (rt *schedRT) writeTimes() []time.Time {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]time.Time(nil), rt.writes...)
}

// schedEnv is one engine in a bubble, with its tree behind an mgEnv (for
// its write and unlink helpers).
type schedEnv struct {
	*mgEnv
	rt    *schedRT
	obs   *recObserver
	start time.Time // when the engine started: the interval's cadence counts from here
}

// newSchedEnv starts an engine on a new store holding /old.md, with a
// 5 s interval and the quiet period given (0: off). Call it inside
// synctest.Test; it finishes and closes the engine when the test ends.
func newSchedEnv(t *testing.T, quiet time.Duration) *schedEnv {
	srv := servertest.New(t)
	rt := &schedRT{h: srv}
	cl, err := client.New(client.Options{BaseURL: "http://bubble", APIKey: mgAdminKey, HTTPClient: &http.Client{Transport: rt}, RetryMax: -1, AllowInsecureHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := cl.CreateStore(ctx, store.CreateStoreInput{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateMemory(ctx, st.ID, "/old.md", "old\n"); err != nil {
		t.Fatal(err)
	}
	log, hook := logtest.NewNullLogger()
	obs := &recObserver{}
	eng, err := NewEngine(EngineOptions{StoreID: st.ID, Store: cl, StateDir: t.TempDir(), Interval: MinInterval, Quiet: quiet,
		Observer: obs, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Open(ctx); err != nil {
		t.Fatal(err)
	}
	eng.Start()
	t.Cleanup(func() {
		rt.setDown(false)
		eng.Finish(ctx, false)
		if err := eng.Close(ctx); err != nil {
			t.Errorf("engine Close: %v", err)
		}
	})
	rt.mu.Lock()
	rt.writes = nil // the store's setup
	rt.mu.Unlock()
	return &schedEnv{mgEnv: &mgEnv{t: t, eng: eng, tree: eng.Tree(), hook: hook, storeID: st.ID, remote: cl}, rt: rt, obs: obs, start: time.Now()}
}

// passes is every pass that ended so far.
func (e *schedEnv) passes() []PassInfo {
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	return append([]PassInfo(nil), e.obs.passes...)
}

// byTrigger keeps the passes of one trigger.
func byTrigger(ps []PassInfo, trigger string) []PassInfo {
	var out []PassInfo
	for _, p := range ps {
		if p.Trigger == trigger {
			out = append(out, p)
		}
	}
	return out
}

// sleep lets d of virtual time pass and waits until the engine is idle
// again (a pass that began is over).
func sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// A close starts one pass a quiet period after it, long before the
// interval; it uploads the file, and nothing happens before.
func TestQuietCloseUploadsAfterQuietPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSchedEnv(t, time.Second)
		sleep(1500 * time.Millisecond) // off the interval's cadence
		closed := time.Now()
		e.mustWrite("/new.md", "new\n")
		sleep(time.Second - time.Nanosecond)
		if ps := e.passes(); len(ps) != 0 || len(e.rt.writeTimes()) != 0 {
			t.Fatalf("before the quiet period ended: passes %+v, writes %v", ps, e.rt.writeTimes())
		}
		sleep(time.Nanosecond)
		ps := e.passes()
		if len(ps) != 1 || ps[0].Trigger != TriggerQuiet || ps[0].Result.Uploaded != 1 || !ps[0].At.Equal(closed.Add(time.Second)) {
			t.Fatalf("a quiet period after the close: passes %+v, want one quiet pass at %s uploading /new.md", ps, closed.Add(time.Second))
		}
		if got := e.storeContents()["/new.md"]; got != "new\n" {
			t.Fatalf("/new.md in the store: %q", got)
		}
		var lines []string
		for _, l := range e.hook.AllEntries() {
			if l.Message == "sync pass" {
				lines = append(lines, l.Data["trigger"].(string))
			}
		}
		if len(lines) != 1 || lines[0] != TriggerQuiet {
			t.Errorf("sync pass log lines by trigger: %v, want one, quiet", lines)
		}
		// Nothing more: the interval's pass finds nothing to upload.
		sleep(2 * MinInterval)
		if writes := e.rt.writeTimes(); len(writes) != 1 || len(byTrigger(e.passes(), TriggerQuiet)) != 1 {
			t.Fatalf("after two intervals: writes %v, passes %+v", writes, e.passes())
		}
	})
}

// A burst of closes, each less than the quiet period after the last,
// costs one pass, a quiet period after the last close.
func TestQuietBurstIsOnePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSchedEnv(t, time.Second)
		for i := range 4 {
			e.mustWrite("/burst.md", strings.Repeat("x", i+1))
			e.mustWrite("/other.md", strings.Repeat("y", i+1))
			sleep(900 * time.Millisecond)
		}
		last := time.Now().Add(-900 * time.Millisecond)
		if ps := e.passes(); len(ps) != 0 {
			t.Fatalf("passes during the burst: %+v", ps)
		}
		sleep(100 * time.Millisecond)
		ps := e.passes()
		if len(ps) != 1 || ps[0].Trigger != TriggerQuiet || ps[0].Result.Uploaded != 2 || !ps[0].At.Equal(last.Add(time.Second)) {
			t.Fatalf("after the burst: passes %+v, want one quiet pass uploading both files", ps)
		}
		if writes := e.rt.writeTimes(); len(writes) != 2 {
			t.Fatalf("requests that write: %d, want 2", len(writes))
		}
	})
}

// Editing with pauses just over the quiet period is the worst case: one
// pass per pause, never two within a quiet period.
func TestQuietWorstCaseOnePassPerQuietPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet = time.Second
		e := newSchedEnv(t, quiet)
		const edits = 8
		for i := range edits {
			e.mustWrite("/log.md", strings.Repeat("z", i+1))
			sleep(quiet + 200*time.Millisecond)
		}
		// Each edit goes up by the first pass after it: a quiet pass, or
		// the interval's when its tick comes first (the edit at +4.8 s goes
		// up at +5 s, and its quiet pass finds nothing to do and is skipped).
		var uploads int
		for _, p := range e.passes() {
			uploads += p.Result.Uploaded
		}
		qs := byTrigger(e.passes(), TriggerQuiet)
		if uploads != edits || len(e.rt.writeTimes()) != edits || len(qs) != edits-1 {
			t.Fatalf("uploads %d, writes %d, quiet passes %d: want %d, %d, %d (one per pause)", uploads, len(e.rt.writeTimes()), len(qs), edits, edits, edits-1)
		}
		for i := 1; i < len(qs); i++ {
			if gap := qs[i].At.Sub(qs[i-1].At); gap < quiet {
				t.Errorf("quiet passes %d and %d %s apart, less than the quiet period", i-1, i, gap)
			}
		}
	})
}

// A file closed more often than the quiet period never lets it pass: it
// goes up at the interval, which stays the longest a close waits.
func TestQuietContinuousClosesGoUpAtTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSchedEnv(t, time.Second)
		var closes []time.Time
		for i := 0; time.Since(e.start) < 3*MinInterval; i++ {
			e.mustWrite("/app.log", strings.Repeat("line\n", i+1))
			closes = append(closes, time.Now())
			sleep(500 * time.Millisecond)
		}
		ps := e.passes()
		if qs := byTrigger(ps, TriggerQuiet); len(qs) != 0 {
			t.Fatalf("quiet passes while the file was closed every 500 ms: %+v", qs)
		}
		ticks := byTrigger(ps, TriggerInterval)
		if len(ticks) != 3 {
			t.Fatalf("interval passes in three intervals: %+v", ticks)
		}
		for i, p := range ticks {
			if want := e.start.Add(time.Duration(i+1) * MinInterval); !p.At.Equal(want) || p.Result.Uploaded != 1 {
				t.Errorf("interval pass %d: %+v, want at %s uploading the log", i, p, want)
			}
		}
		// Every close before a pass went up by that pass: no close waits
		// longer than the interval.
		writes := e.rt.writeTimes()
		for _, c := range closes {
			if !c.Before(e.start.Add(3 * MinInterval)) {
				continue
			}
			waited := false
			for _, w := range writes {
				if !w.Before(c) && w.Sub(c) <= MinInterval {
					waited = true
				}
			}
			if !waited {
				t.Errorf("the close at +%s did not go up within the interval (writes at %v)", c.Sub(e.start), writes)
			}
		}
	})
}

// A store that fails the uploads gets at most one attempt per interval
// while someone keeps editing, never one per quiet period; once a pass
// gets through, quiet passes come back.
func TestQuietFailingStoreBacksOffToTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quiet = time.Second
		e := newSchedEnv(t, quiet)
		e.rt.setDown(true)
		for i := 0; time.Since(e.start) < 6*MinInterval; i++ {
			e.mustWrite("/notes.md", strings.Repeat("n", i+1))
			sleep(quiet + 200*time.Millisecond)
		}
		writes := e.rt.writeTimes()
		if len(writes) < 5 || len(writes) > 7 {
			t.Fatalf("attempts in 6 intervals of a failing store: %d (at %v), want about one per interval", len(writes), writes)
		}
		for i := 1; i < len(writes); i++ {
			if gap := writes[i].Sub(writes[i-1]); gap < MinInterval {
				t.Errorf("attempts %d and %d %s apart, less than the interval", i-1, i, gap)
			}
		}
		if qs := byTrigger(e.passes(), TriggerQuiet); len(qs) != 1 || qs[0].Result.Failed != 1 {
			t.Errorf("quiet passes while the store failed: %+v, want only the one that found out", qs)
		}
		if st := e.eng.Status(); st.PendingUploads != 1 {
			t.Errorf("pending uploads while the store fails: %d, want 1", st.PendingUploads)
		}

		// The store is back: the next interval's pass gets through, and
		// the quiet trigger works again.
		e.rt.setDown(false)
		sleep(MinInterval)
		if m := e.memory("/notes.md"); m == nil {
			t.Fatal("/notes.md did not go up at the interval once the store was back")
		}
		// Off the interval's cadence (a tick at +36 s would take the edit
		// first): the edit at +37 s has its quiet pass at +38 s.
		sleep(2 * time.Second)
		closed := time.Now()
		e.mustWrite("/after.md", "after\n")
		sleep(quiet)
		if qs := byTrigger(e.passes(), TriggerQuiet); len(qs) != 2 || !qs[1].At.Equal(closed.Add(quiet)) || qs[1].Result.Uploaded != 1 {
			t.Fatalf("quiet passes after recovery: %+v, want a second one a quiet period after the close", qs)
		}
	})
}

// Quiet passes only upload writes: a delete waits for the interval's
// passes, whose 30 s + confirming-pass rule starts at the first of them
// (as without the quiet trigger), and a delete alone starts no pass.
func TestQuietPassesLeaveDeletesToTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSchedEnv(t, time.Second)
		sleep(time.Second)
		e.unlink("/old.md")
		sleep(2 * time.Second)
		if ps := e.passes(); len(ps) != 0 {
			t.Fatalf("a delete alone started passes: %+v", ps)
		}
		e.mustWrite("/new.md", "new\n")
		sleep(time.Second)
		ps := e.passes()
		if len(ps) != 1 || ps[0].Trigger != TriggerQuiet || ps[0].Result.Uploaded != 1 || ps[0].Result.Deleted != 0 || ps[0].Result.DeletesPending != 1 {
			t.Fatalf("the quiet pass: %+v, want /new.md uploaded and the delete left pending", ps)
		}
		var seen int
		e.onOwner(func() { seen = len(e.eng.f.deleteSeen) })
		if seen != 0 {
			t.Fatalf("the quiet pass started the delete's 30 s wait")
		}
		// The first interval pass (at +5 s) sees the delete; it is sent by
		// the first one at least 30 s later (+35 s).
		sleep(time.Until(e.start.Add(35*time.Second - time.Nanosecond)))
		if m := e.memory("/old.md"); m == nil {
			t.Fatal("the delete was sent before 30 s had passed since the interval's pass saw it")
		}
		sleep(time.Nanosecond)
		if m := e.memory("/old.md"); m != nil {
			t.Fatal("the delete was not sent by the interval's pass 30 s after the first saw it")
		}
	})
}

// With the quiet period off, a close waits for the interval's pass.
func TestQuietOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSchedEnv(t, 0)
		if e.eng.closes != nil {
			t.Fatal("quiet off, but the tree tells the flusher of closes")
		}
		e.mustWrite("/new.md", "new\n")
		sleep(MinInterval - time.Nanosecond)
		if ps, w := e.passes(), e.rt.writeTimes(); len(ps) != 0 || len(w) != 0 {
			t.Fatalf("passes before the interval with quiet off: %+v, writes %v", ps, w)
		}
		sleep(time.Nanosecond)
		if ps := e.passes(); len(ps) != 1 || ps[0].Trigger != TriggerInterval || ps[0].Result.Uploaded != 1 {
			t.Fatalf("passes at the interval: %+v", ps)
		}
	})
}

// Bad quiet periods are refused with a clear error.
func TestQuietValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		quiet, interval time.Duration
		ok              bool
	}{
		{0, 0, true},
		{time.Second, 0, true}, // default interval 15 s
		{MinQuiet, MinInterval, true},
		{MinInterval - time.Millisecond, MinInterval, true},
		{MinQuiet - time.Millisecond, MinInterval, false},
		{-time.Second, MinInterval, false},
		{MinInterval, MinInterval, false},
		{time.Minute, 15 * time.Second, false},
	} {
		o := EngineOptions{StoreID: "memstore_x", Store: &client.Client{}, StateDir: t.TempDir(), Interval: tc.interval, Quiet: tc.quiet}
		err := o.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Quiet %s, Interval %s: %v, want ok=%v", tc.quiet, tc.interval, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "quiet period must be at least 100ms and shorter than the interval") {
			t.Errorf("Quiet %s: unclear error %q", tc.quiet, err)
		}
	}
}
