package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// Running the session's tools (--run-tools; docs/operating.md, "Running
// the session's tools"): once a session's
// stores are mounted, the official SDK's session tool runner executes the
// agent's tool calls (bash, read, write, edit, glob, grep of
// agent_toolset_20260401) in a work directory of the session's own, and
// posts their results to the session. The runner runs in a sandbox of the
// session's own, as an unprivileged user (sandbox.go, toolsrunner.go),
// and reaches the API only through the worker's proxy, which adds the work
// item's session token (apiproxy.go). The lease stays memfs's: the runner
// never heartbeats.
//
// The runner's end decides the session's ending (Session.Run): the session
// terminated or idle past MaxIdle is a clean end; the runner failing (or
// its sandbox ending without it) is an error end (writes only, the item
// stopped, Run returns the error); the session ending first for another
// reason (a lost lease, the heartbeat's stopping, a shutdown) stops the
// runner. In every case the sandbox has ended, every process in it with
// it, before the final sync, so nothing the agent started still writes to
// the mounts while they are taken down.

// ToolsOptions configure running the session's tools. A nil *ToolsOptions
// in Config runs none (the worker only mounts).
type ToolsOptions struct {
	// WorkRoot is the parent of the sessions' work directories: a session
	// works in WorkRoot/<session id>, 0700 and owned by User, created at
	// its start (sessions run concurrently, each in its own). Default:
	// <state dir>/work.
	//
	// A work directory lives as long as its session: it is removed once
	// the session has terminated (seen at its clean end, or when a work
	// item of a terminated session is claimed), and kept when the session
	// only went idle, lost its lease or the worker stopped, so its next run
	// on this host finds the agent's files again. A directory with a mount
	// below it is never removed (a warning says so).
	WorkRoot string
	// MaxIdle is how long the session may stay idle after its turn ended
	// before the runner stops and the session ends cleanly. nil: the SDK's
	// default, anthropic.DefaultMaxIdle (60 s); zero or less: never.
	MaxIdle *time.Duration
	// Env is the agent's shell environment, exactly (see ToolEnv). Default:
	// ToolEnv(os.Environ(), nil). HOME is the work directory and TMPDIR
	// /tmp, the sandbox's own.
	Env map[string]string
	// MaxFileBytes caps what the read and edit tools load
	// (agenttoolset.AgentToolContext.MaxFileBytes; 0: the SDK's 256 KiB).
	MaxFileBytes int64
	// User is who the tools run as (--tools-user). Root only with
	// AllowRoot. A worker that is not root runs them as itself.
	User      ToolsUser
	AllowRoot bool
	// Network is NetworkHost (the default) or NetworkNone.
	Network string
	// Bwrap is the bubblewrap binary (default: bwrap on PATH).
	Bwrap string
	// Hide are files the sandbox masks even under its read-only system
	// trees (the key files the worker was given).
	Hide []string
	// Transport carries the sandbox's API requests from the proxy to the
	// API (Config.Validate: the worker's own, with its CA file).
	Transport http.RoundTripper

	bwrap, setpriv, exe string // found by validate
}

// validate fills in the defaults and finds the sandbox's tools.
func (o *ToolsOptions) validate(stateDir string) error {
	if o.WorkRoot == "" {
		o.WorkRoot = filepath.Join(stateDir, "work")
	}
	abs, err := filepath.Abs(o.WorkRoot)
	if err != nil {
		return fmt.Errorf("the work directory %s: %w", o.WorkRoot, err)
	}
	o.WorkRoot = abs
	if o.Env == nil {
		o.Env = ToolEnv(os.Environ(), nil)
	}
	for k := range o.Env {
		if IsCredentialName(k) {
			return fmt.Errorf("%s is a memfs or Anthropic credential; it is never given to the agent's shell", k)
		}
	}
	switch o.Network {
	case "":
		o.Network = NetworkHost
	case NetworkHost, NetworkNone:
	default:
		return fmt.Errorf("the tools' network must be host or none, not %q", o.Network)
	}
	euid := uint32(os.Geteuid())
	switch {
	case euid != 0 && o.User.UID != euid:
		return fmt.Errorf("a worker that is not root runs the agent's tools as its own user (uid %d), not as %s", euid, o.User)
	case o.User.UID == 0 && !o.AllowRoot:
		return errors.New("the agent's tools would run as root: give --tools-user USER, an unprivileged user (the default is the owner of --memory-root), or --tools-user root to allow it")
	}
	if o.bwrap, o.setpriv, err = findSandboxTools(o.Bwrap); err != nil {
		return err
	}
	if o.exe, err = os.Executable(); err != nil {
		return fmt.Errorf("the agent's sandbox runs this binary, which could not be found: %w", err)
	}
	return nil
}

