package test

// The history commands against real memfs serve processes on SQLite and
// PostgreSQL: a mount of the store as it was (mount --at), memfs log,
// show, diff and restore, and stores revert of a session's changes.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memfs/memfs/history"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/test/harness"
)

// hsEnv is a memfs serve process with one store, on a backend. It runs
// with the change feed off (--change-feed=false answers its route 404):
// the hosted path, since the history commands use only the hosted API's
// routes (memories, memory versions).
type hsEnv struct {
	*mtEnv
}

func newHsEnv(t *testing.T, db string, files map[string]string) *hsEnv {
	t.Helper()
	return &hsEnv{newMtEnvModeWith(t, mtDirectory, files, harness.ServeOptions{DB: db, Args: []string{"--change-feed=false"}})}
}

// run runs `memfs ARGS...` with the serve's URL and admin key in the
// environment; it returns stdout, stderr and the exit status.
func (e *hsEnv) run(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(harness.Binary(e.t), args...)
	cmd.Env = append(cmd.Environ(), "MEMFS_API_URL="+e.serve.URL, "MEMFS_API_KEY="+e.serve.AdminKey)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("memfs %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// ok runs a command that must exit 0 and returns its stdout.
func (e *hsEnv) ok(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("memfs %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// session starts a session on the store and claims its work item, as a
// worker would: the client it returns writes with the session's token,
// so its versions are the session's (session_actor).
func (e *hsEnv) session() (string, *client.Client) {
	e.t.Helper()
	ctx := context.Background()
	env, err := e.cl.CreateEnvironment(ctx, client.CreateEnvironmentInput{Name: "history"})
	if err != nil {
		e.t.Fatal(err)
	}
	sess, err := e.cl.CreateSession(ctx, client.CreateSessionInput{EnvironmentID: env.ID,
		Resources: []client.SessionResourceInput{{MemoryStoreID: e.storeID, Access: store.AccessReadWrite}}})
	if err != nil {
		e.t.Fatal(err)
	}
	envc, err := client.New(client.Options{BaseURL: e.serve.URL, APIKey: env.EnvironmentKey})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := envc.PollWork(ctx, env.ID, "history-test", 900*time.Millisecond)
	if err != nil || w == nil || w.Secret == nil {
		e.t.Fatalf("claim the session's work: %+v, %v", w, err)
	}
	if _, err := envc.AckWork(ctx, env.ID, w.ID); err != nil {
		e.t.Fatal(err)
	}
	// The secret is base64url JSON holding the sessions token, as the
	// SDK's worker reads it.
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(*w.Secret, "="))
	var secret struct {
		SessionsToken string `json:"sessions_token"`
	}
	if err != nil || json.Unmarshal(raw, &secret) != nil || secret.SessionsToken == "" {
		e.t.Fatalf("the work item's secret holds no sessions token: %q (%v)", *w.Secret, err)
	}
	sc, err := client.New(client.Options{BaseURL: e.serve.URL, APIKey: secret.SessionsToken})
	if err != nil {
		e.t.Fatal(err)
	}
	return sess.ID, sc
}

// byPath finds the live memory at p.
func (e *hsEnv) byPath(p string) *store.Memory {
	e.t.Helper()
	m, err := e.cl.MemoryByPath(context.Background(), e.storeID, p)
	if err != nil {
		e.t.Fatalf("memory at %s: %v", p, err)
	}
	return m
}

func hsPut(t *testing.T, c *client.Client, storeID, p, content string) *store.Memory {
	t.Helper()
	ctx := context.Background()
	m, err := c.MemoryByPath(ctx, storeID, p)
	if errors.Is(err, store.ErrNotFound) {
		m, err = c.CreateMemory(ctx, storeID, p, content)
	} else if err == nil {
		m, err = c.UpdateMemory(ctx, storeID, m.ID, store.UpdateMemoryInput{Content: &content})
	}
	if err != nil {
		t.Fatalf("put %s: %v", p, err)
	}
	return m
}

func hsMove(t *testing.T, c *client.Client, storeID, from, to string) {
	t.Helper()
	ctx := context.Background()
	m, err := c.MemoryByPath(ctx, storeID, from)
	if err == nil {
		_, err = c.UpdateMemory(ctx, storeID, m.ID, store.UpdateMemoryInput{Path: &to})
	}
	if err != nil {
		t.Fatalf("move %s to %s: %v", from, to, err)
	}
}

func hsDelete(t *testing.T, c *client.Client, storeID, p string) {
	t.Helper()
	ctx := context.Background()
	m, err := c.MemoryByPath(ctx, storeID, p)
	if err == nil {
		err = c.DeleteMemory(ctx, storeID, m.ID, nil)
	}
	if err != nil {
		t.Fatalf("delete %s: %v", p, err)
	}
}

// hsCut is a moment between two phases of writes: the store's clock is
// this machine's, and a millisecond on either side keeps the versions of
// the two phases on their own side of it.
func hsCut() time.Time {
	time.Sleep(5 * time.Millisecond)
	t := time.Now()
	time.Sleep(5 * time.Millisecond)
	return t
}

// replayVersions is the store at at, replayed from its versions (full
// view) oldest first: what an --at mount must show. Redacted versions have
// no path or content: their memory is left out from then on.
func (e *hsEnv) replayVersions(at time.Time) map[string]string {
	e.t.Helper()
	var all []store.Version
	for v, err := range e.cl.Versions(context.Background(), e.storeID, store.ListVersionsOptions{Full: true}) {
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, v)
	}
	slices.Reverse(all)
	byMem := map[string][2]string{}
	for _, v := range all {
		if v.CreatedAt.After(at) {
			break
		}
		if v.Operation == store.OpDeleted || v.Content == nil {
			delete(byMem, v.MemoryID)
			continue
		}
		byMem[v.MemoryID] = [2]string{*v.Path, *v.Content}
	}
	out := map[string]string{}
	for _, pc := range byMem {
		out[pc[0]] = pc[1]
	}
	return out
}

// TestHistoryAtMount mounts a store as it was (in both mount modes) at
// four moments of its history (creates; an edit, a move, a delete and a
// create; a delete and a create at the same path, an edit; after every
// version) and checks that each mount holds exactly, in paths and bytes,
// what was written up to then, and what a replay of the versions to then
// gives. A version redacted since is decided: its memory is left out at
// that moment, with a warning.
func TestHistoryAtMount(t *testing.T) {
	mtRequireFUSE(t)
	for _, b := range serveBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newHsEnv(t, b.db(t), nil)
			cl, st := e.cl, e.storeID
			model := map[string]string{}
			put := func(p, c string) { hsPut(t, cl, st, p, c); model[p] = c }
			put("/a.md", "alpha one\n")
			put("/d/b.md", "bravo\n")
			put("/d/e/c.md", "charlie\n")
			t1, at1 := hsCut(), maps.Clone(model)

			put("/a.md", "alpha two\n")
			hsMove(t, cl, st, "/d/b.md", "/moved.md")
			model["/moved.md"] = model["/d/b.md"]
			delete(model, "/d/b.md")
			hsDelete(t, cl, st, "/d/e/c.md")
			delete(model, "/d/e/c.md")
			put("/n.md", "november\n")
			t2, at2 := hsCut(), maps.Clone(model)

			hsDelete(t, cl, st, "/a.md")
			put("/a.md", "alpha again, a new memory\n")
			put("/moved.md", "bravo, edited after the move\n")
			t3, at3 := hsCut(), maps.Clone(model)
			put("/later.md", "after every cut\n")

			// The version /n.md was created with is redacted: at t2 the
			// memory is left out (it has a later version, so its creation
			// is not its head and can be redacted).
			n := e.byPath("/n.md")
			hsPut(t, cl, st, "/n.md", "november, second\n")
			vs := e.versions(n.ID)
			if _, err := cl.RedactVersion(context.Background(), st, vs[0].ID); err != nil {
				t.Fatal(err)
			}
			delete(at2, "/n.md")
			delete(at3, "/n.md")
			// A fourth cut after every version: the store now is the store
			// then ("as now": the mount's own listing, checked after it).
			t4, at4 := hsCut(), e.contents()

			for i, c := range []struct {
				at   time.Time
				want map[string]string
			}{{t1, at1}, {t2, at2}, {t3, at3}, {t4, at4}} {
				if d := mtDiff(e.replayVersions(c.at), c.want); d != "" {
					t.Fatalf("cut %d: the versions replayed differ from what was written:\n%s", i+1, d)
				}
				for _, mode := range mtModes {
					dir := filepath.Join(t.TempDir(), "past")
					m := harness.StartMount(t, harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: st, Dir: dir,
						Args: []string{"--at", c.at.UTC().Format(time.RFC3339Nano), "--mount-mode", mode}, Directory: mode == mtDirectory})
					if d := mtDiff(mtMountFiles(t, m.Dir), c.want); d != "" {
						t.Errorf("cut %d, %s: the --at mount differs from the store then (- mount, + then):\n%s", i+1, mode, d)
					}
					redacted := strings.Contains(m.Output(), "redacted_left_out=1")
					if want := i == 1 || i == 2; redacted != want {
						t.Errorf("cut %d, %s: the warning about a redacted version: %v, want %v:\n%s", i+1, mode, redacted, want, m.Output())
					}
					if i == 0 && mode == mtFUSE {
						st := e.ok("status", "--state-dir", m.Opts.StateDir)
						if !strings.Contains(st, "as of") || !strings.Contains(st, c.at.UTC().Format(time.RFC3339Nano)) || !strings.Contains(st, "read_only") {
							t.Errorf("memfs status of an --at mount does not say as of when:\n%s", st)
						}
					}
					if mode == mtFUSE {
						if _, errOut, err := mtSh(t, m.Dir, "echo x > a.md"); err == nil || !strings.Contains(errOut, "Read-only file system") {
							t.Errorf("cut %d: a write to the past: %v, %q; want EROFS", i+1, err, errOut)
						}
					}
					mtStop(t, m)
				}
			}
		})
	}
}

