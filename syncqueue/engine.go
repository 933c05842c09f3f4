package syncqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/statedir"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// Store is what the engine needs from the store service; store/client's
// Client satisfies it. Each call is bounded by the client's own timeouts.
type Store interface {
	GetStore(ctx context.Context, storeID string) (*store.Store, error)
	ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error)
	ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error)
	GetMemory(ctx context.Context, storeID, memoryID string) (*store.Memory, error)
	Changes(ctx context.Context, storeID string, after int64, limit int, wait time.Duration) (store.ChangePage, error)
	CreateMemory(ctx context.Context, storeID, path, content string) (*store.Memory, error)
	UpdateMemory(ctx context.Context, storeID, memoryID string, in store.UpdateMemoryInput) (*store.Memory, error)
	DeleteMemory(ctx context.Context, storeID, memoryID string, expectedSHA256 *string) error
}

// Deletion modes (--memory-sync-deletions).
const (
	DeletionsEnabled  = "enabled"
	DeletionsLogOnly  = "log_only"
	DeletionsDisabled = "disabled"
)

// MinInterval is the shortest sync interval.
const MinInterval = 5 * time.Second

// EngineOptions configure an Engine.
type EngineOptions struct {
	// StoreID is the store to mount (required).
	StoreID string
	// Store is the API (required).
	Store Store
	// SessionStore: the credential is a session token, which the
	// official worker uses only on the memories routes: the engine then
	// never reads the store itself (GET /v1/memory_stores/{id}), and
	// StoreName is its name (from the session's resources). An archived
	// store is then not seen as such: its writes are refused and wait.
	SessionStore bool
	// StoreName is the store's name for status when SessionStore.
	StoreName string
	// StateDir is the worker's state directory; the store's journal lives
	// in StateDir/stores/<StoreID> (required unless ReadOnly).
	StateDir string
	// Session is the session whose token Store holds ("" for an API
	// key): the journal records it, and a journal written in another
	// session is set aside for it, never uploaded with this credential
	// (see "Sessions" in syncqueue/journal).
	Session string
	// AnySession takes up a journal written in any session, uploading its
	// changes with this credential (memfs replay and the worker's
	// --replay-api-key: an API key, which is its own actor). Logged.
	AnySession bool
	// ReadOnly mounts without a journal and never uploads.
	ReadOnly bool
	// Interval is the flusher's period (default 15 s, at least 5 s): the
	// longest a closed change waits for a pass.
	Interval time.Duration
	// Quiet starts a pass early, once writes are pending and no file has
	// been closed for this long (schedule.go). 0, the default, turns it
	// off; otherwise at least MinQuiet and shorter than Interval.
	// cmd/memfs's default is DefaultQuiet.
	Quiet time.Duration
	// Deletions is enabled (default), log_only or disabled.
	Deletions string
	// DeleteDelay is how long a local delete must last before it is sent
	// (default 30 s).
	DeleteDelay time.Duration
	// Concurrency bounds parallel requests to the store (default 8).
	Concurrency int
	// PollWait is how long one long poll of the change feed waits (default 25 s).
	PollWait time.Duration
	// StallAfter is how long a request may go unanswered before the store
	// is reported unreachable, even though the request has not failed yet
	// (a blackholed network holds it for the client's whole timeout).
	// Default: half the interval, so an outage is logged within one
	// interval of its start. A long poll is allowed PollWait more.
	StallAfter time.Duration
	// FetchWait bounds how long an operation waits for the content of a
	// file not fetched yet (lazy.go) before it fails with EIO: a store
	// that stops answering (a blackholed network) must not hang a `cat`
	// for the client's whole timeout and retries. Default 10 s; once a
	// fetch has failed, and until one works again, a fifth of it.
	FetchWait time.Duration
	// Conflicts keeps losing local versions (default: the log under StateDir).
	Conflicts *ConflictLog
	// Owner owns the files loaded from the store and the mount's root,
	// with their modes (fs.Ownership; zero: root, 0644/0755).
	Owner fs.Ownership
	// Local builds the local copy of the store at Open (local.go; default:
	// the FUSE tree, fs.NewTree, which Tree returns to mount).
	Local NewLocal
	// Observer is told of passes, remote changes and conflicts, for
	// metrics (observe.go; default: nothing is told).
	Observer Observer
	// Log receives the engine's log lines (default: logrus's standard logger).
	Log logrus.FieldLogger
	// OnLoad, when set, hears how far loading the store at Open has come
	// (see LoadProgress): memfs prints progress from it on a terminal.
	OnLoad func(LoadProgress)
}

