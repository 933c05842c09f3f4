package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("worker", "poll an environment's work queue and mount each session's memory stores", runWorker)
	register("session", "run one already-claimed work item in the foreground", runSession)
}

// workerFlags are the flags shared by memfs worker and memfs session.
type workerFlags struct {
	syncFlags
	ownerFlags
	apiURL, memoryRoot string
	apiTLS             apiTLSFlags
	replayKey          *keyFlag
	metricsListen      string
	tools              toolFlags
}

func (f *workerFlags) add(fset *flag.FlagSet) {
	fset.StringVar(&f.apiURL, "api-url", envOr("http://127.0.0.1:8080", "MEMFS_API_URL", "ANTHROPIC_BASE_URL"), "the store service (env MEMFS_API_URL, ANTHROPIC_BASE_URL)")
	f.apiTLS.add(fset)
	fset.StringVar(&f.memoryRoot, "memory-root", envOr("/mnt/memory", "MEMFS_MEMORY_ROOT"), "parent of every mount path (env MEMFS_MEMORY_ROOT)")
	f.replayKey = addKeyFlag(fset, "replay-api-key", "an admin key used to replay journals left behind at start", "MEMFS_REPLAY_API_KEY")
	f.syncFlags.add(fset)
	f.ownerFlags.add(fset, "the owner of --memory-root: chown it to the agent's user")
	addMetricsFlag(fset, &f.metricsListen)
	f.tools.add(fset)
}

// metrics starts the metrics endpoint (when --metrics-listen is given)
// and hands the worker its metrics.
func (f *workerFlags) metrics(cmd string, cfg *worker.Config) (*metricsEndpoint, error) {
	me, err := listenMetrics(cmd, f.metricsListen, cfg.Log)
	if err != nil {
		return nil, err
	}
	wm, err := me.workerMetrics(true)
	if err != nil {
		me.Close()
		return nil, err
	}
	if wm != nil {
		cfg.Metrics = wm
	}
	return me, nil
}

// config maps the flags onto worker.Config.
func (f *workerFlags) config(log *logrus.Logger) (worker.Config, error) {
	interval, quiet, err := f.parseSync()
	if err != nil {
		return worker.Config{}, usagef("%v", err)
	}
	replayKey, err := f.replayKey.resolve(os.Getenv)
	if err != nil {
		return worker.Config{}, err
	}
	owner, ownerGiven, allowOther, err := f.ownerFlags.resolve()
	if err != nil {
		return worker.Config{}, err
	}
	tls, err := f.apiTLS.resolve(os.Getenv)
	if err != nil {
		return worker.Config{}, err
	}
	cfg := worker.Config{APIURL: f.apiURL, CAFile: tls.caFile, AllowInsecureHTTP: tls.insecureHTTP, MemoryRoot: f.memoryRoot, StateDir: f.stateDir, Interval: interval, Quiet: quiet,
		Deletions: f.deletions, DeleteDelay: f.deleteDelay, MountMode: f.mountMode, ReplayAPIKey: replayKey, Log: log,
		Owner: owner, OwnerFromMemoryRoot: !ownerGiven, AllowOther: allowOther}
	if cfg.OnLoad, err = loadProgress(os.Stderr); err != nil {
		return cfg, err
	}
	if cfg.Tools, err = f.tools.options(f.memoryRoot); err != nil {
		return cfg, err
	}
	if cfg.Tools != nil && !ownerGiven {
		// The tools user owns the mounts, so the agent can work in them.
		cfg.Owner.UID, cfg.Owner.GID, cfg.OwnerFromMemoryRoot = cfg.Tools.User.UID, cfg.Tools.User.GID, false
	}
	if err := cfg.Validate(); err != nil {
		return cfg, clientUsage(err)
	}
	return cfg, nil
}

