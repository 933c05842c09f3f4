package syncqueue

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/syncqueue/reconcile"
)

// flusher is the bookkeeping of the passes that upload the journal's
// pending entries — the net change of every file since the store last
// confirmed it, not the history of operations — owned by the owner
// (owner.go, pass.go): a pass waits on no request with it, so the remote
// side keeps bringing changes down while uploads wait on a slow store.
type flusher struct {
	log logrus.FieldLogger

	running *pass        // the pass in progress, if any
	queued  []passWanted // the passes asked for meanwhile, in order
	// pathsWaiting is the changes left on a path conflict by the last
	// pass, as logged.
	pathsWaiting string

	ticks     int
	storeSize int               // memories in the store as last seen (for the delete cap)
	refused   map[string]uint64 // fileID -> LSN the store refused (400/413); retried once it changes
	capped    map[string]uint64 // fileID -> LSN refused at the store's memory cap (warned once)
	capw      capWait           // whether the store is at its cap, and when new files try again (capwait.go)
	// credErr is the store's refusal (401/403) of this mount's last
	// change, until a change goes up: warned once per streak.
	credErr error
	// waits says, per file, why its change did not go up at the last try
	// (for status); cleared when it goes up.
	waits      map[string]wait
	deleteSeen map[string]reconcile.DeleteWatch // fileID -> when a pass first saw its pending delete
	// moving holds the memories with a pending change (a move, an edit or
	// a delete of their local file) as the pass began; set before its
	// uploads start and only read by them.
	moving map[string]bool
	// scratchSeen: fileID -> when a pass first saw the file's create at
	// a scratch name; held until ScratchGrace after (scratch.go).
	scratchSeen map[string]time.Time
	last        PassInfo  // the last pass that ended
	lastClean   time.Time // when the last pass that left nothing failed began
	// unreached: the last pass could not reach the store for some change
	// (the quiet trigger then waits for the interval: schedule.go).
	unreached bool
}

// wait is why one file's change is still pending after a try.
type wait struct {
	reason string
	err    string
	lsn    uint64
	at     time.Time
}

func newFlusher(log logrus.FieldLogger, storeSize int) *flusher {
	return &flusher{log: log, storeSize: storeSize, refused: map[string]uint64{}, capped: map[string]uint64{},
		waits: map[string]wait{}, deleteSeen: map[string]reconcile.DeleteWatch{}, scratchSeen: map[string]time.Time{}, capw: newCapWait()}
}

type passOptions struct {
	deletes    bool // send deletes that are due
	waiveDelay bool // send deletes without the 30 s / confirming-pass wait (clean end)
	final      bool
	trigger    string // what started the pass (a Trigger constant)
}

// SyncResult counts what one pass did and left.
type SyncResult struct {
	Uploaded int `json:"uploaded"`
	Deleted  int `json:"deleted"`
	Failed   int `json:"failed"`
	// Conflicts is how many changes the store won (kept in the conflict log).
	Conflicts int `json:"conflicts"`
	// Refused is how many changes the store refused for the first time in
	// this pass (at its memory cap, or as invalid or too large): each is
	// warned about once, and then waits. Counted once per version of a
	// file, so a change that waits at the cap counts once.
	Refused int `json:"refused"`
	// Left is how many pending changes remain after the pass.
	Left int `json:"left"`
	// DeletesPending is how many deletes were not sent (not due, capped, or not asked for).
	DeletesPending int `json:"deletes_pending"`
}

// did reports whether the pass changed anything or learned of a refusal:
// such a pass is logged at info; an idle one (or one that only retried
// what keeps failing) is not.
func (r SyncResult) did() bool {
	return r.Uploaded+r.Deleted+r.Conflicts+r.Refused > 0
}

// PassInfo describes the last pass, for status.
type PassInfo struct {
	At time.Time `json:"at"`
	// Duration is in nanoseconds in JSON.
	Duration time.Duration `json:"duration"`
	Result   SyncResult    `json:"result"`
	// Clean is true when nothing failed: every change that could go up did.
	Clean bool `json:"clean"`
	// Trigger is what started the pass: interval, quiet, replay, now
	// (SIGUSR1) or final.
	Trigger string `json:"trigger"`
}

// What one planned request does: reconcile's kinds, named short here.
const (
	opCreate = reconcile.UploadCreate
	opUpdate = reconcile.UploadUpdate
)