// toolRun is the sandboxed tool runner of one session.
type toolRun struct {
	workdir string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	askOnce sync.Once
	res     chan toolResult // the runner's end, once (capacity 1)
	done    chan struct{}   // closed once the sandbox and everything in it ended
}

// toolResult is how the runner ended.
type toolResult struct {
	ending Ending
	err    error // with EndError
}

// stopGrace is how long a runner asked to stop has before its sandbox is
// killed (the SDK closes the shell at once).
const stopGrace = 5 * time.Second

// startTools makes the session's work directory and starts its tool
// runner in a sandbox of its own (sandbox.go), with the mounts as the file
// tools' allowed roots and the read-only ones as read-only roots. The
// runner reaches the API through a proxy that adds token, the session's
// (never the environment key).
func (s *Session) startTools(sess *store.Session, token string, mounts []*storeMount, rs []store.SessionResource, log logrus.FieldLogger) (*toolRun, error) {
	opts := s.cfg.Tools
	if token == "" {
		return nil, errors.New("the work item carried no sessions token, and the agent's tools are never given the environment key")
	}
	workdir := filepath.Join(opts.WorkRoot, sess.ID)
	if err := makeWorkdir(opts.WorkRoot, workdir, opts.User); err != nil {
		return nil, err
	}
	readOnly := map[string]bool{}
	for _, r := range rs {
		readOnly[r.MemoryStoreID] = r.Access == store.AccessReadOnly
	}
	env := maps.Clone(opts.Env)
	env["HOME"], env["TMPDIR"] = workdir, "/tmp"
	delete(env, "USER")
	delete(env, "LOGNAME")
	if opts.User.Name != "" {
		env["USER"], env["LOGNAME"] = opts.User.Name, opts.User.Name
	}
	rawSess, err := json.Marshal(sess)
	if err != nil {
		return nil, err
	}
	cfg := runnerConfig{SessionID: sess.ID, Session: rawSess, Workdir: workdir, Env: env, MaxIdle: opts.MaxIdle,
		MaxFileBytes: opts.MaxFileBytes, AllowRoot: opts.AllowRoot, LogLevel: logLevel(log).String()}
	spec := sandboxSpec{Bwrap: opts.bwrap, Setpriv: opts.setpriv, Exe: opts.exe, Workdir: workdir, Network: opts.Network,
		User: opts.User, Privileged: os.Geteuid() == 0, Hide: opts.Hide}
	for _, m := range mounts {
		cfg.AllowedRoots = append(cfg.AllowedRoots, m.path)
		spec.Mounts = append(spec.Mounts, sandboxMount{Path: m.path, ReadOnly: readOnly[m.storeID]})
		if readOnly[m.storeID] {
			cfg.ReadOnlyRoots = append(cfg.ReadOnlyRoots, m.path)
		}
	}
	spec.Host = statPaths(append(append(slices.Clone(systemDirs), etcSecrets...), opts.Hide...))
	log = log.WithField("workdir", workdir)
	proxy, err := startAPIProxy(s.cfg.APIURL, sess.ID, token, opts.User.UID, opts.User.GID, opts.Transport, log)
	if err != nil {
		return nil, err
	}
	spec.Socket = proxy.sock
	t, err := startSandbox(bwrapArgs(spec), cfg, proxy, log)
	if err != nil {
		proxy.close()
		return nil, err
	}
	t.workdir = workdir
	log.WithFields(logrus.Fields{"allowed_roots": strings.Join(cfg.AllowedRoots, ":"), "read_only_roots": strings.Join(cfg.ReadOnlyRoots, ":"),
		"tools_user": opts.User.String(), "tools_network": opts.Network}).
		Info("running the session's tools")
	return t, nil
}

