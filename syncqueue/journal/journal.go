package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store/durable"
)

// journalFileName is the journal inside its directory.
const journalFileName = "journal"

// Journal is the durable journal of one mounted store. Create it with Open,
// release it with Close. Safe for concurrent use; see "Concurrency" in the
// package doc.
type Journal struct {
	dir, path string
	opts      Options
	log       logrus.FieldLogger
	lock      *dirLock
	// seal signs the records written, for the store, the state dir and
	// session; ctx is what the CONTEXT record names (jctx; set by Open).
	seal *sealer
	jctx journalContext
	// emptyLen is the size of the journal with no record: the header
	// and the CONTEXT record.
	emptyLen int64
	// refused and held say what Open set aside (nil when nothing).
	refused *Refusal
	held    *Held

	// The owner goroutine (run): group commit, compaction, and on exit the
	// final fdatasync and release of the file and the lock.
	kick   chan struct{} // buffered(1): a record was written
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the owner goroutine has exited

	// compactMu serialises compactions (the owner goroutine's, Open's,
	// and Append's when it needs room). Taken before mu, never after.
	compactMu sync.Mutex

	// mu guards the state. Everything below is GUARDED_BY(mu).
	mu        sync.Mutex
	st        state
	f         *os.File // the journal, O_APPEND; replaced by compaction
	size      int64    // bytes of f
	syncedLSN uint64   // every record up to this LSN is on stable storage
	err       error    // sticky internal failure (a bug): the journal is fail-stop
	closed    bool     // Close was called
	closeErr  error    // result of the final sync/close, set before done closes
	// fault: an I/O error left the file in an unknown state and no fresh
	// file could be written yet (see recover.go); changes are refused
	// with it, confirmations hold in memory.
	fault *IOError
	// recoverFailing: a recovery failed since the fault began (logged once).
	recoverFailing bool
	// unsaved: bookkeeping records took effect in memory but could not be
	// written (a full disk); a compaction must write the state.
	unsaved bool
	// unwritten counts those records, so a compaction can tell whether
	// one came while it was writing.
	unwritten uint64
	// noSpace: the last change was refused, or a record not written,
	// for want of space; cleared by the next change written.
	noSpace       bool
	noSpaceLogged time.Time // when the last "state dir is full" error was logged
	damage        *Damage   // what Open salvaged, nil for a clean journal

	compactFailing bool // only the owner goroutine (and Open) use it

	// Test hooks (nil in production). testHookCompactPhase1 runs between
	// the two phases of a compaction, without the lock; testHookWrite may
	// fail an append, a compaction or a recovery before it writes;
	// testHookAvail replaces statfs; testHookSync runs before every
	// fdatasync of a journal file and may fail it.
	testHookCompactPhase1 func()
	testHookWrite         func(b []byte) error
	testHookAvail         func() int64
	testHookSync          func(f *os.File) error
}

