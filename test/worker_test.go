package test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/test/harness"
)

// These tests run a real `memfs serve` (with --memory-root under the
// test's temp dir) and real `memfs worker` processes with the same memory
// root and their own state dir. Sessions are created through the API with
// the admin key; the worker claims them from the work queue, mounts their
// stores through the kernel's FUSE, and the tests act on the mounts from a
// shell and check the store with the Go client.
//
// Time: the lease TTL is the official 30 s and the worker heartbeats every
// 15 s (it sends no desired_ttl_seconds, though the server honours one), so
// an ending the worker learns from a heartbeat (archived session, lost
// lease) takes up to 15 s, and a killed worker's item is offered again 30 s
// after its last heartbeat. Those tests run in parallel.

// Deadlines: bounds on waiting, never expected durations.
const (
	wkStartTimeout = 30 * time.Second // a queued session claimed and mounted
	wkBeatTimeout  = 30 * time.Second // the worker's next heartbeat (every 15 s) and what it starts
	wkLapseTimeout = 60 * time.Second // a killed worker's lease lapsing (30 s) and its item claimed again
	wkSyncTimeout  = 30 * time.Second // a 5 s sync tick reaching the store
	wkExitTimeout  = 60 * time.Second // teardown (final sync bounded at 30 s), stop, exit
	wkQuickTimeout = 10 * time.Second // something the worker does at once
)

// wkEnv is one memfs serve process with a memory root and an environment.
type wkEnv struct {
	t        *testing.T
	base     string // the test's temp dir
	root     string // the memory root of the workers (and, by default, of serve)
	stateDir string // the state dir of the workers started by startWorker
	cwd      string // the working directory of those workers ("" = the test's)
	serve    *harness.Serve
	admin    *client.Client
	envID    string
	envKey   string
}

// newWkEnv starts memfs serve with --memory-root <tmp>/mnt, the memory
// root of the workers too, and creates an environment.
func newWkEnv(t *testing.T) *wkEnv {
	t.Helper()
	mtRequireFUSE(t)
	return newWkEnvAt(t, nil)
}

// newWkEnvAt is newWkEnv with other memory roots: roots gets the test's
// temp dir and returns serve's --memory-root and the workers'. It does not
// require FUSE (tests that need no mount use it with nil).
func newWkEnvAt(t *testing.T, roots func(base string) (serveRoot, workerRoot string)) *wkEnv {
	t.Helper()
	return newWkEnvServe(t, roots)
}

