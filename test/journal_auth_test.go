package test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// Journal authentication (docs/formats.md, "Authentication and sessions")
// on real processes: a journal
// is uploaded only by the state dir that wrote it, and only with the
// credential of the session that wrote it.

// ajSetAside is a refused or held journal as memfs status --json lists it.
type ajSetAside struct {
	StoreID string `json:"store_id"`
	Path    string `json:"path"`
	Reason  string `json:"reason"`
	Session string `json:"session"`
}

// ajStatus reads the refused and held journals from memfs status --json.
func ajStatus(t *testing.T, stateDir string) (refused, held []ajSetAside) {
	t.Helper()
	out, errb, code := cvMemfs(t, nil, "status", "--json", "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("memfs status exited %d: %s%s", code, out, errb)
	}
	var st struct {
		Refused []ajSetAside `json:"refused_journals"`
		Held    []ajSetAside `json:"held_journals"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("memfs status --json: %v\n%s", err, out)
	}
	return st.Refused, st.Held
}

// ajVersions lists every version of a store.
func ajVersions(t *testing.T, e *wkEnv, storeID string) []store.Version {
	t.Helper()
	page, err := e.admin.ListVersions(context.Background(), storeID, store.ListVersionsOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return page.Data
}

// ajVersionsOf lists the versions of a store at path, oldest first.
func ajVersionsOf(t *testing.T, e *wkEnv, storeID, path string) []store.Version {
	t.Helper()
	var out []store.Version
	for _, v := range ajVersions(t, e, storeID) {
		if v.Path != nil && *v.Path == path {
			out = append([]store.Version{v}, out...)
		}
	}
	return out
}

// The planted-journal attack: a journal written by a mount in a scratch
// state dir (its own identity and key; here with an admin key, as an
// agent with a stolen token would) is copied into the worker's state dir
// under the store's id. The next session's mount uploads nothing from it:
// it is refused, moved aside byte for byte, and memfs status reports it
// with its path until someone removes it.
func TestJournalPlantedFromScratchStateDir(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Planted", map[string]string{"/a.md": "a1\n"})
	scratch := filepath.Join(e.base, "scratch-state")
	m := harness.StartMount(t, harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: st,
		Dir: filepath.Join(e.base, "scratch-mnt"), StateDir: scratch, Args: []string{"--memory-sync-interval", "60s"}})
	mtMustSh(t, m.Dir, `printf 'forged\n' > a.md && printf 'evil\n' > evil.md`)
	m.Kill()
	if err := unix.Unmount(m.Dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	planted, err := os.ReadFile(filepath.Join(syncqueue.JournalDir(scratch, st), "journal"))
	if err != nil || !bytes.Contains(planted, []byte("evil\n")) {
		t.Fatalf("the scratch mount's journal does not hold its change: %v", err)
	}
	dir := syncqueue.JournalDir(e.stateDir, st)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	wkWriteFile(t, dir, "journal", planted, 0o600) // as the worker's user: only the key tells

	w := e.startWorker("--memory-sync-interval", "5s")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	w.WaitOutput(1, wkQuickTimeout, "JOURNAL REFUSED", "written in another state dir")
	// A pass of the session's mount goes up; nothing of the planted
	// journal does.
	mtMustSh(t, sess.Resources[0].MountPath, `printf 'y\n' > y.md`)
	e.waitStore(st, map[string]string{"/a.md": "a1\n", "/y.md": "y\n"}, wkSyncTimeout)
	wkStopWorker(t, w, syscall.SIGTERM)
	e.checkStore(st, map[string]string{"/a.md": "a1\n", "/y.md": "y\n"})
	if vs := ajVersionsOf(t, e, st, "/a.md"); len(vs) != 1 {
		t.Errorf("/a.md has %d versions, want only its first", len(vs))
	}
	if vs := ajVersionsOf(t, e, st, "/evil.md"); len(vs) != 0 {
		t.Errorf("/evil.md has versions: %+v", vs)
	}

	refused, held := ajStatus(t, e.stateDir)
	if len(refused) != 1 || len(held) != 0 {
		t.Fatalf("memfs status lists refused %+v, held %+v; want the planted journal refused", refused, held)
	}
	r := refused[0]
	if r.StoreID != st || !strings.HasPrefix(r.Path, filepath.Join(dir, "refused")+"/") || !strings.Contains(r.Reason, "another state dir") {
		t.Errorf("memfs status lists the refused journal as %+v", r)
	}
	if got, err := os.ReadFile(r.Path); err != nil || !bytes.Equal(got, planted) {
		t.Errorf("the refused journal is not kept byte for byte at %s: %v", r.Path, err)
	}
	if out, _, _ := cvMemfs(t, nil, "status", "--state-dir", e.stateDir); !strings.Contains(out, "REFUSED JOURNALS") || !strings.Contains(out, r.Path) {
		t.Errorf("memfs status does not show the refused journal:\n%s", out)
	}
	// Until someone removes it.
	if err := os.RemoveAll(filepath.Dir(r.Path)); err != nil {
		t.Fatal(err)
	}
	if refused, _ := ajStatus(t, e.stateDir); len(refused) != 0 {
		t.Errorf("memfs status still lists %+v after its removal", refused)
	}

	// memfs replay refuses it too; --trust-journal, an operator's word,
	// takes it up, and the key uploads it.
	wkWriteFile(t, dir, "journal", planted, 0o600)
	keyFile := wkWriteFile(t, t.TempDir(), "admin.key", []byte(e.serve.AdminKey+"\n"), 0o600)
	replay := []string{"replay", "--api-url", e.serve.URL, "--api-key-file", keyFile, "--state-dir", e.stateDir}
	out, errb, code := cvMemfs(t, nil, replay...)
	if code != 0 || !strings.Contains(out, st+": 0 uploaded") {
		t.Errorf("memfs replay of a planted journal: exit %d:\n%s%s", code, out, errb)
	}
	e.checkStore(st, map[string]string{"/a.md": "a1\n", "/y.md": "y\n"})
	refused, _ = ajStatus(t, e.stateDir)
	if len(refused) != 1 {
		t.Fatalf("memfs replay did not refuse the planted journal: %+v", refused)
	}
	out, errb, code = cvMemfs(t, nil, append(replay, "--trust-journal", refused[0].Path)...)
	if code != 0 || !strings.Contains(out, "took up 2 pending change(s)") {
		t.Errorf("memfs replay --trust-journal: exit %d:\n%s%s", code, out, errb)
	}
	e.checkStore(st, map[string]string{"/a.md": "forged\n", "/y.md": "y\n", "/evil.md": "evil\n"})
	if vs := ajVersionsOf(t, e, st, "/evil.md"); len(vs) != 1 || vs[0].CreatedBy == nil || vs[0].CreatedBy.Type != store.ActorAPI {
		t.Errorf("the versions of /evil.md after --trust-journal: %+v, want one by the key", vs)
	}
	if _, err := os.Stat(refused[0].Path + ".trusted"); err != nil {
		t.Errorf("the journal taken up is not kept: %v", err)
	}
	if refused, _ := ajStatus(t, e.stateDir); len(refused) != 0 {
		t.Errorf("memfs status still lists %+v after --trust-journal", refused)
	}
}

// ajKilledSession runs session X of store st with memfs session, makes a
// change in it and kills the process (-9) before any pass: the change is
// pending in the journal, written in session X.
func ajKilledSession(t *testing.T, e *wkEnv, st string) *store.Session {
	t.Helper()
	x := e.newSession(wkRW(st))
	p := ajRunSession(t, e, x.ID, "--memory-sync-interval", "60s")
	mtMustSh(t, x.Resources[0].MountPath, `printf 'by x\n' > x.md`)
	p.Kill()
	p.Wait(wkExitTimeout)
	e.checkStore(st, map[string]string{"/a.md": "a1\n"})
	return x
}

// ajRunSession polls the next work item (it must be sessionID's), runs it
// with memfs session in the env's state dir, and waits until it runs.
func ajRunSession(t *testing.T, e *wkEnv, sessionID string, args ...string) *harness.Proc {
	t.Helper()
	raw := ajPoll(t, e, wkLapseTimeout)
	if d, _ := raw["data"].(map[string]any); d["id"] != sessionID {
		t.Fatalf("polled the work item of %v, want session %s", d["id"], sessionID)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	work := wkWriteFile(t, t.TempDir(), "work.json", b, 0o600)
	p := harness.StartProc(t, harness.ProcOptions{}, append([]string{"session", "--api-url", e.serve.URL, "--memory-root", e.root,
		"--state-dir", e.stateDir, "--work-json", work}, args...)...)
	t.Cleanup(func() { harness.DetachUnder(e.root) })
	p.WaitOutput(1, wkStartTimeout, "session running", sessionID)
	return p
}

// ajPoll polls the environment's queue until it offers an item (a killed
// process's item comes back once its lease lapses), acks it and returns
// it as JSON.
func ajPoll(t *testing.T, e *wkEnv, timeout time.Duration) map[string]any {
	t.Helper()
	path := "/v1/environments/" + e.envID + "/work/poll"
	deadline := time.Now().Add(timeout)
	for {
		r := e.call(http.MethodGet, path, e.envKey, url.Values{"block_ms": {"999"}}, nil)
		if r.status != http.StatusOK {
			t.Fatalf("poll: %s", r)
		}
		var raw map[string]any
		if b := bytes.TrimSpace(r.body); len(b) > 0 && string(b) != "null" {
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
		}
		if id, _ := raw["id"].(string); id != "" {
			if r := e.call(http.MethodPost, "/v1/environments/"+e.envID+"/work/"+id+"/ack", e.envKey, nil, nil); r.status != http.StatusOK {
				t.Fatalf("ack: %s", r)
			}
			return raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing to poll within %s", timeout)
		}
	}
}

// A change left by a killed session X is never uploaded with the token of
// session Y, which mounts the store next on this host: the store's
// versions would credit it to Y. Without a replay key it is held for X
// (memfs status says so) and uploaded with X's token when X's item runs
// again; with --replay-api-key it is uploaded with the key, the actor of
// its version, before Y's mount.
func TestJournalChangesKeepTheirSession(t *testing.T) {
	t.Parallel()
	t.Run("held for its session", func(t *testing.T) {
		t.Parallel()
		e := newWkEnv(t)
		st := e.newStore("Shared", map[string]string{"/a.md": "a1\n"})
		x := ajKilledSession(t, e, st)

		y := e.newSession(wkRW(st)) // X's item is still leased: Y's comes first
		p := ajRunSession(t, e, y.ID, "--memory-sync-interval", "5s")
		// A pass of Y's mount goes up, and X's change is not in it.
		mtMustSh(t, y.Resources[0].MountPath, `printf 'by y\n' > y.md`)
		e.waitStore(st, map[string]string{"/a.md": "a1\n", "/y.md": "by y\n"}, wkSyncTimeout)
		if vs := ajVersionsOf(t, e, st, "/x.md"); len(vs) != 0 {
			t.Fatalf("X's change went up while Y had the store: %+v", vs)
		}
		p.WaitOutput(1, 0, "holds changes written in session "+x.ID)
		_, held := ajStatus(t, e.stateDir)
		if len(held) != 1 || held[0].Session != x.ID || held[0].StoreID != st {
			t.Fatalf("memfs status lists held journals %+v, want one of session %s", held, x.ID)
		}
		if _, err := os.Stat(held[0].Path); err != nil {
			t.Fatal(err)
		}
		if out, _, _ := cvMemfs(t, nil, "status", "--state-dir", e.stateDir); !strings.Contains(out, "HELD JOURNALS") || !strings.Contains(out, "waiting for session "+x.ID+"'s next run") {
			t.Errorf("memfs status does not show the held journal:\n%s", out)
		}
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(wkExitTimeout); code != 0 {
			t.Fatalf("memfs session of Y exited %d:\n%s", code, p.Output())
		}
		e.checkStore(st, map[string]string{"/a.md": "a1\n", "/y.md": "by y\n"})
		for _, v := range ajVersions(t, e, st) {
			if v.CreatedBy != nil && v.CreatedBy.SessionID == y.ID && (v.Path == nil || *v.Path != "/y.md") {
				t.Errorf("a version by session Y that is not Y's change: %+v", v)
			}
		}

		// X's item comes back once its lease lapses: its held journal is
		// taken up and uploaded with X's token.
		p = ajRunSession(t, e, x.ID, "--memory-sync-interval", "5s")
		e.waitStore(st, map[string]string{"/a.md": "a1\n", "/y.md": "by y\n", "/x.md": "by x\n"}, wkSyncTimeout)
		vs := ajVersionsOf(t, e, st, "/x.md")
		if len(vs) != 1 || vs[0].CreatedBy == nil || vs[0].CreatedBy.Type != store.ActorSession || vs[0].CreatedBy.SessionID != x.ID {
			t.Errorf("the versions of /x.md: %+v, want one by session %s", vs, x.ID)
		}
		if _, held := ajStatus(t, e.stateDir); len(held) != 0 {
			t.Errorf("memfs status still lists held journals %+v", held)
		}
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(wkExitTimeout); code != 0 {
			t.Fatalf("memfs session of X exited %d:\n%s", code, p.Output())
		}
	})
	t.Run("replayed with the replay API key", func(t *testing.T) {
		t.Parallel()
		e := newWkEnv(t)
		st := e.newStore("Shared", map[string]string{"/a.md": "a1\n"})
		x := ajKilledSession(t, e, st)
		keyFile := wkWriteFile(t, t.TempDir(), "replay.key", []byte(e.serve.AdminKey+"\n"), 0o600)

		y := e.newSession(wkRW(st))
		p := ajRunSession(t, e, y.ID, "--memory-sync-interval", "5s", "--replay-api-key-file", keyFile)
		p.WaitOutput(1, 0, "written in session "+x.ID+", uploaded with the replay API key")
		e.checkStore(st, map[string]string{"/a.md": "a1\n", "/x.md": "by x\n"})
		vs := ajVersionsOf(t, e, st, "/x.md")
		if len(vs) != 1 || vs[0].CreatedBy == nil || vs[0].CreatedBy.Type != store.ActorAPI {
			t.Errorf("the versions of /x.md: %+v, want one by the replay API key", vs)
		}
		if _, held := ajStatus(t, e.stateDir); len(held) != 0 {
			t.Errorf("memfs status lists held journals %+v", held)
		}
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(wkExitTimeout); code != 0 {
			t.Fatalf("memfs session of Y exited %d:\n%s", code, p.Output())
		}
	})
}

// A state dir another user owns is refused at start, exit 2, before
// anything is mounted or replayed; one open to group and others is
// closed, with one warning.
func TestStateDirOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	t.Cleanup(func() { harness.DetachUnder(filepath.Dir(e.dir)) }) // a mount that should not have been
	if err := os.MkdirAll(filepath.Join(e.stateDir, "stores"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(e.stateDir, "stores"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	keyFile := wkWriteFile(t, t.TempDir(), "admin.key", []byte(e.serve.AdminKey+"\n"), 0o600)
	mo := e.opts()
	mo.APIKeyFile = keyFile
	for _, args := range [][]string{
		mo.CommandArgs(),
		{"replay", "--api-url", e.serve.URL, "--api-key-file", keyFile, "--state-dir", e.stateDir},
	} {
		out, errb, code := cvMemfs(t, nil, args...)
		if code != 2 || !strings.Contains(errb, "is owned by uid 65534") {
			t.Errorf("memfs %s with a state dir of another user: exit %d, want 2:\n%s%s", args[0], code, out, errb)
		}
	}
	if harness.IsMounted(e.dir) {
		t.Fatal("mounted anyway")
	}

	if err := os.Chown(filepath.Join(e.stateDir, "stores"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.stateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	m := e.mount()
	if n := len(m.Lines("the state dir was open to other users")); n != 1 {
		t.Errorf("%d warnings about the open state dir, want 1:\n%s", n, m.Output())
	}
	if fi, err := os.Stat(e.stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the state dir's mode after the mount: %v, %v", fi.Mode().Perm(), err)
	}
	mtStop(t, m)
}