// makeWorkdir creates a session's work directory, owned by the tools user
// and 0700, in a work root of root's (0700: only the sandbox, which binds
// the work directory itself, reaches in).
func makeWorkdir(root, dir string, u ToolsUser) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("create the work directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the work directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("the work directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("the work directory %s is not a directory", dir)
	}
	if err := errors.Join(os.Lchown(dir, int(u.UID), int(u.GID)), os.Chmod(dir, 0o700)); err != nil {
		return fmt.Errorf("give the work directory to %s: %w", u, err)
	}
	return nil
}

// logLevel is the level log writes at (info when unknown).
func logLevel(log logrus.FieldLogger) logrus.Level {
	switch l := log.(type) {
	case *logrus.Logger:
		return l.GetLevel()
	case *logrus.Entry:
		return l.Logger.GetLevel()
	}
	return logrus.InfoLevel
}

// startSandbox starts argv (bwrap), hands the runner cfg, and relays what
// it logs until it ends.
func startSandbox(argv []string, cfg runnerConfig, proxy *apiProxy, log logrus.FieldLogger) (*toolRun, error) {
	line, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	// The sandbox dies with the worker, even by kill -9: bwrap is killed,
	// and with it the sandbox's PID namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	t := &toolRun{cmd: cmd, res: make(chan toolResult, 1), done: make(chan struct{})}
	if t.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent's sandbox: %w", err)
	}
	if _, err := t.stdin.Write(append(line, '\n')); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("start the agent's sandbox: %w", err)
	}
	var end runnerEnd
	var lastErr string
	relayed := make(chan struct{}, 2)
	go func() { end = relayRunner(stdout, log); relayed <- struct{}{} }()
	go func() { lastErr = relaySandboxErrors(stderr, log); relayed <- struct{}{} }()
	go func() {
		defer close(t.done)
		<-relayed
		<-relayed
		werr := cmd.Wait()
		proxy.close()
		t.res <- end.result(werr, lastErr)
	}()
	return t, nil
}

// runnerEnd is the end the runner reported ("" if none).
type runnerEnd struct {
	kind, err string
}

// result is the session's ending for a runner that reported end and
// exited with werr (lastErr: the sandbox's last error line).
func (e runnerEnd) result(werr error, lastErr string) toolResult {
	switch e.kind {
	case runnerEndClean:
		return toolResult{ending: EndClean}
	case runnerEndShutdown:
		return toolResult{ending: EndShutdown}
	case runnerEndError:
		return toolResult{ending: EndError, err: fmt.Errorf("the session tool runner: %s", e.err)}
	}
	why := "it exited"
	if werr != nil {
		why = werr.Error()
	}
	if lastErr != "" {
		why += ": " + lastErr
	}
	return toolResult{ending: EndError, err: fmt.Errorf("the agent's sandbox ended before its tool runner did (%s)", why)}
}

// Bounds on what the worker reads from the sandbox.
const (
	maxRelayLine   = 64 << 10
	maxRelayFields = 32
)