// op is one planned create or update.
type op struct {
	kind    reconcile.UploadKind // opCreate or opUpdate
	entry   journal.Entry
	replace *journal.Entry // update: a pending delete at the same path folded into this create
}

// target is the memory an update is about.
func (o op) target() string {
	if o.replace != nil {
		return o.replace.Origin
	}
	return o.entry.Origin
}

// base is the precondition of an update.
func (o op) base() string {
	if o.replace != nil {
		return o.replace.BaseSHA
	}
	return o.entry.BaseSHA
}

// Reasons a change waits, as status shows them (docs/sync.md, "Why a
// change waits").
const (
	ReasonWaiting     = "waiting for the next pass"
	ReasonDeleteDelay = "deletes wait 30 s and a confirming pass"
	ReasonUnreachable = "store unreachable"
	ReasonNoSpace     = "no space for the journal"
	ReasonCap         = "the store is at its memory cap"
	ReasonNotUTF8     = "content is not UTF-8"
	ReasonPath        = "path conflict"
	ReasonRefused     = "refused by the store (retried once the file changes)"
	ReasonCredential  = "refused by the store" // 401/403: status adds the store's message
	ReasonConflict    = "changed in the store too: being resolved"
	// ReasonScratch: a create at the temporary name of the SDK's write
	// tool, held for ScratchGrace (PendingChange.Until) unless renamed.
	ReasonScratch = "held: temporary name of the SDK's write tool"
	// ReasonCutShort: the request was cancelled, not failed: a second
	// signal cut the final sync short (the store may be fine).
	ReasonCutShort = "the final sync was cut short"
)

// plan turns pending entries into requests (reconcile.PlanUploads): an
// entry that deletes memory M at path P and a new file created at P in the
// same pass become one update of M (an editor's atomic save keeps the
// memory's id); a create at a scratch name is held for its grace, except
// by a final pass; with the store at its cap (capFull), creates wait apart
// (held). It keeps the scratch names' first sightings and records why a
// change not UTF-8 waits.
func (f *flusher) plan(pending []journal.Entry, final, capFull bool) (ops, held []op, deletes []journal.Entry) {
	now := time.Now()
	items := make([]reconcile.PlanItem, len(pending))
	scratch := map[string]bool{}
	for i, e := range pending {
		items[i] = reconcile.PlanItem{FileID: e.FileID, LSN: e.LSN, Path: e.Path, Origin: e.Origin, Deleted: e.Deleted}
		if lsn, ok := f.refused[e.FileID]; ok && lsn == e.LSN {
			items[i].Refused = true
		}
		if !e.Deleted {
			items[i].NotUTF8 = !utf8.Valid(e.Content)
		}
		if scratchCreate(e.Origin, e.Path, e.Deleted) {
			scratch[e.FileID] = true
			if _, ok := f.scratchSeen[e.FileID]; !ok {
				f.scratchSeen[e.FileID] = now
			}
			items[i].Scratch, items[i].ScratchUntil = true, scratchUntil(f.scratchSeen[e.FileID])
		}
	}
	for id := range f.scratchSeen {
		if !scratch[id] {
			delete(f.scratchSeen, id) // renamed, removed or uploaded
		}
	}
	pl := reconcile.PlanUploads(items, reconcile.PlanPass{Now: now, Final: final, CapFull: capFull})
	for _, i := range pl.NotUTF8 {
		// Kept locally (the filesystem warned at close), not uploaded
		// until it is valid.
		f.waits[pending[i].FileID] = wait{reason: ReasonNotUTF8, lsn: pending[i].LSN, at: now}
	}
	for _, i := range pl.Deletes {
		deletes = append(deletes, pending[i])
	}
	return f.ops(pending, pl.Ops), f.ops(pending, pl.AtCap), deletes
}

// ops turns planned uploads into ops on pending's entries.
func (f *flusher) ops(pending []journal.Entry, planned []reconcile.UploadOp) []op {
	var ops []op
	for _, p := range planned {
		o := op{kind: p.Kind, entry: pending[p.Item]}
		if p.Replace >= 0 {
			d := pending[p.Replace]
			o.replace = &d
		}
		ops = append(ops, o)
	}
	return ops
}

// passRun collects what one pass did.
type passRun struct {
	res        SyncResult
	transient  int
	firstErr   error    // the first transient failure, for the outage's report
	retry      []op     // path conflicts, retried after the deletes
	capped     []op     // creates refused at the store's memory cap, or held while it is: tried after the deletes (retryCapped)
	conflicted []string // memory ids the store changed too
}

