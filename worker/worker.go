package worker

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/internal/backoff"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
)

// Config configures a Worker (and a single Session run).
type Config struct {
	// APIURL is the store service (required). Plain http:// is for a
	// loopback host only, unless AllowInsecureHTTP (client.CheckBaseURL).
	APIURL string
	// CAFile, when set, is a file of PEM certificates every client of the
	// worker trusts for an https:// APIURL, besides the system's
	// (client.Options.CAFile).
	CAFile string
	// AllowInsecureHTTP lets the worker send its keys and tokens over
	// plain http:// to a host that is not a loopback address
	// (client.Options.AllowInsecureHTTP).
	AllowInsecureHTTP bool
	// EnvironmentID and EnvironmentKey identify the work queue.
	EnvironmentID, EnvironmentKey string
	// WorkerID is sent as Anthropic-Worker-ID (default: hostname plus a
	// random suffix, stable for the process).
	WorkerID string
	// MemoryRoot is the parent of every mount path (default /mnt/memory).
	// It may be reached through symlinks: it is resolved once, at start
	// (or when the first session creates it), and stores are mounted at
	// the canonical paths; nothing below it may be a symlink.
	MemoryRoot string
	// StateDir holds journals, conflict logs and mount records (required).
	StateDir string
	// Interval is the sync interval; 0 means off: sessions run without
	// their stores (one warning per store).
	Interval time.Duration
	// Quiet is the sync quiet period (syncqueue.EngineOptions.Quiet); 0
	// means off: closed changes wait for the interval.
	Quiet time.Duration
	// Deletions is the deletion mode (default enabled).
	Deletions string
	// DeleteDelay shortens the 30 s delete rule (tests).
	DeleteDelay time.Duration
	// MountMode is how each store is shown (MountOptions.Mode): ModeFUSE
	// (the default), ModeDirectory, or ModeAuto, resolved once per
	// session before its mount paths are checked.
	MountMode string
	// PollWait is the change feed's long poll (default 25 s).
	PollWait time.Duration
	// ReplayAPIKey, when set, replays journals left behind at start.
	ReplayAPIKey string
	// Log receives the worker's log lines.
	Log logrus.FieldLogger
	// Status, when set, shows the session's mounts to memfs status.
	Status *StatusServer
	// OnLoad, when set, hears how loading each store at mount goes
	// (syncqueue.EngineOptions.OnLoad).
	OnLoad func(syncqueue.LoadProgress)
	// Owner owns each session's mounts: the files loaded from the store
	// and the mount roots, with their modes — the agent's user, so that
	// its tools can work in them.
	Owner fs.Ownership
	// OwnerFromMemoryRoot takes Owner's UID and GID from the owner of the
	// memory root instead (the default: the fix docs/operating.md gives,
	// "Owners, modes and limits", chowns it to the agent's user).
	OwnerFromMemoryRoot bool
	// AllowOther lets users other than the worker's enter the mounts
	// (FUSE allow_other). The worker model needs it when the agent runs
	// as another user; cmd/memfs turns it on by default as root.
	AllowOther bool
	// Metrics, when set, is told of work items and heartbeats and
	// observes every mount (metrics.go).
	Metrics Metrics
	// Tools, when set, runs each session's tools once its stores are
	// mounted (--run-tools; tools.go).
	Tools *ToolsOptions
	// SessionEnded, when set, is called by Worker.Run each time one of
	// its sessions has ended, with the session's id and the error that
	// ended it (nil: it ended cleanly or for the worker's stop), after the
	// error was logged. It must not block. memfs up uses it to fail as
	// soon as its demo session does, with the session's reason.
	SessionEnded func(sessionID string, err error)
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if c.APIURL == "" {
		return errors.New("the API URL is required (--api-url or MEMFS_API_URL)")
	}
	// Every client the worker makes later is built from the same URL and
	// CA file: refused here, they are refused before anything runs.
	if err := client.CheckBaseURL(c.APIURL, c.AllowInsecureHTTP); err != nil {
		return err
	}
	tr, err := client.NewTransport(c.CAFile)
	if err != nil {
		return err
	}
	if c.StateDir == "" {
		return errors.New("the state dir is required")
	}
	if c.MemoryRoot == "" {
		c.MemoryRoot = "/mnt/memory"
	}
	if c.Interval != 0 && c.Interval < syncqueue.MinInterval {
		return fmt.Errorf("the memory sync interval must be at least %s (or off), not %s", syncqueue.MinInterval, c.Interval)
	}
	if c.Interval != 0 && !syncqueue.QuietValid(c.Quiet, c.Interval) {
		return fmt.Errorf("the memory sync quiet period must be at least %s and shorter than the interval (%s), or off, not %s", syncqueue.MinQuiet, c.Interval, c.Quiet)
	}
	switch c.Deletions {
	case "":
		c.Deletions = syncqueue.DeletionsEnabled
	case syncqueue.DeletionsEnabled, syncqueue.DeletionsLogOnly, syncqueue.DeletionsDisabled:
	default:
		return fmt.Errorf("memory sync deletions must be enabled, log_only or disabled, not %q", c.Deletions)
	}
	if c.MountMode != "" {
		if _, err := ParseMode(c.MountMode); err != nil {
			return err
		}
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		var b [8]byte
		crand.Read(b[:])
		c.WorkerID = host + "-" + hex.EncodeToString(b[:])
	}
	if c.Log == nil {
		c.Log = logrus.StandardLogger()
	}
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
	if c.Tools != nil {
		if c.Tools.Transport == nil {
			c.Tools.Transport = tr // the sandbox's proxy trusts what the worker trusts
		}
		if err := c.Tools.validate(c.StateDir); err != nil {
			return err
		}
		if c.Tools.User.UID == 0 {
			c.Log.Warn("the agent's tools run as root (--tools-user root): in their sandbox, but with root's rights on everything bound into it")
		}
	}
	return nil
}