// relayRunner logs the runner's JSON lines as the worker's own (its
// level, message and fields, at most error), and returns the end it
// reported. The lines are the sandbox's, so they are read with bounds and
// a line that is not the runner's JSON is logged as text.
func relayRunner(r io.Reader, log logrus.FieldLogger) runnerEnd {
	var end runnerEnd
	err := eachLine(r, func(line []byte) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			log.WithField("line", strings.TrimSpace(string(line))).Info("the agent's sandbox wrote")
			return
		}
		msg, _ := m["msg"].(string)
		lvl, lerr := logrus.ParseLevel(fmt.Sprint(m["level"]))
		if lerr != nil || lvl < logrus.ErrorLevel {
			lvl = logrus.InfoLevel
		}
		if k, ok := m[runnerEndField].(string); ok {
			end = runnerEnd{kind: k, err: fmt.Sprint(m[logrus.ErrorKey])}
		}
		fields := logrus.Fields{}
		for k, v := range m {
			if k == "msg" || k == "level" || k == "time" || k == runnerEndField || len(fields) >= maxRelayFields {
				continue
			}
			fields[k] = v
		}
		log.WithFields(fields).Log(lvl, msg)
	})
	if err != nil {
		log.WithError(err).Warn("the agent's sandbox wrote a line too long; the rest of its output is dropped")
	}
	return end
}

// relaySandboxErrors logs what bwrap (or the runner, before its log is set
// up) writes to stderr, and returns the last line.
func relaySandboxErrors(r io.Reader, log logrus.FieldLogger) string {
	var last string
	err := eachLine(r, func(line []byte) {
		if last = strings.TrimSpace(string(line)); last != "" {
			log.WithField("line", last).Warn("the agent's sandbox reported an error")
		}
	})
	if err != nil {
		log.WithError(err).Warn("the agent's sandbox wrote a line too long to its stderr; the rest is dropped")
	}
	return last
}

// eachLine calls fn with each line of r, of at most maxRelayLine bytes,
// until EOF (nil). A longer line ends it with an error; the rest of r is
// read and dropped, so the writer never blocks.
func eachLine(r io.Reader, fn func(line []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxRelayLine)
		if err != nil {
			io.Copy(io.Discard, br)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		fn(line)
	}
}

// result delivers the runner's end (never, for a session without tools).
func (t *toolRun) result() <-chan toolResult {
	if t == nil {
		return nil
	}
	return t.res
}

// stop asks the runner to stop (when the session ended first), kills the
// sandbox if it has not ended stopGrace later, and waits until everything
// in it is gone (the agent's shell too), or ctx ends: false then.
func (t *toolRun) stop(ctx context.Context) bool {
	if t == nil {
		return true
	}
	t.askOnce.Do(func() { t.stdin.Close() })
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	for {
		select {
		case <-t.done:
			return true
		case <-grace.C:
			// bwrap's death ends the sandbox's PID namespace: every process
			// in it is killed.
			t.cmd.Process.Kill()
		case <-ctx.Done():
			t.cmd.Process.Kill()
			return false
		}
	}
}

// RemoveWorkdir removes the work directory of a session that has
// terminated while no worker ran it (memfs up archives its demo session
// after its worker stopped), as removeWorkdir does.
func (o *ToolsOptions) RemoveWorkdir(sessionID string, log logrus.FieldLogger) {
	if o.WorkRoot != "" && sessionID != "" {
		removeWorkdir(filepath.Join(o.WorkRoot, sessionID), log)
	}
}

// removeWorkdir removes a terminated session's work directory, unless
// something is mounted at or below it (the agent's shell may mount, as
// root): RemoveAll would go into the mount.
func removeWorkdir(dir string, log logrus.FieldLogger) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return
	}
	mounts, err := fs.Mounts()
	if err != nil {
		log.WithError(err).Warn("the work directory is kept: the mount table could not be read")
		return
	}
	for _, mi := range mounts {
		if d := filepath.Clean(mi.Dir); d == dir || strings.HasPrefix(d, dir+"/") {
			log.WithField("mount", d).Warn("the work directory of a terminated session is kept: something is mounted in it")
			return
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		log.WithError(err).Warn("removing the work directory of a terminated session")
		return
	}
	log.WithField("workdir", dir).Info("removed the work directory of a terminated session")
}