// Validate checks the options and fills in defaults.
func (o *EngineOptions) Validate() error {
	if o.StoreID == "" || o.Store == nil {
		return errors.New("syncqueue: StoreID and Store are required")
	}
	if !o.ReadOnly && o.StateDir == "" {
		return errors.New("syncqueue: StateDir is required for a writable store")
	}
	if o.Interval == 0 {
		o.Interval = 15 * time.Second
	}
	if o.Interval < MinInterval {
		return fmt.Errorf("the sync interval must be at least %s, not %s", MinInterval, o.Interval)
	}
	if !QuietValid(o.Quiet, o.Interval) {
		return fmt.Errorf("the sync quiet period must be at least %s and shorter than the interval (%s), or off, not %s", MinQuiet, o.Interval, o.Quiet)
	}
	switch o.Deletions {
	case "":
		o.Deletions = DeletionsEnabled
	case DeletionsEnabled, DeletionsLogOnly, DeletionsDisabled:
	default:
		return fmt.Errorf("memory sync deletions must be enabled, log_only or disabled, not %q", o.Deletions)
	}
	if o.DeleteDelay == 0 {
		o.DeleteDelay = 30 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.PollWait <= 0 {
		o.PollWait = DefaultPollWait
	}
	if o.StallAfter <= 0 {
		o.StallAfter = o.Interval / 2
	}
	if o.FetchWait <= 0 {
		o.FetchWait = DefaultFetchWait
	}
	if o.Conflicts == nil && o.StateDir != "" {
		o.Conflicts = OpenConflictLog(o.StateDir, ConflictRetention{})
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Local == nil {
		o.Local = newFUSETree
	}
	o.Log = o.Log.WithField("store", o.StoreID)
	return nil
}

// Engine keeps one mounted store and its local tree in step: it loads the
// store, replays what a previous run left in the journal, uploads local
// changes (the flusher), brings remote changes down (the overlay) and
// watches for a store that stops answering.
//
// Lifecycle: NewEngine validates; Open loads (the tree is then ready to
// mount); Start runs the flusher, the overlay and the watchdog;
// Finish(ctx, clean) freezes the tree and runs the final sync; Close
// releases the journal.
//
// The merge state, the feed's cursor and the flusher's bookkeeping are
// owned by one goroutine, the owner (owner.go), which handles the answers
// of the store's requests as events and never waits on the network. Lock
// order otherwise: closeMu, then the local side's lock (fs.Tree's), then
// the journal's.
type Engine struct {
	opts EngineOptions
	log  logrus.FieldLogger
	// closeMu lets Status (called by memfs status and metrics scrapes from
	// other goroutines at any time) read the journal while Close may be
	// closing it: Status holds it for reading, closeJournal for writing.
	closeMu sync.RWMutex
	journal *journal.Journal // nil when ReadOnly; set nil under closeMu
	tree    Local            // the local copy of the store (local.go), from Open
	own     *owner           // the owner's loop (owner.go), from Open
	f       *flusher
	calls   *inflight    // requests to the store in flight, for the watchdog
	closes  *closeSignal // journaled writes, for the quiet trigger; nil when off

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// The owner's (owner.go) once Open has started it:
	ms        mergeState  // the engine's view of the store (merge.go)
	busy      busySet     // the memories with a request in flight (busy.go)
	cursor    int64       // the change feed's cursor; 0 without a feed
	follows   string      // Status.Follows: probed once at Open; feed or versions turn to listing once refused
	mark      versionMark // following the versions: how far (versions.go). Owned by the overlay once started
	conflicts *ConflictLog
	outage    outage
	// remoteBlocked: a remote change waits on this host (localWait). The owner's.
	remoteBlocked bool
	replayed      int    // pending changes found in the journal at Open
	loaded        int    // memories loaded at Open
	name          string // the store's name, read once at Open (for status)
	left          Left   // what Close found undone (left.go)
	lazy          lazyLoad
	// life bounds on-demand fetches (Fetch): from NewEngine to Close.
	life       context.Context
	lifeCancel context.CancelFunc
}

// NewEngine returns an engine; nothing is opened yet.
func NewEngine(opts EngineOptions) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	calls := newInflight()
	opts.Store = watchedStore{Store: opts.Store, calls: calls}
	e := &Engine{opts: opts, log: opts.Log, calls: calls, ms: newMergeState(), busy: newBusySet(), conflicts: opts.Conflicts}
	e.lazy.flights = map[string]*flight{}
	e.life, e.lifeCancel = context.WithCancel(context.Background())
	e.outage = outage{log: opts.Log}
	if opts.Quiet > 0 && !opts.ReadOnly {
		e.closes = newCloseSignal()
	}
	return e, nil
}

// Tree is the FUSE tree to mount (after Open); nil when the local side
// is not one (EngineOptions.Local).
func (e *Engine) Tree() *fs.Tree {
	t, _ := e.tree.(*fs.Tree)
	return t
}

// JournalAuth is what makes a journal of storeID stateDir's own: the state
// dir's identity and key (created the first time), for an API key's
// session (set Session for a session's).
func JournalAuth(stateDir, storeID string) (journal.Auth, error) {
	keys, err := statedir.LoadKeys(stateDir)
	if err != nil {
		return journal.Auth{}, fmt.Errorf("the state dir's journal key: %w", err)
	}
	return journal.Auth{Key: keys.Key, Identity: keys.Identity, StoreID: storeID}, nil
}

// CheckJournal opens storeID's journal in stateDir as session's and closes
// it again, as a mount would open it, before anything is mounted: a
// journal that is not the state dir's own is refused, one with changes of
// another session set aside for it (both logged to log), one of session
// itself left in place. It reports what it set aside.
func CheckJournal(stateDir, storeID, session string, log logrus.FieldLogger) (*journal.Refusal, *journal.Held, error) {
	auth, err := JournalAuth(stateDir, storeID)
	if err != nil {
		return nil, nil, err
	}
	auth.Session = session
	j, err := journal.Open(JournalDir(stateDir, storeID), journal.Options{Log: log, Auth: auth})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return j.Refused(), j.Held(), j.Close(ctx)
}

// JournalDir is where this store's journal lives.
func JournalDir(stateDir, storeID string) string {
	return filepath.Join(stateDir, "stores", storeID)
}

// openJournal opens the store's journal as this state dir's and this
// session's (statedir.LoadKeys), and logs what it set aside.
func (e *Engine) openJournal() (*journal.Journal, error) {
	auth, err := JournalAuth(e.opts.StateDir, e.opts.StoreID)
	if err != nil {
		return nil, err
	}
	auth.Session, auth.AnySession = e.opts.Session, e.opts.AnySession
	dir := JournalDir(e.opts.StateDir, e.opts.StoreID)
	if !e.opts.AnySession {
		e.restoreHeld(dir)
	}
	j, err := journal.Open(dir, journal.Options{Log: e.log, Auth: auth})
	if err != nil {
		return nil, err
	}
	if e.opts.AnySession && j.Session() != e.opts.Session && len(j.Snapshot()) > 0 {
		e.log.WithFields(logrus.Fields{"written_in_session": j.Session(), "pending": len(j.Snapshot())}).
			Warnf("replaying changes written in session %s, uploaded with the replay API key (the store's versions name the key as their actor, not the session)", j.Session())
	}
	return j, nil
}

// restoreHeld puts the oldest journal held in dir for this engine's
// session back in place, when the journal in place has nothing pending
// (see "Sessions" in syncqueue/journal): a session's (or an API key's)
// next mount here uploads what it left while another session had the
// store. When it can't, the journal stays held, and memfs status lists it.
func (e *Engine) restoreHeld(dir string) {
	for _, sa := range journal.ListSetAside(dir) {
		if !sa.Held || sa.Session != e.opts.Session {
			continue
		}
		if err := journal.Restore(dir, sa.Path); err != nil {
			e.log.WithError(err).Warn("a journal held for this session's next mount could not be put back in place yet; it stays held")
			return
		}
		e.log.WithField("held_at", sa.Path).Info("took up the changes this session left while another session had the store")
		return
	}
}

// Open checks the store, opens (and locks) its journal, lists every
// memory (the tree is loaded lazily: content comes after Start, lazy.go),
// and replays pending changes from a previous run onto the tree.
func (e *Engine) Open(ctx context.Context) error {
	readOnly := e.opts.ReadOnly
	e.name = e.opts.StoreName
	if !e.opts.SessionStore {
		st, err := e.opts.Store.GetStore(ctx, e.opts.StoreID)
		if err != nil {
			return e.storeRefused("get memory store", err)
		}
		if st.Archived() && !readOnly {
			e.log.Warn("the memory store is archived: mounting it read-only")
			readOnly = true
		}
		e.name = st.Name
	}
	if !readOnly {
		j, err := e.openJournal()
		if err != nil {
			return err
		}
		e.journal = j
	}
	// The feed is an extension, probed once here: any refusal means "not
	// here" (a server without it, or a credential it does not cover), and
	// the overlay lists instead. Its head is taken before listing:
	// changes that commit while we list come again through the feed
	// (applying them twice is harmless). An unknown store is told by the
	// listing that follows.
	head, err := e.opts.Store.Changes(ctx, e.opts.StoreID, 0, 1, 0)
	switch {
	case err == nil:
		e.cursor, e.follows = head.NextCursor, FollowsFeed
		e.log.Info("following the store through its change feed")
	case errors.Is(err, store.ErrFeedUnsupported):
		// Without the feed, the memory versions (the hosted API has
		// them): their head is taken before listing too.
		e.cursor = 0
		if err := e.probeVersions(ctx, err); err != nil {
			e.closeJournal(ctx)
			return err
		}
	default:
		e.closeJournal(ctx)
		return fmt.Errorf("read the change feed of %s: %w", e.opts.StoreID, err)
	}
	files, err := e.load(ctx)
	if err != nil {
		e.closeJournal(ctx)
		return e.storeRefused("load memory store", err)
	}
	if err := e.openLocal(files, readOnly); err != nil {
		e.closeJournal(ctx)
		return err
	}
	e.startOwner()
	if e.journal == nil {
		return nil
	}
	e.f = newFlusher(e.log, len(files))
	e.replayJournal()
	return nil
}

// openLocal builds the local side (EngineOptions.Local) over the journal
// and loads the store's listing into it, every file lazy: the store and
// the mount agree on each memory as listed.
func (e *Engine) openLocal(files []store.Memory, readOnly bool) error {
	topts := fs.Options{StoreID: e.opts.StoreID, ReadOnly: readOnly, Owner: e.opts.Owner, Log: e.log, Fetcher: e}
	if e.journal != nil {
		topts.Journal = journalSink{j: e.journal, closes: e.closes}
	}
	local, err := e.opts.Local(topts)
	if err != nil {
		return err
	}
	e.tree = local
	fsFiles := make([]fs.File, len(files))
	for i, m := range files {
		fsFiles[i] = fs.File{FileID: m.ID, Path: m.Path, Lazy: true, Size: m.ContentSizeBytes, Mtime: m.UpdatedAt, SHA: m.ContentSHA256}
		e.ms.agree(m.ID, &files[i])
		if e.journal != nil {
			e.journal.SetBase(m.ID, m.ID, m.ContentSHA256)
		}
	}
	e.tree.Load(fsFiles)
	e.loaded = len(files)
	return nil
}

// replayJournal shows on the local side what a previous run left pending
// in the journal (damaged or not), and logs it.
func (e *Engine) replayJournal() {
	if d := e.journal.Damage(); d != nil {
		e.log.WithFields(logrus.Fields{"lost_bytes": d.LostBytes(), "damaged_copy_at": d.KeptAt, "records_kept": d.Records}).
			Error("the journal of this store was damaged: what could be read is replayed and uploaded; see memfs status")
	}
	pending := e.journal.Pending()
	if len(pending) > 0 {
		changes := make([]fs.Change, len(pending))
		for i, p := range pending {
			changes[i] = p.State
			if p.Origin != "" {
				if _, ok := e.ms.known[p.Origin]; ok {
					e.ms.byMemory[p.Origin] = p.FileID
				}
			}
		}
		if err := e.replay(changes); err != nil {
			e.log.WithError(err).Warn("some changes left in the journal could not be shown on the mount; they stay journaled")
		}
		e.log.WithField("pending", len(pending)).Warn("replaying changes a previous run left in the journal")
		e.replayed = len(pending)
	}
}

// storeRefused names the cause of a failed first request about a store:
// a 404 or 401 says which it is and with which credential; for the
// others (400, 403) the server's own message says it all.
func (e *Engine) storeRefused(what string, err error) error {
	storeID, cred := e.opts.StoreID, "API key"
	if e.opts.SessionStore {
		cred = "session token"
	}
	if se, ok := store.Refusal(err); ok {
		switch se.Status {
		case 404:
			return fmt.Errorf("memory store %s does not exist, or this %s can't see it (HTTP 404): %w", storeID, cred, err)
		case 401:
			return fmt.Errorf("%s %s: the %s was refused (HTTP 401): %w", what, storeID, cred, err)
		}
	}
	return fmt.Errorf("%s %s: %w", what, storeID, err)
}

// replay applies the journal's pending changes to the tree loaded from
// the store. Each is the local state of one file, in LSN order, and one
// may not fit until a later one is applied (a file created where the store
// still has a directory of memories that were moved away since), so those
// that fail are tried again while any of them applies.
func (e *Engine) replay(changes []fs.Change) error {
	for {
		var failed []fs.Change
		var errs []error
		for _, c := range changes {
			if err := e.tree.Apply([]fs.Change{c}); err != nil {
				failed, errs = append(failed, c), append(errs, err)
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if len(failed) == len(changes) {
			return errors.Join(errs...)
		}
		changes = failed
	}
}

// Start runs the flusher (every interval, and after a quiet period:
// schedule.go), the overlay (remote changes) and the stall watchdog until
// Finish.
func (e *Engine) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.tell(started{ctx})
	e.goRun(ctx, e.follow)
	e.goRun(ctx, e.watch)
	e.goRun(ctx, e.fetchAll)
	if e.f == nil {
		return
	}
	e.goRun(ctx, e.flushLoop)
}

// goRun runs fn in a goroutine the engine waits for at Finish and Close.
func (e *Engine) goRun(ctx context.Context, fn func(context.Context)) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn(ctx)
	}()
}