// TestHistoryRevertSession undoes a session that created, edited, moved
// and deleted memories. A memory another session changed after it is
// reported and left alone, and --force then reverts it too; the revert's
// versions are the admin key's; --dry-run writes nothing; --since undoes
// every change after a time, whoever made it.
func TestHistoryRevertSession(t *testing.T) {
	for _, b := range serveBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newHsEnv(t, b.db(t), map[string]string{
				"/edit.md": "e0\n", "/move.md": "m\n", "/gone.md": "g\n", "/both.md": "b0\n", "/keep.md": "k\n"})
			st := e.storeID
			before := e.contents()
			moveID, gone := e.byPath("/move.md").ID, e.byPath("/gone.md").ID

			sa, ca := e.session()
			hsPut(t, ca, st, "/new.md", "made by the session\n")
			hsPut(t, ca, st, "/edit.md", "e1\n")
			hsPut(t, ca, st, "/edit.md", "e2 (injected)\n")
			hsMove(t, ca, st, "/move.md", "/moved.md")
			hsDelete(t, ca, st, "/gone.md")
			hsPut(t, ca, st, "/both.md", "b1\n")
			_, cb := e.session()
			hsPut(t, cb, st, "/both.md", "b2 (another session's)\n")
			after := e.contents()

			out := e.ok("stores", "revert", st, "--session", sa, "--dry-run")
			for _, want := range []string{"delete", "/new.md", "restore", "/moved.md", "/move.md", "recreate", "/gone.md",
				"left alone: changed since by session:"} {
				if !strings.Contains(out, want) {
					t.Errorf("the dry run's plan lacks %q:\n%s", want, out)
				}
			}
			if d := mtDiff(e.contents(), after); d != "" {
				t.Fatalf("--dry-run changed the store:\n%s", d)
			}

			out, errOut, code := e.run("stores", "revert", st, "--session", sa)
			if code != 1 || !strings.Contains(errOut, "1 of the memories were left alone") {
				t.Errorf("revert with a memory changed since: exit %d, stderr %q; want 1, saying one was left alone\n%s", code, errOut, out)
			}
			want := maps.Clone(before)
			want["/both.md"] = "b2 (another session's)\n"
			if d := mtDiff(e.contents(), want); d != "" {
				t.Errorf("after the revert (- store, + want):\n%s", d)
			}
			if m := e.byPath("/move.md"); m.ID != moveID {
				t.Errorf("the moved memory came back as %s, want its own id %s", m.ID, moveID)
			}
			if m := e.byPath("/gone.md"); m.ID == gone {
				t.Errorf("the deleted memory came back with its old id")
			}
			// The revert's versions are new ones, by the admin key.
			for _, v := range e.versions(moveID)[2:] {
				if v.CreatedBy == nil || v.CreatedBy.Type != store.ActorAPI {
					t.Errorf("a version of the revert is by %+v, want the admin key", v.CreatedBy)
				}
			}
			// Reverting again: nothing left to do but the one left alone.
			if out, _, code := e.run("stores", "revert", st, "--session", sa); code != 1 || strings.Contains(out, "done") {
				t.Errorf("a second revert: exit %d, did something:\n%s", code, out)
			}
			e.ok("stores", "revert", st, "--session", sa, "--force")
			if got := e.contents()["/both.md"]; got != "b0\n" {
				t.Errorf("--force left /both.md at %q, want b0", got)
			}

			// --since: everything after the cut goes, whoever made it.
			cut := hsCut()
			hsPut(t, e.cl, st, "/keep.md", "k, edited by the admin\n")
			hsPut(t, cb, st, "/late.md", "late\n")
			beforeSince := e.contents()
			e.ok("stores", "revert", st, "--since", cut.UTC().Format(time.RFC3339Nano))
			wantSince := maps.Clone(beforeSince)
			wantSince["/keep.md"] = "k\n"
			delete(wantSince, "/late.md")
			if d := mtDiff(e.contents(), wantSince); d != "" {
				t.Errorf("after revert --since (- store, + want):\n%s", d)
			}
			if _, errOut, code := e.run("stores", "revert", st, "--since", "yesterday"); code != 2 || !strings.Contains(errOut, "duration ago") {
				t.Errorf("a bad --since: exit %d, %q", code, errOut)
			}
			if _, errOut, code := e.run("stores", "revert", st); code != 2 || !strings.Contains(errOut, "--session ID or --since TIME") {
				t.Errorf("revert without a scope: exit %d, %q", code, errOut)
			}
		})
	}
}

