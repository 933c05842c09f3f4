package test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/test/harness"
)

// TestToolsFileAndShell (on the hosted path: a strict memfs serve with the
// feed off): the agent's file tools and shell work on the
// session's mounts as the file tools' allowed roots: a write into the
// read-write store succeeds (and, over an existing memory, keeps its id:
// the write tool's temporary file is never uploaded); writes into the
// read-only store are refused, by the write tool before the kernel and by
// the kernel for bash; a path outside the allowed roots is refused; cat
// and grep -r read the mount. Archiving the session mid-run is a clean
// end: the final sync uploads the writes (with the session actor) before
// the item is stopped, and the terminated session's work directory is
// removed. A 60 s interval: only the final sync uploads.
func TestToolsFileAndShell(t *testing.T) {
	t.Parallel()
	e := newWkEnvHosted(t) // the hosted path: feed off
	rwFiles := map[string]string{"/todo.md": "- one\n", "/deep/a/b.md": "needle here\n", "/gone.md": "bye\n"}
	roFiles := map[string]string{"/guide.md": "read me\n"}
	rw := e.newStore("Notes", rwFiles)
	ro := e.newStore("Reference", roFiles)
	todoID := e.memoryAt(rw, "/todo.md").ID
	w := e.startToolsWorker(nil, "--memory-sync-interval", "60s")
	sess := e.newSession(wkRW(rw), wkRO(ro))
	e.waitRunning(w, sess)
	rwDir, roDir := sess.Resources[0].MountPath, sess.Resources[1].MountPath
	w.WaitOutput(1, wkQuickTimeout, "running the session's tools", sess.ID)
	workdir := e.workdirOf(sess.ID)
	if fi, err := os.Stat(workdir); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Fatalf("the session's work directory %s: %v, %v; want a 0700 directory", workdir, fi, err)
	}

	if out := e.mustTool(sess.ID, "write", map[string]any{"file_path": rwDir + "/agent/new.md", "content": "from the agent\n"}); !strings.Contains(out, "wrote") {
		t.Errorf("write into the read-write store: %q", out)
	}
	e.mustTool(sess.ID, "write", map[string]any{"file_path": rwDir + "/todo.md", "content": "- one\n- two\n"})
	e.mustTool(sess.ID, "bash", bash("rm "+rwDir+"/gone.md"))
	if got := mtMustSh(t, rwDir, "cat agent/new.md todo.md"); got != "from the agent\n- one\n- two\n" {
		t.Errorf("the mount shows %q after the writes", got)
	}

	r := e.runTool(sess.ID, "write", map[string]any{"file_path": roDir + "/new.md", "content": "x\n"})
	if !r.IsError || !strings.Contains(r.text(), "read-only") {
		t.Errorf("the write tool into the read-only store: is_error %v, %q; want it refused as read-only", r.IsError, r.text())
	}
	r = e.runTool(sess.ID, "edit", map[string]any{"file_path": roDir + "/guide.md", "old_string": "read", "new_string": "edit"})
	if !r.IsError || !strings.Contains(r.text(), "read-only") {
		t.Errorf("the edit tool in the read-only store: is_error %v, %q; want it refused as read-only", r.IsError, r.text())
	}
	r = e.runTool(sess.ID, "bash", bash("echo x > "+roDir+"/new.md"))
	if !r.IsError || !strings.Contains(r.text(), "Read-only file system") {
		t.Errorf("a bash write into the read-only store: is_error %v, %q; want Read-only file system", r.IsError, r.text())
	}
	outside := filepath.Join(e.base, "outside.md")
	r = e.runTool(sess.ID, "write", map[string]any{"file_path": outside, "content": "x\n"})
	if !r.IsError || !strings.Contains(r.text(), "outside") {
		t.Errorf("a write outside the allowed roots: is_error %v, %q; want it refused", r.IsError, r.text())
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Errorf("the refused write created %s", outside)
	}
	r = e.runTool(sess.ID, "read", map[string]any{"file_path": "/etc/hostname"})
	if !r.IsError || !strings.Contains(r.text(), "outside") {
		t.Errorf("a read outside the allowed roots: is_error %v, %q; want it refused", r.IsError, r.text())
	}
	if out := e.mustTool(sess.ID, "bash", bash("cat "+roDir+"/guide.md")); !strings.Contains(out, "read me") {
		t.Errorf("bash cat of a memory: %q", out)
	}
	if out := e.mustTool(sess.ID, "bash", bash("grep -r needle "+rwDir)); !strings.Contains(out, rwDir+"/deep/a/b.md:needle here") {
		t.Errorf("bash grep -r over the mount: %q", out)
	}
	if out := e.mustTool(sess.ID, "read", map[string]any{"file_path": rwDir + "/deep/a/b.md"}); !strings.Contains(out, "needle here") {
		t.Errorf("the read tool on the mount: %q", out)
	}
	if out := e.mustTool(sess.ID, "grep", map[string]any{"pattern": "needle", "path": rwDir}); !strings.Contains(out, "b.md") {
		t.Errorf("the grep tool over the mount: %q", out)
	}
	e.checkStore(rw, rwFiles) // nothing went up yet: the interval is 60 s
	e.checkStore(ro, roFiles)

	if _, err := e.admin.ArchiveSession(context.Background(), sess.ID); err != nil {
		t.Fatal(err)
	}
	w.WaitOutput(1, wkBeatTimeout, "session ending", "ending=clean", sess.ID)
	t.Logf("ended by: %q", w.Lines("the session terminated: its tool runner stopped"))
	item := e.waitWorkState(sess.ID, store.WorkStopped, wkExitTimeout)
	want := map[string]string{"/todo.md": "- one\n- two\n", "/deep/a/b.md": "needle here\n", "/agent/new.md": "from the agent\n"}
	e.checkStore(rw, want)
	e.checkStore(ro, roFiles)
	if m := e.memoryAt(rw, "/todo.md"); m == nil || m.ID != todoID {
		t.Errorf("the write over /todo.md made memory %v, want the same memory %s (an atomic save is an update)", m, todoID)
	}
	for _, p := range []string{"/todo.md", "/agent/new.md"} {
		vs := e.versionsOf(rw, e.memoryAt(rw, p).ID)
		v := vs[0]
		if v.CreatedBy == nil || v.CreatedBy.Type != store.ActorSession || v.CreatedBy.SessionID != sess.ID {
			t.Errorf("the version of %s was made by %+v, want the session actor of %s", p, v.CreatedBy, sess.ID)
		}
		if item.StoppedAt == nil || v.CreatedAt.After(*item.StoppedAt) {
			t.Errorf("the final sync's version of %s was created at %s, after the item stopped at %v", p, v.CreatedAt, item.StoppedAt)
		}
	}
	for v, err := range e.admin.Versions(context.Background(), rw, store.ListVersionsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Path != nil && strings.Contains(*v.Path, ".agenttoolset-") {
			t.Errorf("the write tool's temporary file went up: version %s %s at %s", v.ID, v.Operation, *v.Path)
		}
	}
	wkCheckGone(t, rwDir, roDir, workdir)
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestToolsIdleEnd: a session that goes idle (its turn ended) and stays so
// past --max-idle ends cleanly: the final sync uploads its writes and sends
// its deletes (their wait waived), all before the item's stopped_at; the
// session is only idle, so its work directory is kept for its next run.
func TestToolsIdleEnd(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Idle", map[string]string{"/keep.md": "keep\n", "/gone.md": "bye\n"})
	w := e.startToolsWorker(nil, "--memory-sync-interval", "60s", "--max-idle", "1s")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	e.mustTool(sess.ID, "bash", bash("cd "+dir+" && rm gone.md && echo made > made.md"))
	e.mustTool(sess.ID, "write", map[string]any{"file_path": "notes.txt", "content": "in the work directory\n"})
	e.postEvents(sess.ID, map[string]any{"type": "session.status_idle", "stop_reason": map[string]any{"type": "end_turn"}})

	w.WaitOutput(1, wkQuickTimeout, "the session stayed idle after its turn ended", sess.ID)
	w.WaitOutput(1, wkExitTimeout, "session ending", "ending=clean", sess.ID)
	item := e.waitWorkState(sess.ID, store.WorkStopped, wkExitTimeout)
	e.checkStore(st, map[string]string{"/keep.md": "keep\n", "/made.md": "made\n"})
	made := e.versionsOf(st, e.memoryAt(st, "/made.md").ID)[0]
	if item.StoppedAt == nil || made.CreatedAt.After(*item.StoppedAt) {
		t.Errorf("the final sync's version was created at %s, after the item stopped at %v", made.CreatedAt, item.StoppedAt)
	}
	if b, err := os.ReadFile(filepath.Join(e.workdirOf(sess.ID), "notes.txt")); err != nil || string(b) != "in the work directory\n" {
		t.Errorf("the idle session's work directory was not kept: %q, %v", b, err)
	}
	wkCheckGone(t, dir)
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestToolsLeaseLost: another process takes the item's lease while a tool
// runs (a long sleep in the agent's shell); the worker's next heartbeat
// answers 412: the runner is cancelled (the shell and its sleep killed at
// once, not after 300 s), the mount ends with writes only (a pending delete
// stays in the journal) and no stop is sent. When the taker lets its lease
// lapse, the worker claims the item again and replays the journal.
func TestToolsLeaseLost(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Lease", map[string]string{"/keep.md": "keep\n", "/edit.md": "v1\n", "/gone.md": "bye\n"})
	w := e.startToolsWorker(nil, "--memory-sync-interval", "60s", "--memory-sync-delete-delay", "1ms")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	e.mustTool(sess.ID, "bash", bash("cd "+dir+" && printf 'v2\\n' > edit.md && rm gone.md"))
	sleepID := e.toolUse(sess.ID, "bash", map[string]any{"command": "sleep 300", "timeout_ms": 400000})
	tlWaitFor(t, "the agent's sleep to run", tlResultTimeout, func() bool { return len(tlProcesses(w.Pid(), "sleep", "300")) == 1 })

	item := e.workOf(sess.ID)
	last := tlTakeLease(e, item.ID)
	w.WaitOutput(1, wkBeatTimeout, "lease lost: the work item's heartbeat precondition failed", wkField("work_id", item.ID))
	w.WaitOutput(1, wkExitTimeout, "session ending", wkField("ending", "lease lost"), sess.ID)
	w.WaitOutput(1, wkExitTimeout, "memory store unmounted", wkField("path", dir))
	if p := tlProcesses(w.Pid(), "sleep", "300"); len(p) > 0 {
		t.Errorf("the agent's sleep still runs after the lease was lost: %v", p)
	}
	// The SDK's runner answers the call it cancelled with an error (its
	// first send outlives the cancel), so the next claim does not run it
	// again; it is never answered as a success.
	for _, ev := range e.events(sess.ID) {
		if ev.Type == "user.tool_result" && ev.ToolUseID == sleepID && !ev.IsError {
			t.Errorf("the cancelled call was answered as a success: %s", ev.Raw)
		}
	}
	got := e.work(item.ID)
	if got.State == store.WorkStopped || got.StoppedAt != nil || got.StopRequestedAt != nil {
		t.Errorf("the worker stopped an item whose lease it had lost: state %s, stop requested %v, stopped %v", got.State, got.StopRequestedAt, got.StoppedAt)
	}
	e.checkStore(st, map[string]string{"/keep.md": "keep\n", "/edit.md": "v2\n", "/gone.md": "bye\n"})

	// The taker lets the lease lapse in a second: the item is offered again.
	tlHeartbeat(e, item.ID, last, 1)
	w.WaitOutput(2, wkLapseTimeout, "claimed work item", sess.ID)
	w.WaitOutput(1, wkStartTimeout, "replaying changes a previous run left in the journal", wkField("store", st))
	w.WaitOutput(2, wkStartTimeout, "session running", sess.ID)
	wkStopWorkerExit(t, w, syscall.SIGTERM, sgExitLeft) // the delete is still pending
}

// tlTakeLease takes a work item's lease as another process would
// (takeLease: for 600 s) and returns its last_heartbeat, read from the
// 412 a heartbeat with a wrong expected value answers.
func tlTakeLease(e *wkEnv, workID string) string {
	e.t.Helper()
	e.takeLease(workID)
	r := e.call(http.MethodPost, "/v1/environments/"+e.envID+"/work/"+workID+"/heartbeat", e.envKey,
		url.Values{"expected_last_heartbeat": {"tl-not-the-current-heartbeat"}}, nil)
	var env struct {
		Error struct {
			Details struct {
				CurrentState struct {
					LastHeartbeat *string `json:"last_heartbeat"`
				} `json:"current_state"`
			} `json:"details"`
		} `json:"error"`
	}
	if r.status != http.StatusPreconditionFailed || json.Unmarshal(r.body, &env) != nil || env.Error.Details.CurrentState.LastHeartbeat == nil {
		e.t.Fatalf("reading the taken lease: %s", r)
	}
	return *env.Error.Details.CurrentState.LastHeartbeat
}

// tlHeartbeat renews a lease held with last for ttl seconds.
func tlHeartbeat(e *wkEnv, workID, last string, ttl int) {
	e.t.Helper()
	r := e.call(http.MethodPost, "/v1/environments/"+e.envID+"/work/"+workID+"/heartbeat", e.envKey,
		url.Values{"expected_last_heartbeat": {last}, "desired_ttl_seconds": {strconv.Itoa(ttl)}}, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("heartbeat %s: %s", workID, r)
	}
}

// TestToolsTwoSessions: one worker runs two sessions' tools at once, each
// in its own work directory, each reaching its own store.
func TestToolsTwoSessions(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	a := e.newStore("Alpha", map[string]string{"/a.md": "alpha\n"})
	b := e.newStore("Beta", map[string]string{"/b.md": "beta\n"})
	w := e.startToolsWorker(nil, "--memory-sync-interval", "5s")
	sa, sb := e.newSession(wkRW(a)), e.newSession(wkRW(b))
	e.waitRunning(w, sa)
	e.waitRunning(w, sb)
	// Both calls are posted before either is answered: the runners work
	// side by side.
	ua := e.toolUse(sa.ID, "bash", bash("sleep 1; pwd; cat "+sa.Resources[0].MountPath+"/a.md"))
	ub := e.toolUse(sb.ID, "bash", bash("sleep 1; pwd; cat "+sb.Resources[0].MountPath+"/b.md"))
	for _, c := range []struct {
		sess   *store.Session
		use    string
		want   string
		store  string
		letter string
	}{{sa, ua, "alpha", a, "a"}, {sb, ub, "beta", b, "b"}} {
		r := e.toolResult(c.sess.ID, c.use)
		if want := e.workdirOf(c.sess.ID) + "\n" + c.want; r.IsError || !strings.Contains(r.text(), want) {
			t.Errorf("session %s: %q (is_error %v), want its own work directory and store: %q", c.sess.ID, r.text(), r.IsError, want)
		}
		e.mustTool(c.sess.ID, "write", map[string]any{"file_path": "mine.txt", "content": c.sess.ID})
		e.mustTool(c.sess.ID, "write", map[string]any{"file_path": c.sess.Resources[0].MountPath + "/from-" + c.letter + ".md", "content": c.want + " agent\n"})
	}
	for _, s := range []*store.Session{sa, sb} {
		if b, err := os.ReadFile(filepath.Join(e.workdirOf(s.ID), "mine.txt")); err != nil || string(b) != s.ID {
			t.Errorf("the work directory of %s holds %q, %v", s.ID, b, err)
		}
	}
	e.waitStore(a, map[string]string{"/a.md": "alpha\n", "/from-a.md": "alpha agent\n"}, wkSyncTimeout)
	e.waitStore(b, map[string]string{"/b.md": "beta\n", "/from-b.md": "beta agent\n"}, wkSyncTimeout)
	wkStopWorker(t, w, syscall.SIGTERM)
	if n := len(w.Lines("session ending", "ending=shutdown")); n != 2 {
		t.Errorf("%d sessions ended by the stop, want 2:\n%s", n, w.Output())
	}
}

// TestToolsShellHoldsNoKey: the agent's shell gets the allow-list of the
// worker's environment plus --tool-env and --tool-env-file, and no memfs
// or Anthropic key: not in its environment; its parent is the sandbox's
// tool runner, whose /proc/<pid>/environ it cannot read (the runner is
// non-dumpable), and the worker is not in its PID namespace at all.
func TestToolsShellHoldsNoKey(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Keys", nil)
	envFile := filepath.Join(e.base, "tool.env")
	if err := os.WriteFile(envFile, []byte("# for the agent\nFROM_FILE=file value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Three keys, and a setting that is no key but is not on the allow-list.
	secrets := []string{e.envKey, "sk-ant-tools-test-0123456789", "sk-memfs-admin-tools-test-0123456789", "not-a-key-but-not-allowed"}
	w := e.startToolsWorker([]string{"ANTHROPIC_API_KEY=" + secrets[1], "MEMFS_ADMIN_KEY=" + secrets[2], "SOME_SERVICE_SETTING=" + secrets[3], "LANG=C.UTF-8"},
		"--memory-sync-interval", "5s", "--tool-env", "GIT_AUTHOR_NAME=The Agent", "--tool-env-file", envFile)
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	out := e.mustTool(sess.ID, "bash", bash(`echo "ppid=$PPID"; env; echo ---; tr '\0' '\n' < /proc/$PPID/environ; echo ---; tr '\0' ' ' < /proc/$PPID/cmdline; echo; ls /proc/`+strconv.Itoa(w.Pid())+` 2>&1; true`))
	if !strings.Contains(out, "/run/memfs/memfs __tools-runner") || !strings.Contains(out, "environ: Permission denied") {
		t.Errorf("the shell's parent is not the sandbox's tool runner, or its environ is readable:\n%s", out)
	}
	if !strings.Contains(out, "ls: cannot access '/proc/"+strconv.Itoa(w.Pid())+"'") {
		t.Errorf("the worker (pid %d) is in the shell's PID namespace:\n%s", w.Pid(), out)
	}
	shellEnv, _, _ := strings.Cut(strings.SplitN(out, "\n", 2)[1], "---")
	for _, want := range []string{"\nGIT_AUTHOR_NAME=The Agent\n", "\nFROM_FILE=file value\n", "\nLANG=C.UTF-8\n", "\nPATH="} {
		if !strings.Contains("\n"+shellEnv, want) {
			t.Errorf("the shell's environment lacks %s:\n%s", want, shellEnv)
		}
	}
	for _, line := range strings.Split(shellEnv, "\n") {
		if strings.HasPrefix(line, "MEMFS_") || strings.HasPrefix(line, "ANTHROPIC_") {
			t.Errorf("the shell's environment holds %s", line)
		}
	}
	for i, s := range secrets[:3] {
		if strings.Contains(out, s) {
			t.Errorf("key %d reached the shell (its environment, or the worker's /proc environ or cmdline):\n%s", i, out)
		}
	}
	if strings.Contains(shellEnv, secrets[3]) {
		t.Errorf("a variable off the allow-list reached the shell's environment:\n%s", shellEnv)
	}
	t.Logf("what the shell sees (the worker runs as uid %d):\n%s", os.Getuid(), strings.ReplaceAll(out, "\n\n", "\n"))
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestToolsBadFlags: the --run-tools flags refuse bad input with a usage
// error (exit 2) naming it, before anything starts.
func TestToolsBadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credFile := filepath.Join(dir, "cred.env")
	os.WriteFile(credFile, []byte("OK=1\nMEMFS_ENVIRONMENT_KEY=x\n"), 0o600)
	base := []string{"--api-url", "http://127.0.0.1:1", "--environment-id", "env_x", "--state-dir", dir, "--memory-root", filepath.Join(dir, "mnt")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workdir", dir}, "--workdir only works with --run-tools"},
		{[]string{"--max-idle", "5s"}, "--max-idle only works with --run-tools"},
		{[]string{"--tool-env", "A=b"}, "--tool-env only works with --run-tools"},
		{[]string{"--run-tools", "--max-idle", "-1s"}, "not a duration of 0 or more"},
		{[]string{"--run-tools", "--max-idle", "soon"}, "not a duration of 0 or more"},
		{[]string{"--run-tools", "--tool-env", "NOEQUALS"}, "is not KEY=VALUE"},
		{[]string{"--run-tools", "--tool-env", "MEMFS_ADMIN_KEY=x"}, "MEMFS_ADMIN_KEY is a memfs or Anthropic credential"},
		{[]string{"--run-tools", "--tool-env", "ANTHROPIC_API_KEY=x"}, "ANTHROPIC_API_KEY is a memfs or Anthropic credential"},
		{[]string{"--run-tools", "--tool-env-file", filepath.Join(dir, "missing.env")}, "--tool-env-file"},
		{[]string{"--run-tools", "--tool-env-file", credFile}, credFile + ":2: MEMFS_ENVIRONMENT_KEY is a memfs or Anthropic credential"},
		{[]string{"--tools-user", "nobody"}, "--tools-user only works with --run-tools"},
		{[]string{"--tools-network", "none"}, "--tools-network only works with --run-tools"},
		{[]string{"--run-tools", "--tools-network", "wifi"}, `"wifi" is not host or none`},
		{[]string{"--run-tools", "--tools-user", "no-such-user-memfs"}, `--tools-user: no user "no-such-user-memfs"`},
		// The memory root is root's (or not there yet): the tools would run
		// as root.
		{[]string{"--run-tools"}, "the agent's tools would run as root: give --tools-user USER"},
	} {
		for _, cmd := range []string{"worker", "session"} {
			args := append([]string{cmd}, base...)
			if cmd == "worker" {
				args = append(args, "--environment-key", "sk-x")
			} else {
				args = append(args, "--work-id", "work_x", "--session-id", "sesn_x")
			}
			code, stdout, stderr := wkRun(t, nil, append(args, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("memfs %s %v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", cmd, c.args, code, stdout, stderr, c.want)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the refused commands left %v in the state dir", ents)
	}
}

// TestUpRunTools: memfs up --run-tools runs its demo session's tools; the
// tool call its banner suggests, pasted into a shell as a person would,
// prints the bash tool's result (a grep over the mount); a write tool call
// reaches the store; Ctrl-C still exits 0 with nothing mounted, and the
// archived demo session's work directory is removed.
func TestUpRunTools(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	requireTool(t, "bwrap")
	up := startUp(t, "--memory-sync-interval", "5s", "--run-tools")
	// The banner is printed in one write but read line by line: wait for
	// the line wanted, not for the banner's first one.
	suggested := up.proc.WaitOutput(1, wkQuickTimeout, "sessions events post", "--tool bash")
	line := regexp.MustCompile(`^\s+(MEMFS_API_URL=.* sessions events post (sesn_\S+) --tool bash .*)$`).FindStringSubmatch(suggested)
	if line == nil {
		t.Fatalf("the banner suggests no tool call:\n%s", up.proc.Output())
	}
	out, err := exec.Command("sh", "-c", line[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), up.dir+"/projects/acme/notes.md:Acme: weekly sync on Tuesdays.") {
		t.Fatalf("the banner's tool call %q: %v\n%s", line[1], err, out)
	}
	sessID := line[2]
	workdir := filepath.Join(up.dataDir, "state", "work", sessID)
	if _, err := os.Stat(workdir); err != nil {
		t.Errorf("the demo session's work directory: %v", err)
	}
	post := exec.Command(harness.Binary(t), "sessions", "events", "post", sessID, "--tool", "write", "--wait-result",
		"--input", `{"file_path":"`+up.dir+`/agent.md","content":"written by the agent\n"}`)
	post.Env = append(os.Environ(), "MEMFS_API_URL="+up.url, "MEMFS_API_KEY="+up.adminKey)
	if out, err := post.CombinedOutput(); err != nil {
		t.Fatalf("a write tool call: %v\n%s", err, out)
	}
	up.waitContent(t, "/agent.md", "written by the agent\n")
	up.proc.Signal(syscall.SIGINT)
	if code := up.proc.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs up exited %d after Ctrl-C:\n%s", code, up.proc.Output())
	}
	wkCheckGone(t, up.dir, workdir)
}

// TestSessionRunTools (on the hosted path: a strict memfs serve with the
// feed off): memfs session --run-tools runs one claimed item's
// tools like the worker: a tool call is answered, and the session going
// idle past --max-idle ends it cleanly: the write is uploaded, the item
// stopped, and memfs session exits 0.
func TestSessionRunTools(t *testing.T) {
	t.Parallel()
	e := newWkEnvHosted(t) // the hosted path: feed off
	requireTool(t, "bwrap")
	st := e.newStore("One", map[string]string{"/n.md": "n1\n"})
	sess := e.newSession(wkRW(st))
	raw, _, _ := e.poll()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	work := wkWriteFile(t, t.TempDir(), "work.json", b, 0o600)
	p := harness.StartProc(t, harness.ProcOptions{}, "session", "--api-url", e.serve.URL, "--memory-root", e.root,
		"--state-dir", e.stateDir, "--memory-sync-interval", "60s", "--work-json", work, "--run-tools", "--tools-user", tlToolsUser, "--max-idle", "1s")
	t.Cleanup(func() { harness.DetachUnder(e.root) })
	p.WaitOutput(1, wkStartTimeout, "running the session's tools", sess.ID)
	dir := sess.Resources[0].MountPath
	if out := e.mustTool(sess.ID, "bash", bash("cat "+dir+"/n.md && echo n2 > "+dir+"/n.md")); strings.TrimSpace(out) != "n1" {
		t.Errorf("bash cat through memfs session: %q", out)
	}
	e.postEvents(sess.ID, map[string]any{"type": "session.status_idle", "stop_reason": map[string]any{"type": "end_turn"}})
	if code := p.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs session exited %d after its session went idle, want 0:\n%s", code, p.Output())
	}
	p.WaitOutput(1, 0, "session ending", "ending=clean", sess.ID)
	e.checkStore(st, map[string]string{"/n.md": "n2\n"})
	e.waitWorkState(sess.ID, store.WorkStopped, wkQuickTimeout)
	wkCheckGone(t, dir)
}