// SyncNow runs one flusher pass at once (tests, SIGUSR1).
func (e *Engine) SyncNow(ctx context.Context, deletes, waiveDelay bool) SyncResult {
	if e.f == nil {
		return SyncResult{}
	}
	return e.runPass(ctx, passOptions{deletes: deletes, waiveDelay: waiveDelay, trigger: TriggerNow})
}

// FinalSyncTimeout bounds the final sync of Finish.
const FinalSyncTimeout = 30 * time.Second

// Finish starts the end of the session: the tree refuses new changes
// (writes through handles already open still land), the flusher stops,
// and a final sync uploads what is pending — deletes included (without the
// 30 s wait, with the per-pass cap) when clean, writes only otherwise —
// bounded by ctx and FinalSyncTimeout. What could not be uploaded stays in
// the journal for the next mount, and the count is logged. Call Close
// after unmounting.
func (e *Engine) Finish(ctx context.Context, clean bool) SyncResult {
	if e.tree != nil {
		e.tree.Freeze()
	}
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	if e.own != nil {
		e.tell(finishing{})
	}
	if e.f == nil {
		return SyncResult{}
	}
	fctx, cancel := context.WithTimeout(ctx, FinalSyncTimeout)
	defer cancel()
	res := e.runPass(fctx, passOptions{deletes: clean, waiveDelay: clean, final: true, trigger: TriggerFinal})
	if !clean && res.DeletesPending > 0 {
		e.log.WithField("deletes", res.DeletesPending).Warn("the session did not end cleanly: pending deletions were not sent")
	}
	if left := res.Left - res.DeletesPending; left > 0 {
		why := map[string]int{}
		for _, c := range e.Status().Pending {
			if c.Op != "delete" && c.Op != "unjournaled" && c.Op != OpNotUploaded {
				why[c.Reason]++
			}
		}
		e.log.WithFields(logrus.Fields{"left": left, "reasons": why}).Warn("changes stay in the journal at the end of this mount: they are replayed and uploaded by the next mount of this store (memfs status lists them)")
	}
	if u := unjournaledCloses(e.tree.Unjournaled()); len(u) > 0 {
		why := map[string]int{}
		for _, err := range u {
			r, _ := journalReason(err)
			why[r]++
		}
		e.log.WithFields(logrus.Fields{"files": len(u), "reasons": why}).Error("files whose close the journal could not take are still not journaled: their last changes are lost with this mount")
	}
	return res
}

