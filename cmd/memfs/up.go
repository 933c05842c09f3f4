package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/durable"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("up", "everything on one machine: serve, a demo store, a session, and a worker mounting it", runUp)
}

// upState is what memfs up keeps between runs in <data-dir>/up.json, so
// the environment and the demo store are created once.
type upState struct {
	EnvironmentID  string `json:"environment_id"`
	EnvironmentKey string `json:"environment_key"`
	StoreID        string `json:"store_id"`
}

// demoMemories seed the demo store the first time.
var demoMemories = map[string]string{
	"/README.md": "# Demo memory store\n\nThis folder is a memfs mount of a memory store. Every file here is a memory:\n" +
		"edit one, and the change is journaled when you close it and uploaded within the sync interval.\n" +
		"Try: ls -R, cat, an editor, and 'memfs memories ls' in another terminal.\n",
	"/preferences/style.md":    "- Prefers concise answers.\n- Uses tabs, not spaces.\n",
	"/projects/acme/notes.md":  "Acme: weekly sync on Tuesdays. Owner: Dana.\n",
	"/projects/acme/status.md": "Status: migrating the billing service; cut-over planned for next sprint.\n",
}

// upUsage is memfs up --help, before the flags.
const upUsage = `Usage: memfs up [--memory-root DIR] [--listen ADDR] [--data-dir DIR]

Runs everything on one machine: the store service on SQLite, an
environment, a demo store (created once, with a few memories), a session
attaching it, and a worker that mounts it. It prints the mount path and
what to try. Ctrl-C uploads what is pending, unmounts, and exits. A
second Ctrl-C stops waiting (for the uploads, or for a busy mount to be
let go): the store is unmounted anyway (lazily if busy), what was not
uploaded stays in the journal (--state-dir, <data-dir>/state by default)
for the next memfs up (exit 3). The sync flags are those of memfs
mount and memfs worker.

Exit status: 0 stopped, and everything closed on the mount reached the
store; 1 an error; 2 a usage error; 3 stopped, but changes are left in
the journal (the uploads were cut short by a second Ctrl-C, or a change
waits: not UTF-8, a path conflict; see memfs status).

Flags:
`

// upArgs are memfs up's flags, checked and resolved.
type upArgs struct {
	sf                                         syncFlags
	listen, dataDir, memoryRoot, metricsListen string
	interval, quiet                            time.Duration
	owner                                      fs.Ownership
	allowOther                                 bool
	runTools                                   bool
	toolsAs                                    worker.ToolsUser // with runTools
	toolsAsRoot                                bool
}