func (r *passRun) done(o op) {
	r.res.Uploaded++
}

func (r *passRun) failed(o op, v reconcile.Verdict, first bool, err error) {
	if first {
		r.res.Refused++
	}
	switch v {
	case reconcile.VerdictRetryPath:
		r.retry = append(r.retry, o)
		return
	case reconcile.VerdictWaitCap:
		r.capped = append(r.capped, o)
		return
	case reconcile.VerdictResolve:
		r.conflicted = append(r.conflicted, o.target())
	case reconcile.VerdictOutage, reconcile.VerdictCutShort:
		r.transient++
		if r.firstErr == nil {
			r.firstErr = err
		}
	}
	r.res.Failed++
}

// addDeletes adds what the pass's deletes did to r.
func (r *passRun) addDeletes(d deleteOutcome) {
	r.res.Deleted, r.res.DeletesPending = d.sent, d.left
	r.res.Failed += d.failed
	r.transient += d.transient
	if r.firstErr == nil {
		r.firstErr = d.firstErr
	}
	r.conflicted = append(r.conflicted, d.conflicted...)
}

// upload sends one create or update, settles the answer and calls then
// with the outcome. The memory an update is about is busy until then
// (busy.go): the update waits for a request about it in flight, and no
// other decision about it is made meanwhile. A create makes the memories
// this mount does not know busy.
func (e *Engine) upload(ctx context.Context, o op, then func(error)) {
	if o.kind == opCreate {
		e.startCreate()
		e.sendCreate(ctx, o, false, e.f.capw.epoch, then)
		return
	}
	e.whenFree(o.target(), func() {
		capEpoch := e.f.capw.epoch
		e.markBusy(o.target())
		origin, base, path := o.target(), o.base(), o.entry.Path
		content := string(o.entry.Content)
		// The sha sent is remembered until seen again, so that the
		// overlay doesn't take our own write for a remote edit.
		e.ms.noteSent(origin, store.SHA256Hex(content))
		st, sid := e.opts.Store, e.opts.StoreID
		e.request(func() ownerEvent {
			m, err := st.UpdateMemory(ctx, sid, origin, store.UpdateMemoryInput{Content: &content, Path: &path, ExpectedSHA256: &base})
			return uploadDone{ctx: ctx, o: o, m: m, err: err, capEpoch: capEpoch, then: then}
		})
	})
}

// sendCreate sends the create of o (or, recreated, the create in place of
// an update the store answered 404: the memory was deleted meanwhile, and
// the local file is the only copy). The sha sent is remembered by path
// until the answer, or a memory at the path, is seen.
func (e *Engine) sendCreate(ctx context.Context, o op, recreated bool, capEpoch uint64, then func(error)) {
	path, content := o.entry.Path, string(o.entry.Content)
	e.ms.created[path] = store.SHA256Hex(content)
	st, sid := e.opts.Store, e.opts.StoreID
	e.request(func() ownerEvent {
		m, err := st.CreateMemory(ctx, sid, path, content)
		return uploadDone{ctx: ctx, o: o, m: m, err: err, create: true, recreated: recreated, capEpoch: capEpoch, then: then}
	})
}

// uploadDone is the store's answer to an upload's request: the create or
// update of o (create: a create was sent; recreated: in place of o's
// update).
type uploadDone struct {
	ctx               context.Context
	o                 op
	m                 *store.Memory
	err               error
	create, recreated bool
	capEpoch          uint64
	then              func(error)
}

func (d uploadDone) handle(e *Engine) {
	o, err := d.o, d.err
	switch {
	case d.create && err == nil:
		a := reconcile.Answer{Op: opCreate, Status: 200, OthersMemory: e.f.othersMemory(o.entry, d.m)}
		if v, _ := reconcile.JudgeAnswer(a); v == reconcile.VerdictRetryPath {
			err = store.PathConflict(o.entry.Path, d.m.ID, d.m.Path)
		}
	case d.create && d.recreated:
		err = &createdInstead{err}
	case !d.create:
		if v, _ := reconcile.JudgeAnswer(describe(reconcile.UploadUpdate, err)); v == reconcile.VerdictRecreate {
			e.startCreate() // the memory stays busy until the create is answered
			e.sendCreate(d.ctx, o, true, d.capEpoch, d.then)
			return
		}
	}
	if err == nil {
		if o.kind == opCreate || d.recreated {
			e.f.capw.created(d.capEpoch)
		}
		err = e.settle(o, d.m, d.recreated)
	}
	if d.create {
		e.endCreate()
	}
	if o.kind == opUpdate {
		e.release(o.target())
	}
	d.then(err)
}

