package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// Session runs one claimed work item (docs/operating.md, "Session lifecycle"):
// heartbeat from the claim to the end of teardown; get the session with
// its token; check every mount path; mount all stores or none; run; end
// cleanly, on shutdown or error, or after losing the lease.
type Session struct {
	cfg  Config
	log  logrus.FieldLogger
	host *host
	env  *client.Client // the environment key's client (nil in memfs session)
}

// NewSession runs items outside a Worker (memfs session).
func NewSession(cfg Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Session{cfg: cfg, log: cfg.Log, host: newHost(cfg)}, nil
}

// Recover cleans up after a killed run (see Worker.Run).
func (s *Session) Recover(ctx context.Context) { s.host.recover(ctx, s.cfg.ReplayAPIKey) }

// sessionsToken reads the token from a work item's secret: base64url
// (padding optional) of JSON {"sessions_token": ...}. "" when absent.
func sessionsToken(secret *string) string {
	if secret == nil || *secret == "" {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(*secret, "="))
	if err != nil {
		return ""
	}
	var v struct {
		SessionsToken string `json:"sessions_token"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	return v.SessionsToken
}

// ErrNoToken fails a session with memory stores whose item had no token.
var ErrNoToken = errors.New("the work item carried no sessions token")

// Run runs item until it ends. ctx ending means the worker is shutting
// down (writes only, then stop); abort ending cuts the teardown short.
// lastHeartbeat continues another process's lease ("" takes a free one).
func (s *Session) Run(ctx, abort context.Context, item store.Work, lastHeartbeat string) (err error) {
	ending := EndShutdown
	defer func() { s.cfg.Metrics.Ended(ending, err) }()
	log := s.log.WithFields(logrus.Fields{"work_id": item.ID, "session": item.Data.ID})
	api, token, err := s.itemClient(item, log)
	if err != nil {
		return err
	}
	envID := item.EnvironmentID
	if envID == "" {
		envID = s.cfg.EnvironmentID
	}
	l, leaseCtx, stopLease := s.startLease(api, envID, item.ID, lastHeartbeat, log)
	defer stopLease()

	// stop stops the work item within ctx: the teardown's deadline, once
	// it has one (stop.go).
	stop := func(ctx context.Context) {
		if ending != EndLeaseLost { // else another worker may hold the item now
			stopWork(ctx, api, envID, item.ID, log)
		}
	}
	if item.Data.Type != store.TypeSession {
		log.Info("healthcheck work item: stopped")
		ending = EndClean
		stop(context.Background())
		return nil
	}
	sess, err := api.GetSession(ctx, item.Data.ID)
	if err != nil {
		stop(context.Background())
		return getSessionError(item.Data.ID, token, err)
	}
	resources := memoryResources(sess)
	if len(resources) > 0 && token == "" {
		log.Error("the work item carried no sessions token")
		stop(context.Background())
		return ErrNoToken
	}
	if sess.Status == store.SessionTerminated {
		// Nothing to run; push what a previous run of it left behind.
		s.pushLeftBehind(abort, api, sess.ID, resources, log)
		log.Info("session already terminated: stopped without mounting")
		ending = EndClean
		stop(context.Background())
		return nil
	}
	var mounts []*storeMount
	if s.cfg.Interval == 0 {
		warnSyncOff(resources, log)
	} else if mounts, err = s.mountAll(ctx, api, item, sess, resources, log); err != nil {
		log.WithError(err).Error("session failed before it started: no memory store was mounted")
		stop(context.Background())
		if r := refused("a memory store's first request with the session token", err); r != nil {
			return r
		}
		return err
	}
	log.WithField("stores", len(mounts)).Info("session running")
	var tools *toolRun
	if s.cfg.Tools != nil {
		if tools, err = s.startTools(sess, token, mounts, resources, log); err != nil {
			log.WithError(err).Error("session failed: its tools could not start")
			s.teardown(abort, mounts, false)
			stop(context.Background())
			return err
		}
	}
	ending, mounts, forget, runErr := s.waitEnd(ctx, abort, leaseCtx, l, tools, mounts, MountLabels{SessionID: sess.ID, WorkID: item.ID}, log)
	// The stores unmounted from outside are listed by status until the
	// session ends.
	defer func() {
		for _, f := range forget {
			f()
		}
	}()
	s.endSession(abort, ending, tools, mounts, api, sess.ID, log, stop)
	return runErr
}

// endSession ends a session that ran: it stops its tools, tears its mounts
// down (a final sync if the ending is clean), removes the work directory
// of a clean end, and stops the work item — all within one deadline,
// whatever the mounts, the store or the agent's shell do: a stop ends
// within the documented stop timeout (stop.go).
func (s *Session) endSession(abort context.Context, ending Ending, tools *toolRun, mounts []*storeMount, api *client.Client, sessionID string, log logrus.FieldLogger, stop func(context.Context)) {
	tctx, cancel := context.WithTimeout(abort, TeardownTimeout)
	defer cancel()
	log.WithField("ending", ending.String()).Info("session ending")
	if !tools.stop(tctx) { // before the final sync: the agent's shell is gone
		log.Warn("the session's tools did not stop within the teardown's time; its mounts are taken down anyway")
	}
	s.teardown(tctx, mounts, ending == EndClean)
	if tools != nil && ending == EndClean {
		s.endWorkdir(tctx, api, sessionID, tools.workdir, log)
	}
	stop(tctx)
}

// stopWork tells the queue that work item id is over; one stopped already
// (a conflict) is no failure.
func stopWork(ctx context.Context, api *client.Client, envID, id string, log logrus.FieldLogger) {
	sctx, cancel := lastStep(ctx, minStopRequest, 10*time.Second)
	defer cancel()
	if _, err := api.StopWork(sctx, envID, id, true); err != nil && !errors.Is(err, store.ErrConflict) {
		log.WithError(err).Warn("stopping the work item failed")
	}
}

// itemClient is the client item's session is run with: its sessions
// token's, else the environment key's; token is "" without one.
func (s *Session) itemClient(item store.Work, log logrus.FieldLogger) (api *client.Client, token string, err error) {
	token = sessionsToken(item.Secret)
	api = s.env
	if token != "" {
		if api, err = client.New(s.cfg.clientOptions(token, log)); err != nil {
			return nil, token, err
		}
	}
	if api == nil {
		return nil, token, ErrNoToken
	}
	return api, token, nil
}

// startLease starts heartbeating work item workID; stop ends the
// heartbeats and waits for them.
func (s *Session) startLease(api *client.Client, envID, workID, lastHeartbeat string, log logrus.FieldLogger) (l *lease, ctx context.Context, stop func()) {
	l = newLease(api, envID, workID, lastHeartbeat, log)
	l.failed = s.cfg.Metrics.HeartbeatFailed
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Add(1)
	go func() { defer done.Done(); l.run(ctx) }()
	return l, ctx, func() { cancel(); done.Wait() }
}

// getSessionError is the failure to get session id, a refusal (see
// refused) when the store refused the credential: the sessions token, or
// the environment key without one.
func getSessionError(id, token string, err error) error {
	cred := "its session token"
	if token == "" {
		cred = "the environment key"
	}
	if r := refused(fmt.Sprintf("getting session %s with %s", id, cred), err); r != nil {
		return r
	}
	return fmt.Errorf("get session %s: %w", id, err)
}

// warnSyncOff says, per store, that a session runs without its memory
// stores when memory sync is off.
func warnSyncOff(resources []store.SessionResource, log logrus.FieldLogger) {
	for _, r := range resources {
		log.WithField("store", r.MemoryStoreID).Warn("memory sync is off: the session runs without this memory store, though its system prompt describes a folder at " + r.MountPath)
	}
}

// memoryResources are the session's memory stores.
func memoryResources(sess *store.Session) []store.SessionResource {
	var rs []store.SessionResource
	for _, r := range sess.Resources {
		if r.Type == store.ResourceMemoryStore {
			rs = append(rs, r)
		}
	}
	return rs
}

// pushLeftBehind replays what an earlier run of a terminated session left
// in the journals of its writable stores, and removes its tools' work
// directory; a replay that fails keeps its journal.
func (s *Session) pushLeftBehind(abort context.Context, api *client.Client, sessionID string, resources []store.SessionResource, log logrus.FieldLogger) {
	for _, r := range resources {
		if r.Access == store.AccessReadOnly {
			continue
		}
		s.host.takeUp(abort, r.MemoryStoreID, sessionID, log.WithField("store", r.MemoryStoreID))
		if hasJournal(s.cfg.StateDir, r.MemoryStoreID) {
			_, left, err := ReplayStore(abort, api, s.cfg.StateDir, r.MemoryStoreID, sessionID, log.WithField("store", r.MemoryStoreID))
			s.host.left.note(left)
			if err != nil {
				log.WithError(err).Warn("replaying a journal left behind failed; it is kept")
			}
		}
	}
	if s.cfg.Tools != nil {
		removeWorkdir(filepath.Join(s.cfg.Tools.WorkRoot, sessionID), log)
	}
}

// waitEnd waits for the first reason the session ends: the lease's end,
// the worker's shutdown (ctx) or the tools' result (runErr). Meanwhile it
// lets go of each mount unmounted from outside memfs (endUnmounted): left
// are the mounts still to tear down, and forget the calls that drop the
// others from the status once the session is over.
func (s *Session) waitEnd(ctx, abort, leaseCtx context.Context, l *lease, tools *toolRun, mounts []*storeMount, labels MountLabels, log logrus.FieldLogger) (ending Ending, left []*storeMount, forget []func(), runErr error) {
	gone := watchGone(leaseCtx, mounts)
	for {
		select {
		case ending = <-l.end:
			return ending, mounts, forget, nil
		case <-ctx.Done():
			return EndShutdown, mounts, forget, nil
		case r := <-tools.result():
			return r.ending, mounts, forget, r.err
		case sm := <-gone:
			forget = append(forget, s.endUnmounted(abort, sm, labels, log))
			mounts = slices.DeleteFunc(mounts, func(m *storeMount) bool { return m == sm })
		}
	}
}

// watchGone reports on the returned channel each mount unmounted from
// outside memfs, until ctx ends.
func watchGone(ctx context.Context, mounts []*storeMount) <-chan *storeMount {
	gone := make(chan *storeMount, len(mounts))
	for _, m := range mounts {
		go func(m *storeMount) {
			select {
			case <-m.m.Gone():
				gone <- m
			case <-ctx.Done():
			}
		}(m)
	}
	return gone
}

// endWorkdir removes the work directory of a session that ended cleanly
// if the session has terminated; an idle session keeps it (ToolsOptions).
func (s *Session) endWorkdir(tctx context.Context, api *client.Client, sessionID, dir string, log logrus.FieldLogger) {
	ctx, cancel := lastStep(tctx, minStopRequest, 10*time.Second)
	defer cancel()
	sess, err := api.GetSession(ctx, sessionID)
	switch {
	case err != nil:
		log.WithError(err).Warn("the work directory is kept: the session's status could not be read")
	case sess.Status == store.SessionTerminated:
		removeWorkdir(dir, log)
	}
}

// storeMount is one mounted store of a session.
type storeMount struct {
	storeID, path string
	m             *Mounted
}

// mountAll checks every mount path, then mounts every store; if any
// fails, what was mounted is taken down again and the error returned.
func (s *Session) mountAll(ctx context.Context, api *client.Client, item store.Work, sess *store.Session, rs []store.SessionResource, log logrus.FieldLogger) ([]*storeMount, error) {
	if len(rs) > store.MaxSessionStores {
		return nil, fmt.Errorf("the session attaches %d memory stores; at most %d can be mounted", len(rs), store.MaxSessionStores)
	}
	if len(rs) == 0 {
		return nil, nil
	}
	// Claim the stores first: a store another session has mounted here is
	// usually at this very mount path, and "already mounted by session X"
	// says more than "something already exists at the path".
	var claimed []string
	release := func() {
		for _, id := range claimed {
			s.host.release(id)
		}
	}
	for _, r := range rs {
		if err := s.host.claim(ctx, r.MemoryStoreID, sess.ID); err != nil {
			release()
			return nil, err
		}
		claimed = append(claimed, r.MemoryStoreID)
	}
	root, err := s.host.memoryRoot()
	if err != nil {
		release()
		return nil, err
	}
	mode, targets, err := s.checkTargets(root, rs, log)
	if err != nil {
		release()
		return nil, err
	}
	var mounts []*storeMount
	for i, r := range rs {
		// The store is mounted, recorded and logged at the canonical path:
		// the one /proc/self/mountinfo lists.
		p := targets[i].Canon()
		slog := log.WithFields(logrus.Fields{"store": r.MemoryStoreID, "path": p})
		if r.Access != store.AccessReadOnly {
			s.host.takeUp(ctx, r.MemoryStoreID, sess.ID, slog)
		}
		m, err := MountStore(ctx, MountOptions{
			Engine:     s.host.engineOptions(api, sess.ID, r, slog),
			Mountpoint: p,
			MemoryRoot: targets[i].Root,
			Mode:       mode,
			FS:         fs.MountOptions{AllowOther: s.cfg.AllowOther},
			Log:        slog,
			Status:     s.cfg.Status,
			Labels:     MountLabels{SessionID: sess.ID, WorkID: item.ID},
			Metrics:    s.cfg.Metrics,
		})
		if err != nil {
			s.teardown(ctx, mounts, false)
			release()
			return nil, fmt.Errorf("mount memory store %s at %s: %w", r.MemoryStoreID, targets[i], err)
		}
		if err := s.host.writeRecord(mountRecord{StoreID: r.MemoryStoreID, SessionID: sess.ID, WorkID: item.ID, MountPath: p, CreatedDir: m.created, Mode: m.Mode()}); err != nil {
			slog.WithError(err).Warn("could not record the mount in the state dir")
		}
		mounts = append(mounts, &storeMount{storeID: r.MemoryStoreID, path: p, m: m})
	}
	return mounts, nil
}

// checkTargets resolves the mount mode, then checks every mount path
// for it: in directory mode a path may hold a killed worker's copy of its
// store, which the mount takes up.
func (s *Session) checkTargets(root memoryRoot, rs []store.SessionResource, log logrus.FieldLogger) (mode string, targets []mountTarget, err error) {
	if mode, err = ChooseMode(s.cfg.MountMode, log); err != nil {
		if len(rs) > 0 {
			err = fmt.Errorf("mount memory store %s: %w", rs[0].MemoryStoreID, err)
		}
		return "", nil, err
	}
	for _, r := range rs {
		t, err := checkMountPath(root, r, mode, s.cfg.StateDir)
		if err != nil {
			return "", nil, err
		}
		targets = append(targets, t)
	}
	return mode, targets, nil
}

// teardown ends every mount in parallel: refuse new writes, final sync
// (deletes only when clean), unmount, remove the directories created.
func (s *Session) teardown(ctx context.Context, mounts []*storeMount, clean bool) {
	var wg sync.WaitGroup
	for _, sm := range mounts {
		wg.Add(1)
		go func(sm *storeMount) {
			defer wg.Done()
			s.end(ctx, sm, clean)
		}(sm)
	}
	wg.Wait()
}

// end takes one mount down and lets its store go.
func (s *Session) end(ctx context.Context, sm *storeMount, clean bool) {
	if err := sm.m.Close(ctx, clean); err != nil {
		s.log.WithError(err).WithField("store", sm.storeID).Warn("tearing down the mount")
	}
	s.host.left.note(sm.m.Left())
	s.host.removeRecord(sm.storeID)
	s.host.release(sm.storeID)
}

// endUnmounted ends a mount someone unmounted from outside the worker
// (umount, fusermount3 -u, umount -l) while its session runs. It is the
// end of that mount, not of the session: the worker does not mount the
// store again over an operator's umount, and the session runs on with its
// other stores until it ends (its work item is not stopped). The mount
// ends as a worker's stop does, writes only: the final sync uploads what
// was closed (the tree outlives the unmount), deletes stay in the journal
// for the store's next mount on this host or memfs replay, like anything
// the final sync could not upload; the directory is removed and the store
// released. One error line says so, with what is left: the agent lost a
// store its session was given, which nothing in the worker did; memfs
// status lists it with the same error until the session ends (forget).
func (s *Session) endUnmounted(ctx context.Context, sm *storeMount, labels MountLabels, log logrus.FieldLogger) (forget func()) {
	at := time.Now()
	s.end(ctx, sm, false)
	left := sm.m.Left()
	log.WithFields(logrus.Fields{"store": sm.storeID, "path": sm.path, "left": left.String()}).Error(unmountedError)
	return s.cfg.Status.addUnmounted(UnmountedStore{Dir: sm.path, StoreID: sm.storeID, MountLabels: labels, At: at,
		Left: left.String(), Error: unmountedError})
}

// unmountedError is what the log and status say of a store unmounted from
// outside the worker.
const unmountedError = "a memory store was unmounted from outside the worker while its session runs: it had its final sync (writes only) and is let go; the session goes on without it"