// Open opens the journal in dir, creating the directory (0700) and the
// journal if needed, and returns it replayed: Pending holds what the last
// owner left unconfirmed.
//
// It takes an exclusive flock on dir/lock (ErrLocked, naming the holder's
// pid, if another process or Journal holds it), removes a leftover
// journal.tmp, cuts a torn tail off with a warning, and compacts the journal
// if that pays. A journal damaged before its tail is salvaged: every
// record that passes its checks is replayed, the damaged file is kept as
// journal.corrupt-<unix time>, an error names the bytes lost, and Damage
// reports it. Open starts the goroutine that Close stops.
func Open(dir string, opts Options) (*Journal, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	loose, err := checkDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	lk, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &Journal{
		dir:    dir,
		path:   filepath.Join(dir, journalFileName),
		opts:   opts,
		log:    opts.Log.WithField("journal", dir),
		lock:   lk,
		kick:   make(chan struct{}, 1),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	j.setContext(opts.Auth.Session)
	if err := j.load(loose); err != nil {
		cancel()
		if j.f != nil {
			j.f.Close()
		}
		lk.release()
		return nil, err
	}
	if err := j.compact(ctx); err != nil {
		j.log.WithError(err).Warn("could not compact the journal after replay; will retry")
	}
	go j.run(ctx)
	return j, nil
}

// setContext makes the journal's CONTEXT and sealer those of session.
func (j *Journal) setContext(session string) {
	a := j.opts.Auth
	j.jctx = journalContext{storeID: a.StoreID, identity: a.Identity, session: session}
	j.seal = newSealer(a.Key, a.StoreID, a.Identity, session)
	j.emptyLen = int64(len(j.header(0)))
}

// header is the start of a journal file: the file header for baseLSN and
// the CONTEXT record.
func (j *Journal) header(baseLSN uint64) []byte {
	return append(encodeHeader(baseLSN), encodeContext(j.jctx, j.seal)...)
}

// load reads and replays the journal file, repairing a torn tail and
// salvaging damage, and opens it for appending; a journal that is not
// this state dir's own is refused, one written in another session held
// (see "Authentication" and "Sessions" in the package doc). loose says
// the directory was open to other users (Open closed it). Called by Open
// before any other goroutine can see j.
func (j *Journal) load(loose bool) error {
	if err := removeLeftoverTmp(j.path+".tmp", j.log); err != nil {
		return err
	}
	b, reason, err := readOwnJournal(j.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return j.createFresh()
	case err != nil:
		return fmt.Errorf("read journal: %w", err)
	case reason == "" && loose:
		reason = "its directory was writable by other users (now closed to them), who may have put it there"
	}
	if reason != "" {
		return j.refuse(reason)
	}

	a := j.opts.Auth
	st := newState(j.seal)
	var prev uint64
	res, err := scan(b, scanKeys{key: a.Key, want: j.jctx}, func(r *record, raw []byte) error {
		if r.lsn <= prev {
			return fmt.Errorf("%v record lsn %d is not greater than the previous record's %d", r.typ, r.lsn, prev)
		}
		if err := st.apply(r, raw); err != nil {
			return err
		}
		prev = r.lsn
		return nil
	})
	var refused *refusedError
	if errors.As(err, &refused) {
		return j.refuse(refused.reason)
	}
	if err != nil {
		return fmt.Errorf("open journal %s: %w", j.path, err)
	}
	if res.session != j.jctx.session {
		switch {
		case len(st.pending) == 0:
			// Nothing of that session's is left to upload.
			return j.createFresh()
		case !a.AnySession:
			return j.hold(res.session, len(st.pending))
		}
		// Taken up as written: new records carry its session too.
		j.setContext(res.session)
		st.seal = j.seal
	}
	st.lastLSN = max(st.lastLSN, res.baseLSN)
	// Detach the pending entries from the file image so it can be freed.
	for _, e := range st.pending {
		e.rec = bytes.Clone(e.rec)
		if !e.Deleted {
			e.Content = putContent(e.rec, len(e.Content))
		}
	}
	if len(b) == 0 {
		res.lost = []lostRange{{Range{0, 0}, "the journal is empty (0 bytes): it was truncated, and whatever it held is lost"}}
	}
	if res.ctx == nil && len(res.lost) == 0 {
		// Cut off before or within its CONTEXT record (a live journal is
		// created with it in one durable write): what it held is lost.
		res.lost = []lostRange{{Range{headerLen, int64(len(b))}, "the journal ends before its CONTEXT record"}}
	}
	if len(res.lost) > 0 {
		// A damaged CONTEXT record is rewritten too.
		return j.salvage(b, st, res)
	}

	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.f = f
	if res.torn != nil {
		if err := cutTornTail(f, j.path, int64(len(b)), res, j.log); err != nil {
			return err
		}
	} else if err := fdatasync(int(f.Fd())); err != nil {
		// What the last owner wrote may not have reached the disk yet;
		// build on it only once it has.
		return fmt.Errorf("open journal %s: fdatasync: %w", j.path, err)
	}
	j.st, j.size, j.syncedLSN = st, res.end, st.lastLSN
	if n := len(st.pending); n > 0 {
		j.log.WithFields(logrus.Fields{"pending": n, "records": res.records, "session": j.jctx.session}).Info("replayed journal: changes not yet confirmed by the store")
	}
	return nil
}

// createFresh writes an empty journal (header and CONTEXT record) over
// whatever is at j.path, durably, and opens it.
func (j *Journal) createFresh() error {
	b := j.header(0)
	if err := durable.WriteFile(j.path, b, 0o600); err != nil {
		return fmt.Errorf("create journal %s: %w", j.path, err)
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.f, j.st, j.size = f, newState(j.seal), int64(len(b))
	return nil
}

// salvage replaces a damaged journal (image b) by one holding st, the
// state its intact records replay to, after keeping a copy of b.
func (j *Journal) salvage(b []byte, st state, res scanResult) error {
	d := &Damage{Path: j.path, Reason: res.lost[0].reason, Records: res.records, Size: int64(len(b))}
	for _, l := range res.lost {
		d.Lost = append(d.Lost, l.Range)
	}
	kept, err := keepDamaged(j.path, b)
	if err != nil {
		return fmt.Errorf("journal %s is damaged (%s) and a copy of it could not be kept (%w); it is left as it is: free space in the state dir and mount again", j.path, d.Reason, err)
	}
	d.KeptAt = kept
	img := j.header(st.lastLSN)
	for _, e := range st.sortedPending() {
		img = append(img, e.rec...)
	}
	if err := durable.WriteFile(j.path, img, 0o600); err != nil {
		return fmt.Errorf("journal %s is damaged and the salvaged journal could not be written: %w (the damaged file is kept at %s)", j.path, err, kept)
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.f = f
	j.st, j.size, j.syncedLSN, j.damage = st, int64(len(img)), st.lastLSN, d
	ranges := make([]string, len(d.Lost))
	for i, r := range d.Lost {
		ranges[i] = fmt.Sprintf("%d-%d", r.From, r.To)
	}
	j.log.WithFields(logrus.Fields{
		"lost_bytes":      d.LostBytes(),
		"lost_ranges":     strings.Join(ranges, ","),
		"reason":          d.Reason,
		"records_kept":    d.Records,
		"pending_kept":    len(st.pending),
		"damaged_copy_at": kept,
	}).Error("JOURNAL DAMAGED: the records that passed their checks were replayed and will be uploaded; the bytes in lost_ranges were not readable, and changes recorded only there are lost; the damaged file is kept for a human")
	return nil
}

// Damage reports what Open salvaged from a damaged journal (nil when the
// journal was intact).
func (j *Journal) Damage() *Damage {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.damage == nil {
		return nil
	}
	d := *j.damage
	return &d
}

// usableLocked returns why the journal can't take a call, if it can't.
// A faulted journal still takes bookkeeping (in memory); writableLocked
// is the check for changes.
//
// REQUIRES: j.mu held.
func (j *Journal) usableLocked() error {
	if j.closed {
		return ErrClosed
	}
	return j.err
}

// writableLocked returns why the journal can't record a change now, if
// it can't: closed, failed, or faulted.
//
// REQUIRES: j.mu held.
func (j *Journal) writableLocked() error {
	if err := j.usableLocked(); err != nil {
		return err
	}
	if j.fault != nil {
		return j.fault
	}
	return nil
}

// failLocked makes the journal fail-stop with err, logs it once, and
// returns it.
//
// REQUIRES: j.mu held.
func (j *Journal) failLocked(err error) error {
	if j.err == nil {
		j.err = err
		j.log.WithError(err).Error("journal failed; refusing further changes (those already written are kept)")
	}
	return j.err
}

// SetBase tells the journal what the store holds for a file loaded from it:
// memory memoryID with content sha (memoryID "" forgets the file's base).
// Later Puts and Deletes of fileID are made against it. A pending entry
// keeps its own base — the one its local edit was made against — so the
// store-wins check of its upload is not lost. Bases are kept in memory only.
func (j *Journal) SetBase(fileID, memoryID, sha string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if memoryID == "" {
		delete(j.st.bases, fileID)
		return
	}
	// Keep the LSN of the last confirmation: it still tells a repeated
	// Confirm from a new one.
	j.st.bases[fileID] = knownBase{Base{MemoryID: memoryID, SHA: sha}, j.st.bases[fileID].lsn}
}

// Base returns the base the next state of fileID would be made against:
// its pending entry's, else the one set by SetBase or Confirm.
func (j *Journal) Base(fileID string) (Base, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := j.st.baseOf(fileID)
	return b, b.MemoryID != ""
}

// Pending returns a snapshot of the pending entries in LSN order, for the
// flusher: each is marked handed out (its upload may be in flight, which
// a delete of a never-uploaded file must then not forget; see Change.Deleted).
// Entry Content is shared with the journal and must not be modified.
func (j *Journal) Pending() []Entry { return j.snapshot(true) }

// Snapshot returns the pending entries in LSN order without handing them
// out (for status). Content is shared and must not be modified.
func (j *Journal) Snapshot() []Entry { return j.snapshot(false) }

func (j *Journal) snapshot(handOut bool) []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	ents := j.st.sortedPending()
	out := make([]Entry, len(ents))
	for i, e := range ents {
		e.handedOut = e.handedOut || handOut
		out[i] = e.Entry
	}
	return out
}

// Lookup returns the pending entry of one file, if any, without handing
// it out. Content is shared and must not be modified.
func (j *Journal) Lookup(fileID string) (Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.st.pending[fileID]
	if e == nil {
		return Entry{}, false
	}
	return e.Entry, true
}

// Stats are figures about a journal, for status and metrics.
type Stats struct {
	Pending   int    // pending entries (deletes included)
	Deletes   int    // pending entries that are deletes
	FileBytes int64  // size of the journal file
	LastLSN   uint64 // LSN of the last record written
	SyncedLSN uint64 // every record up to this LSN is on stable storage
	// NoSpace: the last change was refused, or a confirmation kept in
	// memory only, for want of space in the journal's directory.
	NoSpace bool
	// Unsaved: confirmations hold in memory only until a compaction
	// (after NoSpace) or a recovery (after a Fault) writes them.
	Unsaved bool
	// Fault is the I/O error that keeps the journal faulted (nil when
	// it is sound): changes are refused with it until a fresh journal
	// file is written.
	Fault *IOError
}

// Stats returns current figures.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := Stats{Pending: len(j.st.pending), FileBytes: j.size, LastLSN: j.st.lastLSN, SyncedLSN: j.syncedLSN,
		NoSpace: j.noSpace, Unsaved: j.unsaved, Fault: j.fault}
	for _, e := range j.st.pending {
		if e.Deleted {
			s.Deletes++
		}
	}
	return s
}