// parseUpArgs parses and checks memfs up's flags before anything starts;
// what it refuses is a usage error.
func parseUpArgs(args []string) (upArgs, error) {
	var a upArgs
	var toolsUserArg string
	var of ownerFlags
	fset := flag.NewFlagSet("up", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), upUsage)
		fset.PrintDefaults()
	}
	fset.StringVar(&a.listen, "listen", "127.0.0.1:8080", "address of the store service")
	fset.StringVar(&a.dataDir, "data-dir", defaultDataDir(), "database, keys and worker state")
	fset.StringVar(&a.memoryRoot, "memory-root", defaultUpMemoryRoot(), "where the store is mounted (the parent of its folder)")
	// The sync flags of mount, worker and session; the state dir is the
	// data dir's (MEMFS_STATE_DIR is not read: what up leaves in its
	// journals is replayed by the next up of the same data dir).
	a.sf.addWith(fset, syncDefaults{stateDirHelp: "journals, conflict logs and lock files (default <data-dir>/state)", logLevel: "warn"})
	of.add(fset, "you")
	addMetricsFlag(fset, &a.metricsListen)
	fset.BoolVar(&a.runTools, "run-tools", false, "also run the demo session's tools, as memfs worker --run-tools does, in a sandbox as an unprivileged user (its work directory is <state dir>/work/<session id>; it never ends for being idle); the banner shows how to post a tool call as the agent would")
	fset.StringVar(&toolsUserArg, "tools-user", "", "with --run-tools: the user the demo's tools run as, who also owns its mount and work directory (default: nobody when run as root, else yourself)")
	if err := parseFlags(fset, args); err != nil {
		return a, err
	}
	// Checked before anything starts: up mounts its demo store, so "off"
	// (0) makes no sense here either.
	var err error
	if a.interval, a.quiet, err = a.sf.parseSync(); err != nil {
		return a, usagef("%v", err)
	}
	if a.interval == 0 {
		return a, usagef("--memory-sync-interval off means running without memory: up would have nothing to mount")
	}
	switch a.sf.deletions { // checked by the worker too, but only once serve runs
	case syncqueue.DeletionsEnabled, syncqueue.DeletionsLogOnly, syncqueue.DeletionsDisabled:
	default:
		return a, usagef("--memory-sync-deletions must be enabled, log_only or disabled, not %q", a.sf.deletions)
	}
	if err := checkListen(a.listen); err != nil {
		return a, err
	}
	if a.sf.stateDir == "" {
		a.sf.stateDir = upStateDir(a.dataDir)
	}
	var ownerGiven bool
	if a.owner, ownerGiven, a.allowOther, err = of.resolve(); err != nil {
		return a, err
	}
	if !ownerGiven {
		a.owner.UID, a.owner.GID = uint32(os.Getuid()), uint32(os.Getgid())
	}
	switch {
	case toolsUserArg != "" && !a.runTools:
		return a, usagef("--tools-user only works with --run-tools")
	case a.runTools:
		if toolsUserArg == "" && os.Geteuid() == 0 {
			// Root runs the demo's tools as nobody, who owns its mount.
			if _, err := user.Lookup("nobody"); err != nil {
				return a, usagef("memfs up --run-tools runs the agent's tools as nobody, and this host has no user nobody: give --tools-user USER")
			}
			toolsUserArg = "nobody"
		}
		if a.toolsAs, a.toolsAsRoot, err = toolsUser(toolsUserArg, a.memoryRoot); err != nil {
			return a, err
		}
		if !ownerGiven {
			a.owner.UID, a.owner.GID = a.toolsAs.UID, a.toolsAs.GID
		}
	}
	return a, nil
}