// newWkEnvServe is newWkEnvAt with more flags for memfs serve.
func newWkEnvServe(t *testing.T, roots func(base string) (serveRoot, workerRoot string), serveArgs ...string) *wkEnv {
	t.Helper()
	base := t.TempDir()
	e := &wkEnv{t: t, base: base, root: filepath.Join(base, "mnt"), stateDir: filepath.Join(base, "state")}
	serveRoot := e.root
	if roots != nil {
		serveRoot, e.root = roots(base)
	}
	e.serve = harness.StartServe(t, harness.ServeOptions{Args: append([]string{"--memory-root", serveRoot}, serveArgs...)})
	admin, err := client.New(client.Options{BaseURL: e.serve.URL, APIKey: e.serve.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	e.admin = admin
	env, err := admin.CreateEnvironment(context.Background(), client.CreateEnvironmentInput{Name: "wk " + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if env.EnvironmentKey == "" {
		t.Fatal("the environment was created without an environment_key")
	}
	e.envID, e.envKey = env.ID, env.EnvironmentKey
	return e
}

// newStore creates a store holding files (path -> content).
func (e *wkEnv) newStore(name string, files map[string]string) string {
	e.t.Helper()
	st, err := e.admin.CreateStore(context.Background(), store.CreateStoreInput{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if _, err := e.admin.CreateMemory(context.Background(), st.ID, p, files[p]); err != nil {
			e.t.Fatalf("create %s: %v", p, err)
		}
	}
	return st.ID
}

// wkRW and wkRO attach a store read-write or read-only.
func wkRW(id string) client.SessionResourceInput {
	return client.SessionResourceInput{MemoryStoreID: id, Access: store.AccessReadWrite}
}

func wkRO(id string) client.SessionResourceInput {
	return client.SessionResourceInput{MemoryStoreID: id, Access: store.AccessReadOnly}
}

// newSession creates a session attaching rs, which queues its work item.
func (e *wkEnv) newSession(rs ...client.SessionResourceInput) *store.Session {
	e.t.Helper()
	s, err := e.admin.CreateSession(context.Background(), client.CreateSessionInput{EnvironmentID: e.envID, Resources: rs})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(s.Resources) != len(rs) {
		e.t.Fatalf("the session has %d resources, want %d", len(s.Resources), len(rs))
	}
	return s
}

// startWorker starts memfs worker on the environment with the env's
// memory root and state dir (the same across restarts) and args.
func (e *wkEnv) startWorker(args ...string) *harness.Worker {
	e.t.Helper()
	return harness.StartWorker(e.t, harness.WorkerOptions{URL: e.serve.URL, EnvironmentID: e.envID, EnvironmentKey: e.envKey,
		MemoryRoot: e.root, StateDir: e.stateDir, Dir: e.cwd, Args: args})
}

// waitRunning waits until w runs sess and checks that every store of it is
// mounted at its mount path (the marker file readable).
func (e *wkEnv) waitRunning(w *harness.Worker, sess *store.Session) {
	e.t.Helper()
	w.WaitOutput(1, wkStartTimeout, "session running", sess.ID)
	for _, r := range sess.Resources {
		if !harness.IsMounted(r.MountPath) {
			e.t.Fatalf("the worker says session %s runs, but %s is not mounted:\n%s", sess.ID, r.MountPath, w.Output())
		}
		b, err := os.ReadFile(filepath.Join(r.MountPath, ".anthropic-memory-store"))
		if err != nil || !strings.HasSuffix(string(b), r.MemoryStoreID) {
			e.t.Fatalf("%s does not show memory store %s: marker %q, %v", r.MountPath, r.MemoryStoreID, b, err)
		}
	}
}

// contents is a store as path -> content.
func (e *wkEnv) contents(storeID string) map[string]string {
	e.t.Helper()
	return wkContents(e.t, e.admin, storeID)
}

// wkContents lists a store through cl as path -> content. A path listed
// twice fails the test: the store never holds duplicates.
func wkContents(t *testing.T, cl *client.Client, storeID string) map[string]string {
	t.Helper()
	ms, err := cl.AllMemories(context.Background(), storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		if _, dup := out[m.Path]; dup {
			t.Fatalf("store %s lists %s twice", storeID, m.Path)
		}
		out[m.Path] = *m.Content
	}
	return out
}

// checkStore fails unless the store holds exactly want now.
func (e *wkEnv) checkStore(storeID string, want map[string]string) {
	e.t.Helper()
	if got := e.contents(storeID); !maps.Equal(got, want) {
		e.t.Errorf("store %s does not hold what it should:\n%s", storeID, mtDiff(got, want))
	}
}

// waitStore polls the store until it holds exactly want.
func (e *wkEnv) waitStore(storeID string, want map[string]string, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := e.contents(storeID)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("store %s did not come to hold what it should within %s:\n%s", storeID, timeout, mtDiff(got, want))
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// call sends one raw API request with key to the env's serve process (q
// the query, body JSON; either may be nil) and returns the answer.
func (e *wkEnv) call(method, path, key string, q url.Values, body any) rawAnswer {
	e.t.Helper()
	return rawCall(e.t, e.serve.URL, method, path, key, q, body)
}

// workOf returns the (latest) work item of a session, read with the admin
// key.
func (e *wkEnv) workOf(sessionID string) store.Work {
	e.t.Helper()
	r := e.call(http.MethodGet, "/v1/environments/"+e.envID+"/work", e.serve.AdminKey, url.Values{"limit": {"100"}}, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("list work: %s", r)
	}
	var page struct {
		Data []store.Work `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		e.t.Fatal(err)
	}
	for _, w := range page.Data { // newest first
		if w.Data.ID == sessionID {
			return w
		}
	}
	e.t.Fatalf("no work item for %s in %s", sessionID, r.body)
	return store.Work{}
}

// work reads a work item by id with the admin key.
func (e *wkEnv) work(workID string) store.Work {
	e.t.Helper()
	r := e.call(http.MethodGet, "/v1/environments/"+e.envID+"/work/"+workID, e.serve.AdminKey, nil, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("get work %s: %s", workID, r)
	}
	var w store.Work
	if err := json.Unmarshal(r.body, &w); err != nil {
		e.t.Fatal(err)
	}
	return w
}

// waitWorkState polls a session's work item until it is in state.
func (e *wkEnv) waitWorkState(sessionID, state string, timeout time.Duration) store.Work {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w := e.workOf(sessionID)
		if w.State == state {
			return w
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the work item %s of %s is %s after %s, want %s", w.ID, sessionID, w.State, timeout, state)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// takeLease takes a work item's lease away from the worker holding it, as
// another process with the environment key would: a heartbeat with a
// wrong expected value answers 412 with the current last_heartbeat, and a
// heartbeat with that value takes the lease (for 10 minutes, so the item
// is not offered again during the test). The worker's next heartbeat then
// answers the server's real 412.
func (e *wkEnv) takeLease(workID string) {
	e.t.Helper()
	path := "/v1/environments/" + e.envID + "/work/" + workID + "/heartbeat"
	expected := "wk-not-the-current-heartbeat"
	deadline := time.Now().Add(wkQuickTimeout)
	for time.Now().Before(deadline) {
		r := e.call(http.MethodPost, path, e.envKey, url.Values{"expected_last_heartbeat": {expected}, "desired_ttl_seconds": {"600"}}, nil)
		switch r.status {
		case http.StatusOK:
			var hb store.Heartbeat
			if err := json.Unmarshal(r.body, &hb); err != nil || !hb.LeaseExtended || hb.TTLSeconds != 600 {
				e.t.Fatalf("taking the lease: %s (%v)", r.body, err)
			}
			return
		case http.StatusPreconditionFailed:
			var env struct {
				Error struct {
					Details struct {
						ErrorCode    string `json:"error_code"`
						CurrentState struct {
							LastHeartbeat *string `json:"last_heartbeat"`
						} `json:"current_state"`
					} `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Details.ErrorCode != "heartbeat_precondition_failed" {
				e.t.Fatalf("412 without the heartbeat details: %s (%v)", r.body, err)
			}
			expected = store.NoHeartbeat
			if lh := env.Error.Details.CurrentState.LastHeartbeat; lh != nil {
				expected = *lh
			}
		default:
			e.t.Fatalf("heartbeat %s: %s", workID, r)
		}
	}
	e.t.Fatalf("could not take the lease of %s within %s", workID, wkQuickTimeout)
}

// wkBareRe matches the values logrus's text formatter prints unquoted.
var wkBareRe = regexp.MustCompile(`^[a-zA-Z0-9\-._/@^+]+$`)

// wkField is how a logrus text line shows key=value (quoted with %q when
// the value has characters other than letters, digits and -._/@^+).
func wkField(k, v string) string {
	if wkBareRe.MatchString(v) {
		return k + "=" + v
	}
	return k + "=" + strconv.Quote(v)
}

// wkCheckGone fails unless nothing is mounted at or under each path and
// the path does not exist (the worker removed the directory it created).
func wkCheckGone(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if m := harness.MountsUnder(p); len(m) > 0 {
			t.Errorf("still mounted: %v", m)
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v); the worker should have removed the directory it created", p, err)
		}
	}
}

// wkStopWorker sends sig and checks the worker exits 0 leaving nothing
// mounted under its memory root.
func wkStopWorker(t *testing.T, w *harness.Worker, sig syscall.Signal) {
	t.Helper()
	wkStopWorkerExit(t, w, sig, 0)
}

// wkStopWorkerExit is wkStopWorker expecting exit status code.
func wkStopWorkerExit(t *testing.T, w *harness.Worker, sig syscall.Signal, code int) {
	t.Helper()
	w.Signal(sig)
	if got := w.Wait(wkExitTimeout); got != code {
		t.Fatalf("memfs worker exited %d after %v, want %d:\n%s", got, sig, code, w.Output())
	}
	if m := harness.MountsUnder(w.Opts.MemoryRoot); len(m) > 0 {
		t.Fatalf("still mounted after the worker exited: %v", m)
	}
}

// TestWorkerMountsSessionStores: a session with a read-write and a
// read-only store appears at the mount paths the server gave it; both are
// readable, the read-only one refuses every write from a shell, and edits
// on the read-write one reach the store on the sync interval.
func TestWorkerMountsSessionStores(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	rwFiles := map[string]string{"/todo.md": "- one\n", "/deep/a/b.md": "b\n"}
	roFiles := map[string]string{"/guide.md": "read me\n", "/sub/ref.md": "ref\n"}
	rw := e.newStore("Team Notes", rwFiles)
	ro := e.newStore("Reference!", roFiles)
	w := e.startWorker("--memory-sync-interval", "5s")
	sess := e.newSession(wkRW(rw), wkRO(ro))
	rwDir, roDir := sess.Resources[0].MountPath, sess.Resources[1].MountPath
	if rwDir != filepath.Join(e.root, "team-notes") || roDir != filepath.Join(e.root, "reference") {
		t.Fatalf("mount paths %s, %s: want the slugs of the store names under %s", rwDir, roDir, e.root)
	}
	e.waitRunning(w, sess)
	w.WaitOutput(1, wkQuickTimeout, "memory store mounted", wkField("work_id", e.workOf(sess.ID).ID), wkField("session", sess.ID), wkField("store", rw), wkField("path", rwDir))

	if got := mtMountFiles(t, rwDir); !maps.Equal(got, rwFiles) {
		t.Errorf("the read-write mount shows:\n%s", mtDiff(got, rwFiles))
	}
	if got := mtMountFiles(t, roDir); !maps.Equal(got, roFiles) {
		t.Errorf("the read-only mount shows:\n%s", mtDiff(got, roFiles))
	}
	if mopts, _ := harness.MountOptionsOf(roDir); !strings.HasPrefix(mopts, "ro") {
		t.Errorf("the read-only store is mounted %q, want ro", mopts)
	}
	for _, script := range []string{
		"echo x > new.md",
		"echo x >> guide.md",
		"rm guide.md",
		"mv guide.md moved.md",
		"mkdir newdir",
		"touch sub/ref.md",
	} {
		_, stderr, err := mtSh(t, roDir, script)
		if err == nil || !strings.Contains(stderr, "Read-only file system") {
			t.Errorf("%q on the read-only mount: %v, stderr %q; want it refused with \"Read-only file system\"", script, err, stderr)
		}
	}

	mtMustSh(t, rwDir, `echo '- two' >> todo.md && echo fresh > new.md && mkdir -p x/y && printf 'deep\n' > x/y/z.md`)
	want := map[string]string{"/todo.md": "- one\n- two\n", "/deep/a/b.md": "b\n", "/new.md": "fresh\n", "/x/y/z.md": "deep\n"}
	e.waitStore(rw, want, wkSyncTimeout)
	e.checkStore(ro, roFiles)
	if st := e.workOf(sess.ID).State; st != store.WorkActive {
		t.Errorf("the running session's work item is %s, want active", st)
	}
	if strings.Contains(w.Output(), e.envKey) {
		t.Errorf("the worker logged its environment key")
	}
	wkStopWorker(t, w, syscall.SIGTERM)
	wkCheckGone(t, rwDir, roDir)
}

// TestWorkerSessionArchived: archiving the session ends it cleanly at the
// worker's next heartbeat: a final sync uploads the last edits, deletes
// included (their 30 s wait waived), the mounts and their directories are
// removed, and the work item ends stopped. The 60 s interval makes sure no
// tick runs before the end: only the final sync can upload.
func TestWorkerSessionArchived(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Journal", map[string]string{"/keep.md": "keep\n", "/edit.md": "v1\n", "/gone.md": "bye\n", "/sub/old.md": "old\n"})
	ref := e.newStore("Docs", map[string]string{"/d.md": "d\n"})
	w := e.startWorker("--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(st), wkRO(ref))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	mtMustSh(t, dir, `printf 'v2\n' > edit.md && echo hi > new.md && rm gone.md sub/old.md`)
	e.checkStore(st, map[string]string{"/keep.md": "keep\n", "/edit.md": "v1\n", "/gone.md": "bye\n", "/sub/old.md": "old\n"})

	archived := time.Now()
	if _, err := e.admin.ArchiveSession(context.Background(), sess.ID); err != nil {
		t.Fatal(err)
	}
	w.WaitOutput(1, wkBeatTimeout, "session ending", "ending=clean", sess.ID)
	t.Logf("the worker noticed the archived session %s after archiving (next heartbeat)", time.Since(archived).Round(100*time.Millisecond))
	wk := e.waitWorkState(sess.ID, store.WorkStopped, wkExitTimeout)
	if wk.StoppedAt == nil {
		t.Errorf("the stopped item has no stopped_at")
	}
	e.checkStore(st, map[string]string{"/keep.md": "keep\n", "/edit.md": "v2\n", "/new.md": "hi\n"})
	e.checkStore(ref, map[string]string{"/d.md": "d\n"})
	wkCheckGone(t, dir, sess.Resources[1].MountPath)
	if _, err := os.Stat(e.root); err != nil {
		t.Errorf("the memory root itself should stay: %v", err)
	}
	if !w.Running() {
		t.Fatalf("the worker exited after a session ended:\n%s", w.Output())
	}
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestWorkerSIGTERM: SIGTERM uploads the writes of every running session
// (writes only: a pending delete is not sent), unmounts, removes the
// directories, stops the items and exits sgExitLeft, since the delete is
// left in the journal, naming the store and the delete.
func TestWorkerSIGTERM(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	a := e.newStore("Alpha", map[string]string{"/a.md": "a1\n", "/gone.md": "still here\n"})
	b := e.newStore("Beta", map[string]string{"/b.md": "b1\n"})
	c := e.newStore("Gamma", map[string]string{"/c.md": "c1\n"})
	w := e.startWorker("--memory-sync-interval", "60s", "--memory-sync-delete-delay", "1ms")
	s1 := e.newSession(wkRW(a))
	s2 := e.newSession(wkRW(b), wkRO(c))
	e.waitRunning(w, s1)
	e.waitRunning(w, s2)
	mtMustSh(t, s1.Resources[0].MountPath, `printf 'a2\n' > a.md && echo new > n.md && rm gone.md`)
	mtMustSh(t, s2.Resources[0].MountPath, `printf 'b2\n' >> b.md`)

	wkStopWorkerExit(t, w, syscall.SIGTERM, sgExitLeft)
	if l := w.Lines("memfs worker:", "left in the journal", a+": 1 change (1 delete not sent)"); len(l) != 1 {
		t.Errorf("the exit message does not name the delete left in %s's journal:\n%s", a, w.Output())
	}
	if n := len(w.Lines("session ending", "ending=shutdown")); n != 2 {
		t.Errorf("%d sessions ended as a shutdown, want 2:\n%s", n, w.Output())
	}
	w.WaitOutput(1, 0, "pending deletions were not sent", wkField("store", a))
	e.checkStore(a, map[string]string{"/a.md": "a2\n", "/n.md": "new\n", "/gone.md": "still here\n"})
	e.checkStore(b, map[string]string{"/b.md": "b1\nb2\n"})
	e.checkStore(c, map[string]string{"/c.md": "c1\n"})
	for _, s := range []*store.Session{s1, s2} {
		if st := e.workOf(s.ID).State; st != store.WorkStopped {
			t.Errorf("the work item of %s is %s after SIGTERM, want stopped", s.ID, st)
		}
		for _, r := range s.Resources {
			wkCheckGone(t, r.MountPath)
		}
	}
}

// TestWorkerKill9: a worker killed outright mid-session, after some edits
// were closed and before any sync, leaves stale mounts; restarted with the
// same state dir it detaches them and removes the directories it had
// created (logging each), the item is offered again once its lease lapses,
// and the new item's token replays the journal: no closed edit is lost and
// no stale mount is left. With the memory root reached through a symlink
// (--memory-root <tmp>/link/mnt, link -> real), the stores are mounted,
// recorded and found again at their canonical paths under <tmp>/real/mnt,
// the paths /proc/self/mountinfo lists.
func TestWorkerKill9(t *testing.T) {
	t.Parallel()
	t.Run("plain memory root", func(t *testing.T) {
		t.Parallel()
		wkKill9(t, newWkEnv(t))
	})
	t.Run("memory root through a symlink", func(t *testing.T) {
		t.Parallel()
		mtRequireFUSE(t)
		wkKill9(t, newWkEnvAt(t, func(base string) (string, string) {
			if err := os.Mkdir(filepath.Join(base, "real"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			r := filepath.Join(base, "link", "mnt")
			return r, r
		}))
	})
}

func wkKill9(t *testing.T, e *wkEnv) {
	orig := map[string]string{"/a.md": "a1\n", "/b.md": "b1\n"}
	st := e.newStore("Scratch", orig)
	ref := e.newStore("Docs", map[string]string{"/d.md": "d\n"})
	w := e.startWorker("--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(st), wkRO(ref))
	e.waitRunning(w, sess)
	dirs := []string{sess.Resources[0].MountPath, sess.Resources[1].MountPath}
	canon := make([]string, len(dirs)) // where the kernel has them
	for i, d := range dirs {
		canon[i] = wkCanonical(t, d)
		w.WaitOutput(1, 0, "memory store mounted", wkField("path", canon[i]))
	}
	mtMustSh(t, dirs[0], `printf 'a2\n' > a.md && echo c1 > c.md && mkdir -p n && echo n1 > n/n.md`)
	w.Kill()
	killed := time.Now()
	for i, d := range canon {
		if !slices.Contains(wkMountinfoDirs(t), d) {
			t.Fatalf("%s is not in the mount table after kill -9; the test needs a stale mount", d)
		}
		if rec := wkMountRecord(t, e.stateDir, sess.Resources[i].MemoryStoreID); rec != d {
			t.Errorf("the state dir records the mount at %s, want the canonical path %s", rec, d)
		}
	}
	e.checkStore(st, orig) // nothing was synced before the kill
	item := e.workOf(sess.ID)
	if item.LatestHeartbeatAt == nil {
		t.Fatal("the killed worker's item has no heartbeat")
	}

	w2 := e.startWorker("--memory-sync-interval", "5s")
	// Recovery runs before the worker polls, and the lease is still held
	// for many seconds: the paths are clean before the item comes back.
	for _, d := range canon {
		w2.WaitOutput(1, 0, "detached a stale mount left by a previous worker", wkField("path", d))
		w2.WaitOutput(1, 0, "removed the mount directory a previous worker created", wkField("path", d))
	}
	wkCheckGone(t, dirs...)
	wkCheckGone(t, canon...)
	if ls := w2.Lines("claimed work item"); len(ls) > 0 {
		t.Fatalf("the item was offered again at once, its lease still held: %s", ls[0])
	}

	w2.WaitOutput(1, wkLapseTimeout, "claimed work item", sess.ID)
	claimed := time.Now()
	lapse := item.LatestHeartbeatAt.Add(store.DefaultLeaseTTL)
	t.Logf("the item was offered again %s after kill -9 (%s after the lease's last heartbeat; TTL %s)",
		claimed.Sub(killed).Round(100*time.Millisecond), claimed.Sub(*item.LatestHeartbeatAt).Round(100*time.Millisecond), store.DefaultLeaseTTL)
	if claimed.Before(lapse.Add(-time.Second)) {
		t.Errorf("the item was offered again at %s, before its lease lapsed at %s", claimed, lapse)
	}
	w2.WaitOutput(1, wkStartTimeout, "replaying changes a previous run left in the journal", wkField("store", st))
	e.waitRunning(w2, sess)
	e.waitStore(st, map[string]string{"/a.md": "a2\n", "/b.md": "b1\n", "/c.md": "c1\n", "/n/n.md": "n1\n"}, wkSyncTimeout)
	for _, d := range canon {
		if m := harness.MountsUnder(d); len(m) != 1 || m[0] != d {
			t.Errorf("mounts at %s: %v, want exactly the new one", d, m)
		}
	}
	if got := mtMustSh(t, dirs[0], "cat a.md c.md n/n.md"); got != "a2\nc1\nn1\n" {
		t.Errorf("the new mount shows %q", got)
	}
	wkStopWorker(t, w2, syscall.SIGTERM)
	wkCheckGone(t, dirs...)
	wkCheckGone(t, canon...)
}

// wkCanonical is p with every symlink above it resolved: where the kernel
// lists a mount at p.
func wkCanonical(t *testing.T, p string) string {
	t.Helper()
	parent, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(parent, filepath.Base(p))
}

// wkMountinfoDirs lists the mount points of /proc/self/mountinfo as the
// kernel writes them (octal escapes decoded), nothing resolved.
func wkMountinfoDirs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, unescape.Replace(f[4]))
		}
	}
	return out
}

// wkMountRecord reads the mount path the worker recorded in its state dir
// for a store (<state dir>/mounts/<store>.json).
func wkMountRecord(t *testing.T, stateDir, storeID string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "mounts", storeID+".json"))
	if err != nil {
		t.Fatalf("the mount record of %s: %v", storeID, err)
	}
	var rec struct {
		MountPath string `json:"mount_path"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.MountPath
}

// TestWorkerLeaseLost: another process takes the item's lease (a real
// heartbeat with the environment key); the worker's next heartbeat
// answers 412, and the session tears down with writes only (a pending
// delete is not sent) and leaves the work item alone: it is not stopped.
// The delete stays in the journal, so the worker's stop exits sgExitLeft.
func TestWorkerLeaseLost(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Lease", map[string]string{"/keep.md": "keep\n", "/edit.md": "v1\n", "/gone.md": "bye\n"})
	w := e.startWorker("--memory-sync-interval", "60s", "--memory-sync-delete-delay", "1ms")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	mtMustSh(t, dir, `printf 'v2\n' > edit.md && echo hi > new.md && rm gone.md`)

	item := e.workOf(sess.ID)
	e.takeLease(item.ID)
	taken := time.Now()
	w.WaitOutput(1, wkBeatTimeout, "lease lost: the work item's heartbeat precondition failed", wkField("work_id", item.ID))
	t.Logf("the worker lost its lease %s after another process took it (next heartbeat)", time.Since(taken).Round(100*time.Millisecond))
	w.WaitOutput(1, wkExitTimeout, "session ending", wkField("ending", "lease lost"), sess.ID)
	w.WaitOutput(1, wkExitTimeout, "memory store unmounted", wkField("path", dir))
	wkCheckGone(t, dir)
	// The worker waits for its sessions before it exits: whatever it did
	// to the item is done by then.
	wkStopWorkerExit(t, w, syscall.SIGTERM, sgExitLeft)
	if l := w.Lines("memfs worker:", "left in the journal", st+": 1 change (1 delete not sent)"); len(l) != 1 {
		t.Errorf("the exit message does not name the delete left in %s's journal:\n%s", st, w.Output())
	}
	e.checkStore(st, map[string]string{"/keep.md": "keep\n", "/edit.md": "v2\n", "/new.md": "hi\n", "/gone.md": "bye\n"})
	got := e.work(item.ID)
	if got.State == store.WorkStopped || got.StoppedAt != nil || got.StopRequestedAt != nil {
		t.Errorf("the worker stopped an item whose lease it had lost: state %s, stop requested %v, stopped %v", got.State, got.StopRequestedAt, got.StoppedAt)
	}
}

// TestWorkerStoreAlreadyMounted: a second session asking for a store that
// another session has mounted on this host is refused with an error
// naming that session, its item is stopped and nothing of it is mounted;
// the first session keeps working.
func TestWorkerStoreAlreadyMounted(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	shared := e.newStore("Shared", map[string]string{"/s.md": "s1\n"})
	other := e.newStore("Other", map[string]string{"/o.md": "o\n"})
	w := e.startWorker("--memory-sync-interval", "5s")
	first := e.newSession(wkRW(shared))
	e.waitRunning(w, first)
	second := e.newSession(wkRW(other), wkRO(shared))
	line := w.WaitOutput(1, wkStartTimeout, "session failed before it started", second.ID)
	if want := "memory store " + shared + " is already mounted on this host by session " + first.ID; !strings.Contains(line, want) {
		t.Errorf("the refusal does not say %q:\n%s", want, line)
	}
	e.waitWorkState(second.ID, store.WorkStopped, wkQuickTimeout)
	wkCheckGone(t, second.Resources[0].MountPath)
	if m := harness.MountsUnder(first.Resources[0].MountPath); len(m) != 1 {
		t.Errorf("mounts at %s: %v, want the first session's only", first.Resources[0].MountPath, m)
	}
	mtMustSh(t, first.Resources[0].MountPath, `printf 's2\n' > s.md`)
	e.waitStore(shared, map[string]string{"/s.md": "s2\n"}, wkSyncTimeout)
	e.checkStore(other, map[string]string{"/o.md": "o\n"})
	if st := e.workOf(first.ID).State; st != store.WorkActive {
		t.Errorf("the first session's item is %s, want active", st)
	}
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestWorkerHealthcheck: a healthcheck item (queued with `memfs
// environments healthcheck`) is claimed and stopped.
func TestWorkerHealthcheck(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	w := e.startWorker("--memory-sync-interval", "5s")
	code, stdout, stderr := wkRun(t, nil, "environments", "healthcheck", e.envID, "--api-url", e.serve.URL, "--api-key", e.serve.AdminKey)
	if code != 0 {
		t.Fatalf("memfs environments healthcheck: exit %d\n%s%s", code, stdout, stderr)
	}
	workID := strings.TrimSpace(stdout)
	if !strings.HasPrefix(workID, store.PrefixWork) {
		t.Fatalf("memfs environments healthcheck printed %q, want a work id", stdout)
	}
	w.WaitOutput(1, wkStartTimeout, "healthcheck work item: stopped", wkField("work_id", workID))
	deadline := time.Now().Add(wkQuickTimeout)
	for e.work(workID).State != store.WorkStopped {
		if time.Now().After(deadline) {
			t.Fatalf("the healthcheck item is %s, want stopped", e.work(workID).State)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if m := harness.MountsUnder(e.root); len(m) > 0 {
		t.Errorf("a healthcheck mounted %v", m)
	}
	wkStopWorker(t, w, syscall.SIGINT)
}

// wkRun runs memfs with args (stdin from stdin when not nil) and returns
// its exit code, stdout and stderr; it fails the test if it runs longer
// than a minute.
func wkRun(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary(t), args...)
	cmd.Stdin = stdin
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("memfs %v did not exit within a minute:\n%s%s", args, out.String(), errb.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run memfs %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestUp: memfs up serves, creates a demo store and a session, and its
// worker mounts it; a person lists, reads and edits it from a shell; the
// edits reach the store (on the interval, and at Ctrl-C), and Ctrl-C
// leaves nothing mounted and exits 0.
func TestUp(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	up := startUp(t, "--memory-sync-interval", "5s")
	if filepath.Dir(up.dir) != up.root || !harness.IsMounted(up.dir) {
		t.Fatalf("the banner says %s is mounted (under %s?):\n%s", up.dir, up.root, up.proc.Output())
	}
	if ls := mtMustSh(t, up.dir, "ls"); ls != "README.md\npreferences\nprojects\n" {
		t.Errorf("ls = %q", ls)
	}
	if out := mtMustSh(t, up.dir, "cat README.md"); !strings.Contains(out, "Demo memory store") {
		t.Errorf("cat README.md = %q", out)
	}
	style := "- Prefers concise answers.\n- Uses tabs, not spaces.\n"
	mtMustSh(t, up.dir, `echo "- Likes examples." >> preferences/style.md`)
	style += "- Likes examples.\n"
	up.waitContent(t, "/preferences/style.md", style) // on the 5 s interval
	upCheckStatusLine(t, up)
	// This one only the final sync at Ctrl-C can upload.
	mtMustSh(t, up.dir, `echo "Next: ship it." >> projects/acme/notes.md`)
	up.proc.Signal(syscall.SIGINT)
	if code := up.proc.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs up exited %d after Ctrl-C:\n%s", code, up.proc.Output())
	}
	if !strings.Contains(up.proc.Output(), "nothing is left mounted") {
		t.Errorf("memfs up did not say it left nothing mounted:\n%s", up.proc.Output())
	}
	if m := harness.MountsUnder(up.root); len(m) > 0 {
		t.Errorf("still mounted after memfs up exited: %v", m)
	}
	wkCheckGone(t, up.dir)

	// The demo session names memfs's default agent, as the hosted API
	// requires (not memfs serve's fallback for a session without one).
	if ids := up.sessionAgentsAfterExit(t); len(ids) != 1 || !strings.HasPrefix(ids[0], store.PrefixAgent) || ids[0] == store.DefaultAgentID {
		t.Errorf("memfs up's sessions ran agents %q, want one session naming the default agent it made", ids)
	}
	got := up.storeAfterExit(t)
	for path, want := range map[string]string{
		"/preferences/style.md":   style,
		"/projects/acme/notes.md": "Acme: weekly sync on Tuesdays. Owner: Dana.\nNext: ship it.\n",
	} {
		if got[path] != want {
			t.Errorf("%s in the store after memfs up exited: %q, want %q", path, got[path], want)
		}
	}
}

// upCheckStatusLine runs the memfs status command memfs up's banner
// suggests, as a person would paste it, and checks that it lists the demo
// mount as one of its own (not as another process's).
func upCheckStatusLine(t *testing.T, up *upInstance) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+(\S+) status --state-dir (\S+)$`).FindStringSubmatch(up.proc.Output())
	if m == nil {
		t.Fatalf("the banner suggests no memfs status command:\n%s", up.proc.Output())
	}
	out, err := exec.Command(m[1], "status", "--state-dir", m[2]).CombinedOutput()
	if err != nil {
		t.Fatalf("%s status --state-dir %s: %v\n%s", m[1], m[2], err, out)
	}
	own, _, _ := strings.Cut(string(out), "OTHER MEMFS MOUNTS")
	own, _, _ = strings.Cut(own, "DEAD MOUNTS")
	if !strings.Contains(own, up.dir) || !strings.Contains(own, up.storeID) {
		t.Errorf("the banner's status command does not list %s (%s) as its mount:\n%s", up.dir, up.storeID, out)
	}
}
