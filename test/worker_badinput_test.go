package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/test/harness"
)

// Bad input to the worker, memfs session and the session API: each is
// refused with a clear error and leaves nothing behind.

// TestWorkerBadSessionsRefused: sessions the server refuses to create (more
// than 8 stores, a store twice, an archived store) are 400 with a clear
// message, through the client and `memfs sessions create`, and queue no
// work item.
func TestWorkerBadSessionsRefused(t *testing.T) {
	t.Parallel()
	e := newWkEnvAt(t, nil)
	var nine []client.SessionResourceInput
	var nineFlags []string
	for i := range 9 {
		id := e.newStore("s"+string(rune('a'+i)), nil)
		nine = append(nine, wkRW(id))
		nineFlags = append(nineFlags, "--store", id)
	}
	twice := e.newStore("twice", nil)
	archived := e.newStore("archived", nil)
	if _, err := e.admin.ArchiveStore(context.Background(), archived); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		rs    []client.SessionResourceInput
		flags []string
		want  string
	}{
		{"nine stores", nine, nineFlags, "at most 8 memory stores"},
		{"the same store twice", []client.SessionResourceInput{wkRW(twice), wkRO(twice)}, []string{"--store", twice, "--store", twice + ":ro"}, "memory store " + twice + " is attached twice"},
		{"an archived store", []client.SessionResourceInput{wkRW(archived)}, []string{"--store", archived}, "memory store " + archived + " is archived"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.admin.CreateSession(context.Background(), client.CreateSessionInput{EnvironmentID: e.envID, Resources: c.rs})
			var se *store.Error
			if !errors.As(err, &se) || se.Status != http.StatusBadRequest || !errors.Is(err, store.ErrInvalid) || !strings.Contains(se.Message, c.want) {
				t.Errorf("create session: %v; want 400 invalid_request_error saying %q", err, c.want)
			}
			args := append([]string{"sessions", "create", "--environment", e.envID, "--api-url", e.serve.URL, "--api-key", e.serve.AdminKey}, c.flags...)
			code, stdout, stderr := wkRun(t, nil, args...)
			if code != 1 || !strings.Contains(stderr, c.want) || stdout != "" {
				t.Errorf("memfs sessions create: exit %d, stdout %q, stderr %q; want exit 1 saying %q", code, stdout, stderr, c.want)
			}
		})
	}
	r := e.call(http.MethodGet, "/v1/environments/"+e.envID+"/work", e.serve.AdminKey, nil, nil)
	var page struct {
		Data []store.Work `json:"data"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil || len(page.Data) != 0 {
		t.Errorf("refused sessions queued work: %s", r)
	}
}

// poll claims the next work item as a worker would (environment key) and
// acks it. It returns the item's JSON as the poll returned it (secret
// included), the item and its session token.
func (e *wkEnv) poll() (raw map[string]any, item store.Work, token string) {
	e.t.Helper()
	path := "/v1/environments/" + e.envID + "/work/poll"
	deadline := time.Now().Add(wkQuickTimeout)
	for {
		r := e.call(http.MethodGet, path, e.envKey, url.Values{"block_ms": {"999"}}, nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("poll: %s", r)
		}
		if string(r.body) != "null" {
			if err := json.Unmarshal(r.body, &raw); err != nil {
				e.t.Fatal(err)
			}
			if err := json.Unmarshal(r.body, &item); err != nil {
				e.t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("nothing to poll within %s", wkQuickTimeout)
		}
	}
	if r := e.call(http.MethodPost, "/v1/environments/"+e.envID+"/work/"+item.ID+"/ack", e.envKey, nil, nil); r.status != http.StatusOK {
		e.t.Fatalf("ack: %s", r)
	}
	if item.Secret == nil {
		e.t.Fatalf("the poll answered an item without a secret: %v", raw)
	}
	sb, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(*item.Secret, "="))
	var sec struct {
		SessionsToken string `json:"sessions_token"`
	}
	if err != nil || json.Unmarshal(sb, &sec) != nil || sec.SessionsToken == "" {
		e.t.Fatalf("the secret is not base64url JSON with a sessions_token: %v", err)
	}
	return raw, item, sec.SessionsToken
}

// wkWriteFile writes b to a new file in dir with mode perm (exactly).
func wkWriteFile(t *testing.T, dir, name string, b []byte, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// wkCheckEmpty fails unless nothing is mounted under dir and dir is
// missing or empty.
func wkCheckEmpty(t *testing.T, dir string) {
	t.Helper()
	if m := harness.MountsUnder(dir); len(m) > 0 {
		t.Errorf("mounted: %v", m)
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read %s: %v", dir, err)
	}
	if len(ents) > 0 {
		t.Errorf("%s holds %d entries (%s...), want nothing", dir, len(ents), ents[0].Name())
	}
}

// TestWorkerBadSecret: memfs session refuses a work item whose secret is
// missing or malformed ("the work item carried no sessions token") and a
// secret file other users can read, mounting nothing; the same item with
// its real secret in a 0600 file runs, and never prints the token.
func TestWorkerBadSecret(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Secretive", map[string]string{"/s.md": "s\n"})
	sess := e.newSession(wkRW(st))
	raw, item, token := e.poll()
	t.Cleanup(func() { harness.DetachUnder(e.root) }) // should a refused run mount after all
	dir := t.TempDir()
	common := []string{"--api-url", e.serve.URL, "--memory-root", e.root, "--state-dir", e.stateDir, "--memory-sync-interval", "5s"}

	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct {
		name   string
		secret any // nil: the field is absent
		stdin  bool
	}{
		{"absent", nil, false},
		{"null", json.RawMessage("null"), true},
		{"empty", "", false},
		{"malformed base64", "%%%not base64%%%", false},
		{"base64 of non-JSON", b64("sessions_token=abc"), true},
		{"no sessions_token", b64(`{"api_base_url":"http://example.invalid"}`), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := map[string]any{}
			for k, v := range raw {
				if k != "secret" {
					w[k] = v
				}
			}
			if c.secret != nil {
				w["secret"] = c.secret
			}
			b, _ := json.Marshal(w)
			args := append([]string{"session"}, common...)
			var code int
			var stdout, stderr string
			if c.stdin {
				code, stdout, stderr = wkRun(t, strings.NewReader(string(b)), append(args, "--work-json", "-")...)
			} else {
				code, stdout, stderr = wkRun(t, nil, append(args, "--work-json", wkWriteFile(t, dir, "work.json", b, 0o600))...)
			}
			if code != 1 || !strings.Contains(stderr, "the work item carried no sessions token") {
				t.Errorf("memfs session: exit %d, stderr %q; want exit 1 and \"the work item carried no sessions token\"", code, stderr)
			}
			if strings.Contains(stdout+stderr, token) {
				t.Errorf("memfs session printed the session token")
			}
			wkCheckEmpty(t, e.root)
		})
	}

	secret := *item.Secret + "\n"
	loose := wkWriteFile(t, dir, "loose.secret", []byte(secret), 0o644)
	idArgs := append([]string{"session", "--work-id", item.ID, "--environment-id", e.envID, "--session-id", sess.ID}, common...)
	code, stdout, stderr := wkRun(t, nil, append(idArgs, "--work-secret-file", loose)...)
	if code != 1 || !strings.Contains(stderr, "can be read by other users") || !strings.Contains(stderr, "chmod 600") {
		t.Errorf("a 0644 secret file: exit %d, stderr %q; want it refused (exit 1, chmod 600)", code, stderr)
	}
	if strings.Contains(stdout+stderr, token) || strings.Contains(stdout+stderr, *item.Secret) {
		t.Errorf("memfs session printed the secret")
	}
	wkCheckEmpty(t, e.root)
	if s := e.work(item.ID).State; s == store.WorkStopped {
		t.Errorf("a refused memfs session stopped the item")
	}

	// The control: the same item, its secret in a 0600 file, runs.
	tight := wkWriteFile(t, dir, "tight.secret", []byte(secret), 0o600)
	p := harness.StartProc(t, harness.ProcOptions{}, append(idArgs, "--work-secret-file", tight)...)
	p.WaitOutput(1, wkStartTimeout, "session running", sess.ID)
	if !harness.IsMounted(sess.Resources[0].MountPath) {
		t.Fatalf("memfs session runs but %s is not mounted:\n%s", sess.Resources[0].MountPath, p.Output())
	}
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs session exited %d after SIGTERM:\n%s", code, p.Output())
	}
	if strings.Contains(p.Output(), token) {
		t.Errorf("memfs session logged the session token")
	}
	wkCheckGone(t, sess.Resources[0].MountPath)
	if s := e.work(item.ID).State; s != store.WorkStopped {
		t.Errorf("memfs session ended by SIGTERM left the item %s, want stopped", s)
	}
}

// refusedSession starts a worker on e, creates a session attaching rs and
// checks the worker refuses it before mounting anything: the log line says
// every one of want (and none of those prefixed with "!"), the item ends stopped, nothing is mounted under the
// memory root, and the worker keeps working (it exits 0 on SIGTERM).
func (e *wkEnv) refusedSession(want []string, rs ...client.SessionResourceInput) *store.Session {
	e.t.Helper()
	w := e.startWorker("--memory-sync-interval", "5s")
	sess := e.newSession(rs...)
	line := w.WaitOutput(1, wkStartTimeout, "session failed before it started: no memory store was mounted", sess.ID)
	for _, s := range want {
		if not, ok := strings.CutPrefix(s, "!"); ok {
			if strings.Contains(line, not) {
				e.t.Errorf("the refusal says %q:\n%s", not, line)
			}
		} else if !strings.Contains(line, s) {
			e.t.Errorf("the refusal does not say %q:\n%s", s, line)
		}
	}
	e.waitWorkState(sess.ID, store.WorkStopped, wkQuickTimeout)
	if m := harness.MountsUnder(e.root); len(m) > 0 {
		e.t.Errorf("mounted after a refused session: %v", m)
	}
	wkStopWorker(e.t, w, syscall.SIGTERM)
	return sess
}

// wkSnapshotOf is mtSnapshot of a path that may not exist.
func wkSnapshotOf(t *testing.T, p string) string {
	t.Helper()
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return "(missing)"
	}
	return mtSnapshot(t, p)
}

// TestWorkerBadMemoryRoot: a memory root the worker can't use (its parent
// missing, a regular file or below one, on a read-only filesystem) fails
// the session with "cannot create the memory store's folder" and the fix
// where there is one that works (sudo mkdir -p for a missing parent; not
// through a file, nor on a read-only filesystem), and leaves the path as
// found.
func TestWorkerBadMemoryRoot(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	fix := "the worker host must make this mount path writable: sudo mkdir -p "
	t.Run("parent missing", func(t *testing.T) {
		t.Parallel()
		e := newWkEnvAt(t, func(base string) (string, string) {
			r := filepath.Join(base, "missing", "mnt")
			return r, r
		})
		st := e.newStore("Notes", nil)
		e.refusedSession([]string{"cannot create the memory store's folder " + e.root, "its parent " + filepath.Dir(e.root) + " does not exist", fix + e.root}, wkRW(st))
		if _, err := os.Lstat(filepath.Dir(e.root)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the worker created %s (%v)", filepath.Dir(e.root), err)
		}
	})
	t.Run("a regular file", func(t *testing.T) {
		t.Parallel()
		e := newWkEnvAt(t, func(base string) (string, string) {
			r := filepath.Join(base, "memory")
			return r, r
		})
		wkWriteFile(t, e.base, "memory", []byte("not a directory\n"), 0o640)
		old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := os.Chtimes(e.root, old, old); err != nil {
			t.Fatal(err)
		}
		before := wkSnapshotOf(t, e.root)
		st := e.newStore("Notes", nil)
		e.refusedSession([]string{"cannot create the memory store's folder " + e.root, e.root + " is a file, not a directory", "!sudo"}, wkRW(st))
		if after := wkSnapshotOf(t, e.root); after != before {
			t.Errorf("the memory root file changed:\nbefore %s\nafter  %s", before, after)
		}
	})
	t.Run("below a regular file", func(t *testing.T) {
		t.Parallel()
		e := newWkEnvAt(t, func(base string) (string, string) {
			r := filepath.Join(base, "file", "memory")
			return r, r
		})
		wkWriteFile(t, e.base, "file", []byte("not a directory\n"), 0o640)
		st := e.newStore("Notes", nil)
		e.refusedSession([]string{"cannot create the memory store's folder " + e.root, filepath.Join(e.base, "file") + " is a file, not a directory", "!sudo", "!does not exist"}, wkRW(st))
	})
	t.Run("read-only filesystem", func(t *testing.T) {
		t.Parallel()
		e := newWkEnvAt(t, func(base string) (string, string) {
			r := filepath.Join(base, "ro", "mnt")
			return r, r
		})
		// The memory root exists, on a read-only bind mount of its parent
		// onto itself: even root can't create anything in it.
		ro := filepath.Dir(e.root)
		if err := os.MkdirAll(e.root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(ro, ro, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(ro, unix.MNT_DETACH) })
		if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount read-only: %v", err)
		}
		if err := os.Mkdir(filepath.Join(e.root, "probe"), 0o700); !errors.Is(err, syscall.EROFS) {
			t.Fatalf("the read-only bind mount accepts a mkdir (%v)", err)
		}
		st := e.newStore("Notes", nil)
		e.refusedSession([]string{"cannot create the memory store's folder in " + e.root, "read-only file system", "pick a memory root on a writable filesystem", "!sudo"}, wkRW(st))
		wkCheckEmpty(t, e.root)
	})
}

// TestWorkerBadMountPath: a session whose mount paths the worker must not
// use is refused before anything is mounted: something already at a mount
// path (left exactly as found, and the session's other store not mounted
// either), a path outside the memory root, a path with "..".
func TestWorkerBadMountPath(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	t.Run("something already there", func(t *testing.T) {
		t.Parallel()
		e := newWkEnv(t)
		alpha := e.newStore("Alpha", map[string]string{"/a.md": "a\n"})
		beta := e.newStore("Beta", map[string]string{"/b.md": "b\n"})
		taken := filepath.Join(e.root, "beta")
		if err := os.MkdirAll(taken, 0o750); err != nil {
			t.Fatal(err)
		}
		wkWriteFile(t, taken, "mine.txt", []byte("someone's file\n"), 0o600)
		old := time.Date(2021, 6, 7, 8, 9, 10, 0, time.UTC)
		for _, p := range []string{filepath.Join(taken, "mine.txt"), taken} {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		before := mtSnapshot(t, taken)
		sess := e.refusedSession([]string{"something already exists at the memory store's path " + taken, "left as found"}, wkRW(alpha), wkRO(beta))
		if sess.Resources[1].MountPath != taken {
			t.Fatalf("beta's mount path is %s, want %s", sess.Resources[1].MountPath, taken)
		}
		if after := mtSnapshot(t, taken); after != before {
			t.Errorf("the worker changed what was at the mount path:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		wkCheckGone(t, sess.Resources[0].MountPath)
		e.checkStore(alpha, map[string]string{"/a.md": "a\n"})
	})
	t.Run("outside the memory root", func(t *testing.T) {
		t.Parallel()
		e := newWkEnvAt(t, func(base string) (string, string) {
			return filepath.Join(base, "elsewhere"), filepath.Join(base, "mnt")
		})
		st := e.newStore("Notes", nil)
		sess := e.refusedSession([]string{"is outside the memory root " + e.root}, wkRW(st))
		if want := filepath.Join(e.base, "elsewhere", "notes"); sess.Resources[0].MountPath != want {
			t.Fatalf("mount path %s, want %s", sess.Resources[0].MountPath, want)
		}
		wkCheckEmpty(t, filepath.Join(e.base, "elsewhere"))
		wkCheckEmpty(t, e.root)
	})
	t.Run("dot-dot", func(t *testing.T) {
		t.Parallel()
		// A relative --memory-root on the server gives mount paths with
		// "..": relative to the worker's working directory they would land
		// in <tmp>/up.
		e := newWkEnvAt(t, func(base string) (string, string) {
			return "../up", filepath.Join(base, "mnt")
		})
		e.cwd = filepath.Join(e.base, "cwd")
		if err := os.Mkdir(e.cwd, 0o755); err != nil {
			t.Fatal(err)
		}
		st := e.newStore("Notes", nil)
		sess := e.refusedSession([]string{"is not a clean absolute path"}, wkRW(st))
		if p := sess.Resources[0].MountPath; !strings.Contains(p, "..") {
			t.Fatalf("mount path %s has no ..", p)
		}
		wkCheckEmpty(t, filepath.Join(e.base, "up"))
		wkCheckEmpty(t, e.root)
	})
}

// TestWorkerBadFlags: an interval under 5 s or an unknown deletions mode is
// a usage error (exit 2) of memfs worker, memfs session and memfs up,
// before anything is created.
func TestWorkerBadFlags(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	state, root, data := filepath.Join(base, "state"), filepath.Join(base, "mnt"), filepath.Join(base, "data")
	worker := []string{"worker", "--api-url", "http://127.0.0.1:1", "--environment-id", "env_x", "--environment-key", "k", "--state-dir", state, "--memory-root", root}
	session := []string{"session", "--api-url", "http://127.0.0.1:1", "--work-id", "work_x", "--environment-id", "env_x", "--session-id", "sesn_x", "--state-dir", state, "--memory-root", root}
	up := []string{"up", "--data-dir", data, "--memory-root", root, "--listen", "127.0.0.1:0"}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"worker interval 4s", append(worker, "--memory-sync-interval", "4s"), "must be at least 5s"},
		{"worker interval 0s", append(worker, "--memory-sync-interval", "0s"), "must be at least 5s"},
		{"worker interval garbage", append(worker, "--memory-sync-interval", "soon"), "must be a duration like 15s, or off"},
		{"worker deletions", append(worker, "--memory-sync-deletions", "sometimes"), `must be enabled, log_only or disabled, not "sometimes"`},
		{"session interval", append(session, "--memory-sync-interval", "1s"), "must be at least 5s"},
		{"session deletions", append(session, "--memory-sync-deletions", "all"), "must be enabled, log_only or disabled"},
		{"up interval", append(up, "--memory-sync-interval", "4s"), "must be at least 5s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := wkRun(t, nil, c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "--help") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 saying %q", code, stdout, stderr, c.want)
			}
			for _, p := range []string{state, root, data} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was created (%v)", p, err)
				}
			}
		})
	}
}

// TestWorkerBadTokens: a session token reaches only the stores attached to
// its session, and writes only through read-write attachments.
func TestWorkerBadTokens(t *testing.T) {
	t.Parallel()
	e := newWkEnvAt(t, nil)
	a := e.newStore("A", map[string]string{"/a.md": "a\n"})
	r := e.newStore("R", map[string]string{"/r.md": "r\n"})
	b := e.newStore("B", map[string]string{"/b.md": "b\n"})
	s1 := e.newSession(wkRW(a), wkRO(r))
	s2 := e.newSession(wkRW(b))
	_, w1, tok1 := e.poll()
	_, w2, tok2 := e.poll()
	if w1.Data.ID != s1.ID || w2.Data.ID != s2.ID {
		t.Fatalf("polled %s then %s, want %s then %s", w1.Data.ID, w2.Data.ID, s1.ID, s2.ID)
	}
	as := func(tok string) *client.Client {
		c, err := client.New(client.Options{BaseURL: e.serve.URL, APIKey: tok})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2 := as(tok1), as(tok2)
	ctx := context.Background()
	// Controls: what the tokens may do.
	if got := wkContents(t, c1, a); got["/a.md"] != "a\n" {
		t.Errorf("token 1 reads A: %v", got)
	}
	if got := wkContents(t, c1, r); got["/r.md"] != "r\n" {
		t.Errorf("token 1 reads R: %v", got)
	}
	if _, err := c1.CreateMemory(ctx, a, "/by-token.md", "ok\n"); err != nil {
		t.Errorf("token 1 writes A: %v", err)
	}
	// A session token on another session's store: 403 or 404.
	hidden := func(what string, err error) {
		t.Helper()
		var se *store.Error
		if !errors.As(err, &se) || (se.Status != http.StatusForbidden && se.Status != http.StatusNotFound) {
			t.Errorf("%s: %v; want 403 or 404", what, err)
		}
	}
	_, err := c1.AllMemories(ctx, b, store.ListMemoriesOptions{})
	hidden("token 1 lists B", err)
	_, err = c1.CreateMemory(ctx, b, "/x.md", "x\n")
	hidden("token 1 writes B", err)
	_, err = c2.AllMemories(ctx, a, store.ListMemoriesOptions{})
	hidden("token 2 lists A", err)
	_, err = c2.GetStore(ctx, r)
	hidden("token 2 gets R", err)
	_, err = c1.GetSession(ctx, s2.ID)
	hidden("token 1 gets session 2", err)
	_, err = c1.Heartbeat(ctx, e.envID, w2.ID, store.NoHeartbeat, 0)
	hidden("token 1 heartbeats session 2's item", err)
	// A write through a read-only attachment: 403 permission_error.
	ms, err := e.admin.AllMemories(ctx, r, store.ListMemoriesOptions{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("list R: %v %v", ms, err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		var se *store.Error
		if !errors.As(err, &se) || se.Status != http.StatusForbidden || !errors.Is(err, store.ErrForbidden) {
			t.Errorf("%s: %v; want 403 permission_error", what, err)
		}
	}
	_, err = c1.CreateMemory(ctx, r, "/new.md", "x\n")
	forbidden("token 1 creates in read-only R", err)
	content := "changed\n"
	_, err = c1.UpdateMemory(ctx, r, ms[0].ID, store.UpdateMemoryInput{Content: &content})
	forbidden("token 1 updates read-only R", err)
	forbidden("token 1 deletes in read-only R", c1.DeleteMemory(ctx, r, ms[0].ID, nil))
	e.checkStore(r, map[string]string{"/r.md": "r\n"})
	e.checkStore(b, map[string]string{"/b.md": "b\n"})
	e.checkStore(a, map[string]string{"/a.md": "a\n", "/by-token.md": "ok\n"})
}