func runUp(args []string) error {
	a, err := parseUpArgs(args)
	if err != nil {
		return err
	}
	log, err := newLogger(a.sf.logFormat, a.sf.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	// The port first: a taken one must not leave an admin key behind.
	ln, err := listenFirst(a.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	// One endpoint for the store service's and the worker's metrics.
	me, err := listenMetrics("up", a.metricsListen, log)
	if err != nil {
		return err
	}
	defer me.Close()
	wm, err := me.workerMetrics(true)
	if err != nil {
		return err
	}
	onLoad, err := loadProgress(os.Stderr)
	if err != nil {
		return err
	}
	adminKey, err := upAdminKey(a.dataDir)
	if err != nil {
		return err
	}
	// A second signal closes aborted: waitWorker then aborts the worker's
	// teardown (see signals).
	aborted := make(chan struct{})
	ctx, stop := signals(log, func() { close(aborted) })
	defer stop()

	// The store service, in this process.
	addr, stopServe, err := serveInBackground(serveConfig{listen: a.listen, dataDir: a.dataDir, adminKey: adminKey, memoryRoot: a.memoryRoot, ln: ln,
		maxMemories: store.DefaultMaxMemories, changeRetention: 7 * 24 * time.Hour, changeFeed: true, sqliteSync: "FULL", metrics: me.registerer()}, log)
	if err != nil {
		return err
	}
	defer stopServe()
	return runDemo(ctx, aborted, a, "http://"+addr, adminKey, log, wm, onLoad)
}

// runDemo runs the demo against up's store service at apiURL: it makes
// the demo session, runs a worker that mounts its store, prints the banner
// and waits for Ctrl-C (or the worker's end), then stops the worker and
// archives the session. aborted closing cuts the worker's stop short.
func runDemo(ctx context.Context, aborted <-chan struct{}, a upArgs, apiURL, adminKey string, log *logrus.Logger, wm worker.Metrics, onLoad func(syncqueue.LoadProgress)) error {
	admin, st, sess, err := upDemoSession(ctx, apiURL, adminKey, a.dataDir)
	if err != nil {
		return err
	}
	mountPath := sess.Resources[0].MountPath

	stateDir := a.sf.stateDir
	if err := prepareStateDir(stateDir, log); err != nil {
		return err
	}
	status := startStatus(stateDir, log)
	defer status.Close()
	tools := a.tools(log)
	cfg := a.workerConfig(apiURL, st, log)
	cfg.Status, cfg.Metrics, cfg.OnLoad, cfg.Tools = status, wm, onLoad, tools
	// The demo session's end, as the worker reports it: before the mount,
	// its error is why up fails.
	demoEnded := sessionEnded(&cfg, sess.ID)
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	workerCtx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(workerCtx) }()
	err = waitMounted(ctx, mountPath, workerDone, demoEnded)
	switch {
	case errors.Is(err, errStoppedWaiting):
		// Ctrl-C before the mount: the stop below, as after it.
		fmt.Println("\nmemfs up: stopping before the demo store was mounted (Ctrl-C again to stop waiting) ...")
	case err != nil:
		stopWorker()
		waitWorker(w, workerDone, aborted) // err says why
		return err
	default:
		if err := upRunning(ctx, apiURL, a.dataDir, st, sess.ID, mountPath, stateDir, a.runTools, workerDone); err != nil {
			stopWorker()
			return err
		}
		fmt.Println("\nmemfs up: uploading, unmounting, stopping (Ctrl-C again to stop waiting) ...")
	}
	stopWorker()
	werr, cut := waitWorker(w, workerDone, aborted)
	upEndSession(admin, sess.ID, tools, log)
	if err := stopError(w.Left(), cut, fmt.Sprintf("the next 'memfs up --data-dir %s'", a.dataDir), werr); err != nil {
		return err
	}
	fmt.Println("memfs up: stopped; nothing is left mounted.")
	return nil
}

// workerConfig is the demo worker's configuration from up's flags, for
// the environment st at apiURL (its status, metrics, progress and tools
// are added by runDemo).
func (a upArgs) workerConfig(apiURL string, st upState, log *logrus.Logger) worker.Config {
	return worker.Config{APIURL: apiURL, AllowInsecureHTTP: true, EnvironmentID: st.EnvironmentID, EnvironmentKey: st.EnvironmentKey,
		MemoryRoot: a.memoryRoot, StateDir: a.sf.stateDir, Interval: a.interval, Quiet: a.quiet, Log: log,
		Deletions: a.sf.deletions, DeleteDelay: a.sf.deleteDelay, MountMode: a.sf.mountMode,
		Owner: a.owner, AllowOther: a.allowOther}
}

// tools are the demo session's tools options with --run-tools, else nil.
func (a upArgs) tools(log *logrus.Logger) *worker.ToolsOptions {
	if !a.runTools {
		return nil
	}
	hideCredentials(log)
	// The demo session waits for the person trying it: no idle end.
	never := time.Duration(0)
	return &worker.ToolsOptions{MaxIdle: &never, User: a.toolsAs, AllowRoot: a.toolsAsRoot}
}

// sessionEnded sets cfg.SessionEnded to report session id's end: the
// returned channel receives its error (nil for a clean end) once.
func sessionEnded(cfg *worker.Config, id string) <-chan error {
	ended := make(chan error, 1)
	cfg.SessionEnded = func(sid string, err error) {
		if sid == id {
			select {
			case ended <- err:
			default:
			}
		}
	}
	return ended
}

// serveInBackground runs the store service of c in this process and
// returns its address once it listens, and stop, which stops it and waits
// for it to end.
func serveInBackground(c serveConfig, log *logrus.Logger) (addr string, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, c, log, func(a string) { ready <- a })
	}()
	select {
	case addr = <-ready:
	case err := <-served:
		cancel()
		return "", nil, err
	}
	return addr, func() { cancel(); <-served }, nil
}