// Close releases the journal (after Finish and the unmount), first
// noting what is left in it (Left).
func (e *Engine) Close(ctx context.Context) error {
	if e.cancel != nil {
		e.cancel()
	}
	e.lifeCancel()
	e.wg.Wait()
	e.stopOwner()
	if e.journal != nil {
		e.left = e.leftNow()
	}
	return e.closeJournal(ctx)
}

func (e *Engine) closeJournal(ctx context.Context) error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.journal == nil {
		return nil
	}
	err := e.journal.Close(ctx)
	e.journal = nil
	return err
}

// TreeJournal is the filesystem's view of a journal, as the engine gives
// it to the tree it mounts: the benchmarks of test/bench build their tree
// over it, so that they measure the mount's own path to the journal.
func TreeJournal(j *journal.Journal) fs.Journal { return journalSink{j: j} }

// journalSink adapts the Journal to the filesystem's Journal interface,
// and tells the quiet trigger of each journaled write (a close, a
// truncate, a move): deletes alone wait for the interval anyway.
type journalSink struct {
	j      *journal.Journal
	closes *closeSignal // nil: no quiet trigger
}

func (s journalSink) Append(states ...fs.FileState) error {
	writes := false
	for _, st := range states {
		writes = writes || !st.Deleted
	}
	_, err := s.j.Append(states...)
	if err == nil && writes {
		s.closes.note()
	}
	return err
}

// AppendAgainst appends st made against baseSHA (fs.BaseJournal): the
// file's base keeps its memory, with baseSHA as the content it was made
// on; a pending change keeps its own base.
func (s journalSink) AppendAgainst(baseSHA string, st fs.FileState) error {
	if b, ok := s.j.Base(st.FileID); ok {
		s.j.SetBase(st.FileID, b.MemoryID, baseSHA)
	}
	return s.Append(st)
}

func (s journalSink) Sync() error { return s.j.Sync() }

// AppendShared appends and returns the journal's copy of each state's
// content (fs.SharingJournal): its pending entry's, when it holds exactly
// those bytes. Entry content is the tail of the journal's encoded record,
// which the journal never writes into, so the tree may keep it.
func (s journalSink) AppendShared(states ...fs.FileState) ([][]byte, error) {
	if err := s.Append(states...); err != nil {
		return nil, err
	}
	kept := make([][]byte, len(states))
	for i, st := range states {
		if st.Deleted {
			continue
		}
		if e, ok := s.j.Lookup(st.FileID); ok && !e.Deleted && bytes.Equal(e.Content, st.Content) {
			kept[i] = e.Content
		}
	}
	return kept, nil
}