// othersMemory reports whether m, which a create of e returned, is the
// memory of another local file whose move or delete was pending when the
// pass began. The client takes a memory already at the path with the same
// bytes for our own earlier create whose response was lost; but this one
// is still where another file of this mount left it ("mv a b; touch a",
// two empty files): adopting it would bind two files to one memory and
// lose e when the other's change goes up. It is a path conflict instead
// (R23, reconcile.AnswerRules), retried once the other change is
// uploaded. (Decided on the pass's starting state: the other change may
// be confirmed by a concurrent upload between the create and this check.)
func (f *flusher) othersMemory(e journal.Entry, m *store.Memory) bool {
	return e.Origin == "" && f.moving[m.ID]
}

// settle records an upload the store answered: the journal releases (or
// rebases) the entry, and the answer — a look at the store, taken while
// the memory was busy (busy.go), so no newer state of it was applied
// meanwhile — becomes what this mount agrees on.
func (eng *Engine) settle(o op, m *store.Memory, recreated bool) error {
	f, e, ms := eng.f, o.entry, &eng.ms
	if recreated {
		ms.forget(o.target())
	}
	if o.replace != nil {
		if err := eng.journal.Confirm(o.replace.FileID, o.replace.LSN, "", "", o.replace.Path); err != nil && !errors.Is(err, journal.ErrNotPending) {
			return &journalError{err}
		}
	}
	if o.kind == opCreate || recreated {
		f.storeSize++
	}
	delete(f.refused, e.FileID)
	delete(f.capped, e.FileID)
	delete(f.waits, e.FileID)
	f.credErr = nil
	delete(ms.created, e.Path)
	if err := eng.journal.Confirm(e.FileID, e.LSN, m.ID, m.ContentSHA256, m.Path); err != nil && !errors.Is(err, journal.ErrNotPending) {
		return &journalError{err}
	}
	ms.agree(e.FileID, m)
	ms.seen(m.ID, m.ContentSHA256)
	return nil
}

// judge classifies a failed upload, records why it waits (for the file,
// and for the delete folded into it), and warns once per file where a
// person should know. first reports a refusal warned about now (the first
// for this version of the file).
func (f *flusher) judge(o op, err error) (v reconcile.Verdict, first bool) {
	v, _ = reconcile.JudgeAnswer(describe(o.kind, err))
	first = f.noteWait(o.entry, v, err)
	if o.replace != nil {
		f.waits[o.replace.FileID] = wait{reason: f.waits[o.entry.FileID].reason, err: err.Error(), lsn: o.replace.LSN, at: time.Now()}
	}
	return v, first
}

// retryCapped tries the new files the store refused at its memory cap, or
// that waited while it was, when p.try says there may be room: this
// pass's deletes made some (a file removed and another created in one
// interval, or before a final sync, go up together), or a sign of room
// came or the backoff ended (capwait.go). They go one at a time, oldest
// first (from capped[i]), and the first the store still refuses at its
// cap ends the try; the others wait, without a request, for the next
// sign. The path-conflict retries follow.
func (e *Engine) retryCapped(p *pass, capped []op, i int) {
	for ; i < len(capped); i++ {
		o := capped[i]
		if !p.try || p.ctx.Err() != nil {
			e.f.holdAtCap(o.entry)
			p.r.res.Failed++
			continue
		}
		e.upload(p.ctx, o, func(err error) {
			if err == nil {
				p.r.done(o)
				e.retryCapped(p, capped, i+1)
				return
			}
			if v, first := e.f.judge(o, err); v != reconcile.VerdictWaitCap {
				p.r.failed(o, v, first, err)
			} else {
				if first {
					p.r.res.Refused++
				}
				p.try = false
				p.r.res.Failed++
			}
			e.retryCapped(p, capped, i+1)
		})
		return
	}
	e.resolvePaths(p)
}