func runWorker(args []string) error {
	var f workerFlags
	var envID string
	fset := flag.NewFlagSet("worker", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs worker --api-url URL --environment-id ID --environment-key-file FILE [flags]

Polls the environment's work queue and runs sessions, many at once: for
each session it mounts every attached memory store at its mount_path
(read-only ones read-only), keeps it in sync, and takes it down when the
session ends. SIGTERM/SIGINT ends every session (writes uploaded, mounts
removed, items stopped) and exits; a second signal stops waiting (the
journals stay for replay). Give it a stop timeout of at least 35 s
(systemd TimeoutStopSec=35, docker --stop-timeout 35). A store unmounted
from outside (umount) while its session runs gets a final sync (writes
only) and is let go; the session goes on without it. Either that, or
something mounted over or inside a store's mount path (mount --bind), is
logged as an error and shown by memfs status; the session goes on.

With --run-tools it also runs each session's tools (the official SDK's
session tool runner, in <workdir>/<session id>), until the session
terminates or stays idle past --max-idle (a clean end); the agent's shell
gets no memfs or Anthropic key (--tool-env, --tool-env-file add to it).

Exit status: 0 stopped, and everything closed on the session mounts
reached the store; 1 an error (the server refused the poll, an ack, a
session or a store's first request for good: 400, 401, 403, 404, with its
message); 2 a usage
error; 3 stopped, but changes are left in the journals (the final syncs
were cut short, the store was unreachable, a change waits, or a delete
not sent: a stop sends writes only); memfs status lists them.

The environment key comes from --environment-key-file (a file only the
worker's user can read) or MEMFS_ENVIRONMENT_KEY; --environment-key works
too, but shows the key to every user of the host in ps.

Example:
  memfs worker --api-url http://127.0.0.1:8080 --environment-id env_... --environment-key-file /etc/memfs/environment.key

Flags:
`)
		fset.PrintDefaults()
	}
	fset.StringVar(&envID, "environment-id", envOr("", "MEMFS_ENVIRONMENT_ID", "ANTHROPIC_ENVIRONMENT_ID"), "the environment (env MEMFS_ENVIRONMENT_ID, ANTHROPIC_ENVIRONMENT_ID)")
	envKeyFlag := addKeyFlag(fset, "environment-key", "the environment key", "MEMFS_ENVIRONMENT_KEY", "ANTHROPIC_ENVIRONMENT_KEY")
	f.add(fset)
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	envKey, err := envKeyFlag.resolve(os.Getenv)
	if err != nil {
		return err
	}
	if envID == "" || envKey == "" {
		return usagef("--environment-id and the environment key (%s) are required", envKeyFlag.sources())
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	cfg, err := f.config(log)
	if err != nil {
		return err
	}
	cfg.EnvironmentID, cfg.EnvironmentKey = envID, envKey
	if cfg.Tools != nil {
		cfg.Tools.Hide = keyFiles(envKeyFlag.file, f.replayKey.file)
		hideCredentials(log)
	}
	me, err := f.metrics("worker", &cfg)
	if err != nil {
		return err
	}
	defer me.Close()
	if err := prepareStateDir(cfg.StateDir, log); err != nil {
		return err
	}
	cfg.Status = startStatus(cfg.StateDir, log)
	defer cfg.Status.Close()
	w, err := worker.New(cfg)
	if err != nil {
		return clientUsage(err)
	}
	var cut atomic.Bool
	ctx, stop := signals(log, func() { cut.Store(true); w.Abort() })
	defer stop()
	err = w.Run(ctx)
	return stopError(w.Left(), cut.Load(), workerReplayedBy(cfg.StateDir), err)
}

// workerReplayedBy says what uploads the changes a worker or session
// left in the journals of its state dir.
func workerReplayedBy(stateDir string) string {
	return fmt.Sprintf("the store's next session on this host (same --state-dir), a worker started with --replay-api-key-file, or 'memfs replay --state-dir %s'", stateDir)
}

func runSession(args []string) error {
	var f workerFlags
	var workJSON, workID, envID, sessionID, secretFile, lastHB string
	fset := flag.NewFlagSet("session", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs session --api-url URL (--work-json FILE|- | --work-id ID --environment-id ID --session-id ID --work-secret-file FILE) [flags]

Runs one already-claimed work item in the foreground, exactly like the
worker runs it: the one-sandbox-per-session model, or a script run per
work item. The item comes as the JSON the poll returned (a file, or - for
stdin), or as its ids plus a secret file (which other users must not be
able to read). Falls back to ANTHROPIC_WORK_ID, ANTHROPIC_ENVIRONMENT_ID,
ANTHROPIC_SESSION_ID, ANTHROPIC_WORK_SECRET and ANTHROPIC_WORK_LAST_HEARTBEAT
(to continue another process's lease).

With --run-tools it also runs the session's tools, as memfs worker does.

Exit status: 0 the session ended, and everything closed on its mounts
reached the store; 1 an error (the session could not start); 2 a usage
error; 3 ended, but changes are left in the journal (as for memfs worker).

Flags:
`)
		fset.PrintDefaults()
	}
	fset.StringVar(&workJSON, "work-json", "", "the work item JSON as the poll returned it (a file, or - for stdin)")
	fset.StringVar(&workID, "work-id", envOr("", "ANTHROPIC_WORK_ID"), "the work item id (env ANTHROPIC_WORK_ID)")
	fset.StringVar(&envID, "environment-id", envOr("", "MEMFS_ENVIRONMENT_ID", "ANTHROPIC_ENVIRONMENT_ID"), "the environment id")
	fset.StringVar(&sessionID, "session-id", envOr("", "ANTHROPIC_SESSION_ID"), "the session id (env ANTHROPIC_SESSION_ID)")
	fset.StringVar(&secretFile, "work-secret-file", "", "a file holding the work item's secret (mode 0600, one line)")
	fset.StringVar(&lastHB, "last-heartbeat", envOr("", "ANTHROPIC_WORK_LAST_HEARTBEAT"), "continue another process's lease from this last_heartbeat")
	f.add(fset)
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	item, err := readWorkItem(workJSON, workID, envID, sessionID, secretFile)
	if err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	cfg, err := f.config(log)
	if err != nil {
		return err
	}
	cfg.EnvironmentID = item.EnvironmentID
	if cfg.Tools != nil {
		cfg.Tools.Hide = keyFiles(secretFile, f.replayKey.file)
		hideCredentials(log)
	}
	me, err := f.metrics("session", &cfg)
	if err != nil {
		return err
	}
	defer me.Close()
	if err := prepareStateDir(cfg.StateDir, log); err != nil {
		return err
	}
	cfg.Status = startStatus(cfg.StateDir, log)
	defer cfg.Status.Close()
	s, err := worker.NewSession(cfg)
	if err != nil {
		return clientUsage(err)
	}
	abort, cancelAbort := context.WithCancel(context.Background())
	defer cancelAbort()
	ctx, stop := signals(log, cancelAbort)
	defer stop()
	s.Recover(ctx)
	err = s.Run(ctx, abort, item, lastHB)
	return stopError(s.Left(), abort.Err() != nil, workerReplayedBy(cfg.StateDir), err)
}