// TestHistoryRestore restores a memory to a version and to a time, and
// checks that a change made after the restore read the memory is refused,
// not overwritten: from the command (--expect-sha, the sha seen), and at
// the store (the precondition of the write itself).
func TestHistoryRestore(t *testing.T) {
	for _, b := range serveBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newHsEnv(t, b.db(t), map[string]string{"/r.md": "one\n"})
			st := e.storeID
			id := e.byPath("/r.md").ID
			cut := hsCut()
			hsPut(t, e.cl, st, "/r.md", "two\n")
			v1 := e.versions(id)[0]

			if out := e.ok("restore", "--store", st, "/r.md", "--to", v1.ID); !strings.Contains(out, "restored /r.md") {
				t.Errorf("restore printed %q", out)
			}
			if got := e.contents()["/r.md"]; got != "one\n" {
				t.Fatalf("after the restore: %q", got)
			}
			hsPut(t, e.cl, st, "/r.md", "three\n")
			if out := e.ok("restore", "--store", st, id, "--to", cut.UTC().Format(time.RFC3339Nano)); !strings.Contains(out, "restored") {
				t.Errorf("restore to a time printed %q", out)
			}
			if got := e.contents()["/r.md"]; got != "one\n" {
				t.Fatalf("after the restore to a time: %q", got)
			}

			// Seen: the sha of "three"; meanwhile another writer makes "four".
			hsPut(t, e.cl, st, "/r.md", "three\n")
			seen := e.byPath("/r.md")
			hsPut(t, e.cl, st, "/r.md", "four\n")
			_, errOut, code := e.run("restore", "--store", st, "/r.md", "--to", v1.ID, "--expect-sha", seen.ContentSHA256)
			if code != 1 || !strings.Contains(errOut, "changed since you looked") {
				t.Errorf("restore over a change made since: exit %d, %q; want refused", code, errOut)
			}
			// The store's own precondition: the write carries the sha the
			// restore read, and a change after that read is refused.
			back, err := e.cl.GetVersion(context.Background(), st, v1.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := history.Restore(context.Background(), e.cl, st, seen, back); !errors.Is(err, store.ErrPreconditionFailed) {
				t.Errorf("Restore with a stale read: %v, want ErrPreconditionFailed", err)
			}
			if got := e.contents()["/r.md"]; got != "four\n" {
				t.Errorf("the concurrent change was overwritten: %q", got)
			}
			vs := e.versions(id)
			if _, errOut, code := e.run("restore", "--store", st, "/r.md", "--to", "2000-01-01T00:00:00Z"); code != 1 || !strings.Contains(errOut, "no version at or before") {
				t.Errorf("restore to before the memory existed: exit %d, %q", code, errOut)
			}
			if n := len(e.versions(id)); n != len(vs) {
				t.Errorf("a refused restore made %d versions", n-len(vs))
			}
		})
	}
}