// clientOptions are the options of every client the worker makes: the
// API URL and its transport settings, with key and log.
func (c *Config) clientOptions(key string, log logrus.FieldLogger) client.Options {
	return client.Options{BaseURL: c.APIURL, APIKey: key, Logger: log, CAFile: c.CAFile, AllowInsecureHTTP: c.AllowInsecureHTTP}
}

// Worker polls an environment's work queue and runs its sessions, many at
// once. Lifecycle: New, then Run(ctx) until ctx ends; Abort (a second
// signal) cuts teardowns short.
type Worker struct {
	cfg  Config
	log  logrus.FieldLogger
	env  *client.Client
	host *host

	abortCtx context.Context
	abort    context.CancelFunc
	// sleep waits between failed polls (default sleepCtx; tests record
	// the waits instead).
	sleep func(ctx context.Context, d time.Duration)
}

// New builds a worker.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.EnvironmentID == "" || cfg.EnvironmentKey == "" {
		return nil, errors.New("the environment id and key are required (--environment-id, --environment-key)")
	}
	env, err := client.New(cfg.clientOptions(cfg.EnvironmentKey, cfg.Log))
	if err != nil {
		return nil, err
	}
	actx, abort := context.WithCancel(context.Background())
	return &Worker{cfg: cfg, log: cfg.Log, env: env, host: newHost(cfg), abortCtx: actx, abort: abort}, nil
}

// Abort makes every teardown in progress finish now: final syncs stop,
// journals stay on disk for replay, mounts are detached.
func (w *Worker) Abort() { w.abort() }

// Run recovers what a killed worker left behind, then polls and runs
// sessions until ctx ends; then it ends every session (writes only) and
// returns nil. It returns an error, after ending every session the same
// way, when the server refuses for good (400, 401, 403, 404: refused.go)
// the poll, an ack, a session get or a mount's first request.
func (w *Worker) Run(ctx context.Context) error {
	w.host.recover(ctx, w.cfg.ReplayAPIKey)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fatal := make(chan error, 1)
	var wg sync.WaitGroup
	err := w.poll(runCtx, &wg, func(err error) {
		select {
		case fatal <- err:
		default:
		}
		cancel()
	})
	cancel()
	wg.Wait()
	if err == nil {
		select {
		case err = <-fatal:
		default:
		}
	}
	return err
}

// poll claims work items and starts their sessions until ctx ends or the
// queue refuses the worker; a session whose server refuses it calls end.
func (w *Worker) poll(ctx context.Context, wg *sync.WaitGroup, end func(error)) error {
	sleep := w.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	failures := 0
	lastIdle := time.Now()
	w.log.WithFields(logrus.Fields{"environment": w.cfg.EnvironmentID, "worker_id": w.cfg.WorkerID}).Info("worker polling for work")
	for ctx.Err() == nil {
		// One attempt per poll: this loop retries with its own backoff.
		item, err := w.env.PollWork(store.WithCallerRetries(ctx), w.cfg.EnvironmentID, w.cfg.WorkerID, 999*time.Millisecond)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if r := refused(fmt.Sprintf("polling the work queue of environment %s with the environment key", w.cfg.EnvironmentID), err); r != nil {
				return r
			}
			failures++
			d := pollBackoff(failures, err)
			w.log.WithError(err).WithField("retry_in", d.Round(time.Millisecond).String()).Warn("polling for work failed; retrying")
			sleep(ctx, d)
			continue
		case item == nil:
			failures = 0
			if time.Since(lastIdle) > 5*time.Minute {
				w.log.Info("worker idle: no work")
				lastIdle = time.Now()
			}
			sleepJitter(ctx, 500*time.Millisecond)
			continue
		}
		failures = 0
		log := w.log.WithFields(logrus.Fields{"work_id": item.ID, "session": item.Data.ID})
		log.Info("claimed work item")
		w.cfg.Metrics.Claimed()
		if _, err := w.env.AckWork(ctx, w.cfg.EnvironmentID, item.ID); err != nil {
			log.WithError(err).Warn("acknowledging the work item failed; stopping it")
			w.env.StopWork(context.Background(), w.cfg.EnvironmentID, item.ID, true)
			if r := refused(fmt.Sprintf("acknowledging work item %s of environment %s with the environment key", item.ID, w.cfg.EnvironmentID), err); r != nil {
				return r
			}
			continue
		}
		wg.Add(1)
		go func(item store.Work) {
			defer wg.Done()
			s := &Session{cfg: w.cfg, log: log, host: w.host, env: w.env}
			err := s.Run(ctx, w.abortCtx, item, "")
			if err != nil {
				log.WithError(err).Error("session failed")
				if isRefusal(err) {
					end(err)
				}
			}
			if w.cfg.SessionEnded != nil {
				w.cfg.SessionEnded(item.Data.ID, err)
			}
		}(*item)
	}
	return nil
}

// sleepJitter sleeps d/2..d or until ctx ends.
func sleepJitter(ctx context.Context, d time.Duration) {
	t := time.NewTimer(backoff.Policy{Min: d, Max: d, Jitter: backoff.Equal}.Delay(0))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
