package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"
	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// Running the session's tools (--run-tools, worker.md): once a session's
// stores are mounted, the official SDK's session tool runner executes the
// agent's tool calls (bash, read, write, edit, glob, grep of
// agent_toolset_20260401) in a work directory of the session's own, and
// posts their results to the session, authenticated with the work item's
// session token. The lease stays memfs's: the runner never heartbeats.
//
// The runner's end decides the session's ending (Session.Run): the session
// terminated or idle past MaxIdle is a clean end; the runner failing is an
// error end (writes only, the item stopped, Run returns the error); the
// session ending first for another reason (a lost lease, the heartbeat's
// stopping, a shutdown) cancels the runner. In every case the runner is
// closed, its tools too (the shell killed), before the final sync, so nothing
// the agent started still writes to the mounts while they are taken down.

// ToolsOptions configure running the session's tools. A nil *ToolsOptions
// in Config runs none (the worker only mounts).
type ToolsOptions struct {
	// WorkRoot is the parent of the sessions' work directories: a session
	// works in WorkRoot/<session id>, 0700, created at its start (sessions
	// run concurrently, each in its own). Default: <state dir>/work.
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
	// ToolEnv(os.Environ(), nil).
	Env map[string]string
	// MaxFileBytes caps what the read and edit tools load
	// (agenttoolset.AgentToolContext.MaxFileBytes; 0: the SDK's 256 KiB).
	MaxFileBytes int64
}

// validate fills in the defaults.
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
	return nil
}

// toolRun is the tool runner of one session, run by its own goroutine.
type toolRun struct {
	workdir string
	cancel  context.CancelFunc
	res     chan toolResult // the runner's end, once (capacity 1)
	done    chan struct{}   // closed once the runner and its tools are closed
}

// toolResult is how the runner ended.
type toolResult struct {
	ending Ending
	err    error // with EndError
}

// startTools makes the session's work directory and starts its tool
// runner, authenticated with cred (the session token, else the
// environment key), with the mounts as the file tools' allowed roots and
// the read-only ones as read-only roots.
func (s *Session) startTools(sess *store.Session, cred string, mounts []*storeMount, rs []store.SessionResource, log logrus.FieldLogger) (*toolRun, error) {
	opts := s.cfg.Tools
	workdir := filepath.Join(opts.WorkRoot, sess.ID)
	if err := os.MkdirAll(opts.WorkRoot, 0o700); err != nil {
		return nil, fmt.Errorf("create the work directory: %w", err)
	}
	if err := os.Mkdir(workdir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create the work directory: %w", err)
	}
	readOnly := map[string]bool{}
	for _, r := range rs {
		readOnly[r.MemoryStoreID] = r.Access == store.AccessReadOnly
	}
	tc := &agenttoolset.AgentToolContext{Workdir: workdir, Env: opts.Env, MaxFileBytes: opts.MaxFileBytes}
	for _, m := range mounts {
		tc.AllowedRoots = append(tc.AllowedRoots, m.path)
		if readOnly[m.storeID] {
			tc.ReadOnlyRoots = append(tc.ReadOnlyRoots, m.path)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &toolRun{workdir: workdir, cancel: cancel, res: make(chan toolResult, 1), done: make(chan struct{})}
	log = log.WithField("workdir", workdir)
	go func() {
		defer close(t.done)
		t.res <- s.runTools(ctx, sess, cred, tc, log)
	}()
	log.WithFields(logrus.Fields{"allowed_roots": strings.Join(tc.AllowedRoots, ":"), "read_only_roots": strings.Join(tc.ReadOnlyRoots, ":")}).
		Info("running the session's tools")
	return t, nil
}

// result delivers the runner's end (never, for a session without tools).
func (t *toolRun) result() <-chan toolResult {
	if t == nil {
		return nil
	}
	return t.res
}

// stop cancels the runner (when the session ended first) and waits until
// it and its tools are closed (the agent's shell is gone), or ctx ends:
// false then.
func (t *toolRun) stop(ctx context.Context) bool {
	if t == nil {
		return true
	}
	t.cancel()
	select {
	case <-t.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// runTools sets up the agent's skills, runs the SDK's session tool runner
// until it ends, and closes it, the tools and the skills.
func (s *Session) runTools(ctx context.Context, sess *store.Session, cred string, tc *agenttoolset.AgentToolContext, log logrus.FieldLogger) toolResult {
	slogger := newSlog(log)
	// The runner's client talks to the store service only, with the item's
	// credential only: nothing from the worker's environment (no
	// ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY or profile).
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.cfg.APIURL), option.WithAuthToken(cred))
	if ss, err := sdkSession(sess); err != nil {
		log.WithError(err).Warn("the session's agent could not be read: its skills are not set up")
	} else if err := tc.SetupSkillsFromSession(ctx, client, ss); err != nil {
		log.WithError(err).Warn("setting up the agent's skills failed")
	}
	// Deferred in this order, run in reverse: the shell is killed, then the
	// skills one session downloaded are removed, as the SDK's worker does.
	defer func() {
		if err := tc.Cleanup(); err != nil {
			log.WithError(err).Warn("removing the agent's skills failed")
		}
	}()
	tools := agenttoolset.BetaAgentToolset20260401(tc)
	defer agenttoolset.CloseAll(tools)

	runner := client.Beta.Sessions.Events.NewToolRunner(ctx, sess.ID, anthropic.SessionToolRunnerOptions{
		Tools: tools, MaxIdle: s.cfg.Tools.MaxIdle, Logger: slogger,
	})
	for runner.Next() {
		call := runner.Current()
		log.WithFields(logrus.Fields{"tool": call.Name, "tool_use_id": call.ToolUseID, "is_error": call.IsError, "posted": call.Posted}).
			Info("dispatched tool")
	}
	err := runner.Err()
	runner.Close() //nolint:errcheck // documented to return nil
	switch {
	case errors.Is(err, anthropic.ErrSessionTerminated):
		log.Info("the session terminated: its tool runner stopped")
		return toolResult{ending: EndClean}
	case errors.Is(err, anthropic.ErrIdleTimeout):
		log.WithField("max_idle", s.cfg.Tools.MaxIdle).Info("the session stayed idle after its turn ended: its tool runner stopped")
		return toolResult{ending: EndClean}
	case ctx.Err() != nil:
		// The session ended first (lease, heartbeat, shutdown): that
		// ending stands; this result is not read.
		return toolResult{ending: EndShutdown}
	case err == nil:
		err = errors.New("the session tool runner stopped without a reason")
	}
	log.WithError(err).Error("the session tool runner failed")
	return toolResult{ending: EndError, err: fmt.Errorf("the session tool runner: %w", err)}
}

// sdkSession is the session as the SDK reads it (SetupSkillsFromSession
// reads the agent's skills from it), converted from the copy the worker
// already fetched: one fetch, so the mounts and the skills agree.
func sdkSession(sess *store.Session) (*anthropic.BetaManagedAgentsSession, error) {
	b, err := json.Marshal(sess)
	if err != nil {
		return nil, err
	}
	var out anthropic.BetaManagedAgentsSession
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
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