// upDemoSession connects to up's own store service at apiURL with the
// admin key, finds or makes the environment and the demo store (see
// upSetup), and opens a session attaching the store for the default agent.
func upDemoSession(ctx context.Context, apiURL, adminKey, dataDir string) (*client.Client, upState, *store.Session, error) {
	// The service is this process's own listener: the keys never leave
	// the host, whatever address it is bound to (--listen 0.0.0.0:8080,
	// or one of the host's own addresses, which the plain-http rule of
	// the client does not know for loopback).
	admin, err := client.New(client.Options{BaseURL: apiURL, APIKey: adminKey, AllowInsecureHTTP: true})
	if err != nil {
		return nil, upState{}, nil, err
	}
	st, err := upSetup(ctx, admin, dataDir)
	if err != nil {
		return nil, st, nil, err
	}
	agentID, err := admin.EnsureDefaultAgent(ctx)
	if err != nil {
		return nil, st, nil, fmt.Errorf("find or make the default agent: %w", err)
	}
	sess, err := admin.CreateSession(ctx, client.CreateSessionInput{Agent: agentID, EnvironmentID: st.EnvironmentID,
		Resources: []client.SessionResourceInput{{MemoryStoreID: st.StoreID}}})
	if err != nil {
		return nil, st, nil, fmt.Errorf("create the demo session: %w", err)
	}
	return admin, st, sess, nil
}

// upEndSession archives the demo session once the worker has stopped, and
// then removes its tools' work directory; a failure is only logged.
func upEndSession(admin *client.Client, sessionID string, tools *worker.ToolsOptions, log logrus.FieldLogger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ArchiveSession(ctx, sessionID); err != nil {
		log.WithError(err).Warn("could not archive the demo session")
	} else if tools != nil {
		tools.RemoveWorkdir(sessionID, log)
	}
}

// upRunning prints the banner and waits for Ctrl-C (nil) or the worker's
// end (its error).
func upRunning(ctx context.Context, apiURL, dataDir string, st upState, sessionID, mountPath, stateDir string, runTools bool, workerDone <-chan error) error {
	self := selfCommand()
	fmt.Printf(`memfs is up.

  store service  %s   (admin key: %s)
  memory store   %s, mounted at %s

Try, in another terminal:
  ls -R %s
  cat %s/README.md
  echo "- Likes examples." >> %s/preferences/style.md
  MEMFS_API_URL=%s MEMFS_API_KEY=$(cat %s) %s memories ls %s
  %s status --state-dir %s

%sCtrl-C uploads what is pending, unmounts and exits.
`, apiURL, filepath.Join(dataDir, server.AdminKeyFile), st.StoreID, mountPath, mountPath, mountPath, mountPath,
		apiURL, filepath.Join(dataDir, server.AdminKeyFile), self, st.StoreID, self, stateDir,
		upToolsBanner(runTools, apiURL, filepath.Join(dataDir, server.AdminKeyFile), self, sessionID, mountPath))
	select {
	case <-ctx.Done():
		return nil
	case err := <-workerDone:
		return workerStopped("", err)
	}
}

// workerStopped is the error of a worker that ended by itself (when: ""
// or " before mounting"); Run returns nil only when asked to stop.
func workerStopped(when string, err error) error {
	if err == nil {
		return fmt.Errorf("the worker stopped%s", when)
	}
	return fmt.Errorf("the worker stopped%s: %w", when, err)
}

// upToolsBanner is what to try with --run-tools: post a tool call as the
// agent would (the admin key may post agent.* events: the documented
// stand-in for the agent loop) and print its result.
func upToolsBanner(runTools bool, apiURL, keyFile, self, sessionID, mountPath string) string {
	if !runTools {
		return ""
	}
	return fmt.Sprintf(`The session's tools run here too (--run-tools). Post a tool call as the agent would,
and see its result:
  MEMFS_API_URL=%s MEMFS_API_KEY=$(cat %s) %s sessions events post %s --tool bash --input '{"command":"grep -r Acme %s"}' --wait-result

`, apiURL, keyFile, self, sessionID, mountPath)
}