// TestHistoryOnMount runs log, show and diff on a file of a mount (a
// folder in directory mode: the store found from its marker), and checks
// diff's exit statuses.
func TestHistoryOnMount(t *testing.T) {
	for _, b := range serveBackends {
		t.Run(b.name, func(t *testing.T) { hsOnMount(t, b.db(t)) })
	}
}

func hsOnMount(t *testing.T, db string) {
	e := newHsEnv(t, db, map[string]string{"/notes/a.md": "first line\n"})
	hsPut(t, e.cl, e.storeID, "/notes/a.md", "first line\nsecond line\n")
	e.mode = mtDirectory
	m := e.mount()
	defer mtStop(t, m)
	file := filepath.Join(m.Dir, "notes", "a.md")
	id := e.byPath("/notes/a.md").ID
	vs := e.versions(id)

	rows := lines(e.ok("log", file))
	if len(rows) != 3 || rows[0][0] != "VERSION" || rows[1][0] != vs[1].ID || rows[1][2] != "modified" || rows[2][0] != vs[0].ID || rows[2][2] != "created" || !strings.HasPrefix(rows[2][3], "key:") {
		t.Errorf("memfs log =\n%v", rows)
	}
	if got := e.ok("show", file+"@"+vs[0].ID); got != "first line\n" {
		t.Errorf("show @first version = %q", got)
	}
	if got := e.ok("show", file+"@0s"); got != "first line\nsecond line\n" {
		t.Errorf("show @0s (now) = %q", got)
	}
	out, _, code := e.run("diff", file)
	if code != 1 || !strings.Contains(out, "+second line\n") || !strings.Contains(out, "--- /notes/a.md@"+vs[0].ID) {
		t.Errorf("diff against the previous version: exit %d\n%s", code, out)
	}
	if out, _, code := e.run("diff", file, vs[1].ID); code != 0 || out != "" {
		t.Errorf("diff of the current version with itself: exit %d, %q", code, out)
	}
	if _, errOut, code := e.run("diff", file, "memver_nope"); code != 2 || errOut == "" {
		t.Errorf("diff against a version that does not exist: exit %d, %q; want 2", code, errOut)
	}
	if _, errOut, code := e.run("log", filepath.Join(t.TempDir(), "x.md")); code != 2 || !strings.Contains(errOut, "not on a mounted memory store") {
		t.Errorf("log of a file on no mount: exit %d, %q", code, errOut)
	}
}