// holdAtCap records why a create not sent waits: the store is at its cap.
// A reason the store gave for this version of the file is kept.
func (f *flusher) holdAtCap(e journal.Entry) {
	if w, ok := f.waits[e.FileID]; ok && w.lsn == e.LSN && w.reason == ReasonCap {
		return
	}
	f.waits[e.FileID] = wait{reason: ReasonCap, err: "not sent: the store refused a create at its memory cap, and no memory was deleted since",
		lsn: e.LSN, at: time.Now()}
}

// noteWait records why a change the store did not take waits, by its
// verdict, and warns once per file where a person should know. first
// reports a refusal warned about now (the first for this version of the
// file).
func (f *flusher) noteWait(e journal.Entry, v reconcile.Verdict, err error) (first bool) {
	l := f.log.WithFields(logrus.Fields{"path": e.Path})
	w := wait{err: err.Error(), lsn: e.LSN, at: time.Now()}
	switch v {
	case reconcile.VerdictUnrecorded:
		// The store answered; the journal is what failed.
		var je *journalError
		errors.As(err, &je)
		w.reason, _ = journalReason(je.err)
	case reconcile.VerdictRetryPath:
		w.reason = ReasonPath
	case reconcile.VerdictResolve:
		w.reason = ReasonConflict
	case reconcile.VerdictWaitCap:
		// The cap is a passing condition (another client deletes a
		// memory): retried on a sign of room, warned once per change.
		if lsn, warned := f.capped[e.FileID]; !warned || lsn != e.LSN {
			l.WithError(err).Warn("the store is at its memory cap: this new file stays local and is tried again once a memory is deleted (or after a backoff of up to 5 minutes)")
			first = true
		}
		f.capped[e.FileID] = e.LSN
		f.capw.refused(time.Now())
		w.reason = ReasonCap
	case reconcile.VerdictRefused:
		if lsn, warned := f.refused[e.FileID]; !warned || lsn != e.LSN {
			l.WithError(err).Warn("the store refused this file; it stays local and is retried once it changes")
			first = true
		}
		f.refused[e.FileID] = e.LSN
		w.reason = ReasonRefused
	case reconcile.VerdictCredential:
		// The store answered: no outage. Said once until a change goes up.
		if f.credErr == nil {
			l.Warn("refused by the store: " + storeMessage(err) + "; changes stay journaled and are retried every pass")
		}
		f.credErr = err
		w.reason = ReasonCredential
	case reconcile.VerdictCutShort:
		w.reason = ReasonCutShort
	default:
		w.reason = ReasonUnreachable
	}
	f.waits[e.FileID] = w
	return first
}

// describe reads the store's answer to one upload of kind from the error
// the request returned (nil: 200): the store's typed errors are looked at
// here only, the verdict is reconcile's.
func describe(kind reconcile.UploadKind, err error) reconcile.Answer {
	a := reconcile.Answer{Op: kind}
	var je *journalError
	var ci *createdInstead
	if errors.As(err, &ci) {
		a.Op = reconcile.UploadCreate
	}
	switch {
	case err == nil:
		a.Status = 200
	case errors.As(err, &je):
		a.Status, a.Unrecorded = 200, true
	case errors.Is(err, store.ErrPathConflict):
		a.Status, a.Code = 409, reconcile.CodePathConflict
	case errors.Is(err, store.ErrPreconditionFailed):
		a.Status, a.Code = 409, reconcile.CodePrecondition
	case errors.Is(err, store.ErrLimit):
		a.Status, a.Code = 422, reconcile.CodeMemoryLimit
	case errors.Is(err, store.ErrInvalid):
		a.Status = 400
	case errors.Is(err, store.ErrTooLarge):
		a.Status = 413
	case errors.Is(err, store.ErrUnauthorized):
		a.Status = 401
	case errors.Is(err, store.ErrForbidden):
		a.Status = 403
	case errors.Is(err, context.Canceled):
		a.Canceled = true
	case errors.Is(err, store.ErrNotFound):
		a.Status = 404
	}
	return a
}

// createdInstead marks the error of the create sent in place of an update
// the store answered 404 (R21): the answer is a create's.
type createdInstead struct{ err error }

func (c *createdInstead) Error() string { return c.err.Error() }
func (c *createdInstead) Unwrap() error { return c.err }

// sortByLSN orders ops as their changes were made.
func sortByLSN(ops []op) {
	reconcile.OldestFirst(ops, func(o op) uint64 { return o.entry.LSN })
}