// waitWorker waits for the stopping worker to end its sessions. A second
// signal (aborted closed) meanwhile aborts their teardowns: final syncs
// stop, journals stay for replay, mounts are still detached. cut reports
// whether that happened.
func waitWorker(w *worker.Worker, done <-chan error, aborted <-chan struct{}) (err error, cut bool) {
	select {
	case err := <-done:
		return err, false
	case <-aborted:
		w.Abort()
		return <-done, true
	}
}

// defaultUpMemoryRoot is /mnt/memory as root; otherwise a directory the
// user can write (memfs up says where).
func defaultUpMemoryRoot() string {
	if os.Geteuid() == 0 {
		return "/mnt/memory"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "memfs", "memory")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, "memfs-memory")
}

// upAdminKey reads <data-dir>/admin.key, generating it the first time.
func upAdminKey(dataDir string) (string, error) {
	p := filepath.Join(dataDir, server.AdminKeyFile)
	b, err := os.ReadFile(p)
	if err == nil {
		return trimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key := server.NewKey("sk-memfs-admin-")
	if err := durable.CreateFile(p, []byte(key+"\n"), 0o600); err != nil { // never over a key written meanwhile
		return "", fmt.Errorf("write the admin key: %w", err)
	}
	return key, nil
}

// upSetup creates the environment and the demo store once.
func upSetup(ctx context.Context, admin *client.Client, dataDir string) (upState, error) {
	p := filepath.Join(dataDir, "up.json")
	var st upState
	if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &st) == nil && st.EnvironmentID != "" {
		if _, err := admin.GetStore(ctx, st.StoreID); err == nil {
			return st, nil
		}
	}
	env, err := admin.CreateEnvironment(ctx, client.CreateEnvironmentInput{Name: "memfs up"})
	if err != nil {
		return st, fmt.Errorf("create the environment: %w", err)
	}
	s, err := admin.CreateStore(ctx, store.CreateStoreInput{Name: "demo", Description: "memfs up's demo store"})
	if err != nil {
		return st, fmt.Errorf("create the demo store: %w", err)
	}
	for path, content := range demoMemories {
		if _, err := admin.CreateMemory(ctx, s.ID, path, content); err != nil {
			return st, fmt.Errorf("seed the demo store: %w", err)
		}
	}
	st = upState{EnvironmentID: env.ID, EnvironmentKey: env.EnvironmentKey, StoreID: s.ID}
	b, _ := json.MarshalIndent(st, "", "  ")
	return st, durable.WriteFile(p, b, 0o600)
}

// errStoppedWaiting is waitMounted's answer to Ctrl-C: not a failure, the
// stop begins.
var errStoppedWaiting = errors.New("stopped before the demo store was mounted")

// upMountWait bounds the wait for the demo store's mount when neither the
// worker nor the demo session has ended.
const upMountWait = 60 * time.Second

// waitMounted waits until the worker has mounted the demo store. It fails
// as soon as the demo session ends first (sessionEnded: why) or the worker
// does; ctx ending (Ctrl-C) is errStoppedWaiting.
func waitMounted(ctx context.Context, path string, workerDone <-chan error, sessionEnded <-chan error) error {
	deadline := time.NewTimer(upMountWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(path, ".anthropic-memory-store")); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errStoppedWaiting
		case err := <-sessionEnded:
			if err == nil {
				return fmt.Errorf("the demo session ended before its store was mounted at %s (see the log above)", path)
			}
			return fmt.Errorf("the demo session failed: %w", err)
		case err := <-workerDone:
			return workerStopped(" before mounting", err)
		case <-deadline.C:
			return fmt.Errorf("the demo store was not mounted at %s within %s (see the log above)", path, upMountWait)
		case <-tick.C:
		}
	}
}

// selfCommand is how to run this binary from another terminal: "memfs"
// when that is what PATH finds, else its absolute path (./up.sh runs
// bin/memfs, which is not on PATH).
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "memfs"
	}
	if p, err := exec.LookPath("memfs"); err == nil {
		if a, err1 := os.Stat(p); err1 == nil {
			if b, err2 := os.Stat(exe); err2 == nil && os.SameFile(a, b) {
				return "memfs"
			}
		}
	}
	return exe
}