// readWorkItem builds the work item from --work-json, or from ids and a
// secret (file or ANTHROPIC_WORK_SECRET).
func readWorkItem(workJSON, workID, envID, sessionID, secretFile string) (store.Work, error) {
	var item store.Work
	if workJSON != "" {
		var r io.Reader = os.Stdin
		if workJSON != "-" {
			f, err := os.Open(workJSON)
			if err != nil {
				return item, err
			}
			defer f.Close()
			r = f
		}
		if err := json.NewDecoder(r).Decode(&item); err != nil {
			return item, fmt.Errorf("the work item JSON is malformed: %w", err)
		}
		if item.ID == "" || item.Data.ID == "" || item.EnvironmentID == "" {
			return item, errors.New("the work item JSON lacks id, data.id or environment_id")
		}
		return item, nil
	}
	if workID == "" || envID == "" || sessionID == "" {
		return item, usagef("give --work-json, or --work-id, --environment-id and --session-id (or the ANTHROPIC_* variables)")
	}
	secret := os.Getenv("ANTHROPIC_WORK_SECRET")
	if secretFile != "" {
		s, err := readKeyFile(secretFile)
		if err != nil {
			return item, fmt.Errorf("--work-secret-file: %w", err)
		}
		secret = s
	}
	item = store.Work{ID: workID, Type: store.TypeWork, EnvironmentID: envID, Data: store.WorkData{Type: store.TypeSession, ID: sessionID}, State: store.WorkStarting}
	if s := trimSpace(secret); s != "" {
		item.Secret = &s
	}
	return item, nil
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// startStatus serves this process's mounts to memfs status. Without the
// socket everything still works; status then shows only what the state
// dir holds.
func startStatus(stateDir string, log logrus.FieldLogger) *worker.StatusServer {
	s, err := worker.StartStatusServer(stateDir, log)
	if err != nil {
		log.WithError(err).Warn("memfs status can't see this process")
		return nil
	}
	return s
}