// lines splits output into rows of whitespace-separated fields.
func lines(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// TestHistoryAtMountChangedWhileRead: a mount --at a moment after the
// last version lists the store itself ("as now"); a memory created while
// it lists (a proxy creates it as the first listing passes) is newer
// than the moment, so the mount is made again from the versions, and
// the file is not in it.
func TestHistoryAtMountChangedWhileRead(t *testing.T) {
	e := newHsEnv(t, "", map[string]string{"/a.md": "alpha\n", "/d/b.md": "bravo\n"})
	want := e.contents()
	at := hsCut()
	target, err := url.Parse(e.serve.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/memories") {
			once.Do(func() { hsPut(t, e.cl, e.storeID, "/intruder.md", "made while the past was read\n") })
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	m := harness.StartMount(t, harness.MountOptions{URL: proxy.URL, APIKey: e.serve.AdminKey, Store: e.storeID,
		Dir: filepath.Join(t.TempDir(), "past"), Directory: true,
		Args: []string{"--at", at.UTC().Format(time.RFC3339Nano), "--mount-mode", mtDirectory}})
	defer mtStop(t, m)
	if !strings.Contains(m.Output(), "mounting it again from its versions") {
		t.Errorf("the mount did not say it was made again:\n%s", m.Output())
	}
	if d := mtDiff(mtMountFiles(t, m.Dir), want); d != "" {
		t.Errorf("the --at mount differs from the store then (- mount, + then):\n%s", d)
	}
	if _, ok := e.contents()["/intruder.md"]; !ok {
		t.Fatal("the proxy made no change: the test tested nothing")
	}
}
