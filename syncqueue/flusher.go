package syncqueue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// flusher uploads the journal's pending entries: the net change of every
// file since the store last confirmed it, not the history of operations.
// Only one tick runs at a time (tickMu).
type flusher struct {
	e       *Engine
	opts    EngineOptions
	log     logrus.FieldLogger
	journal *journal.Journal
	tree    *fs.Tree

	// sentMu orders the upload goroutines' changes of e.ms and refused.
	sentMu sync.Mutex

	// Everything below is GUARDED_BY(e.syncMu), which a pass holds.
	ticks      int
	storeSize  int                    // memories in the store as last seen (for the delete cap)
	refused    map[string]uint64      // fileID -> LSN the store refused (400/413); retried once it changes
	deleteSeen map[string]deleteWatch // fileID -> when a tick first saw its pending delete
	// moving holds the memories with a pending change (a move, an edit or
	// a delete of their local file) as the pass began; set before its
	// uploads start and only read by them.
	moving map[string]bool
}

type deleteWatch struct {
	lsn  uint64
	tick int
	at   time.Time
}

func newFlusher(e *Engine, storeSize int) *flusher {
	return &flusher{e: e, opts: e.opts, log: e.log, journal: e.journal, tree: e.tree, storeSize: storeSize,
		refused: map[string]uint64{}, deleteSeen: map[string]deleteWatch{}}
}

type tickOptions struct {
	deletes    bool // send deletes that are due
	waiveDelay bool // send deletes without the 30 s / confirming-tick wait (clean end)
	final      bool
}

// SyncResult counts what one pass did and left.
type SyncResult struct {
	Uploaded, Deleted, Failed int
	// Left is how many pending changes remain after the pass.
	Left int
	// DeletesPending is how many deletes were not sent (not due, capped, or not asked for).
	DeletesPending int
}

// op is one planned request.
type op struct {
	kind    string // create, update, delete
	entry   journal.Entry
	replace *journal.Entry // update: a pending delete at the same path folded into this create
}

// plan turns pending entries into requests. An entry that deletes memory
// M at path P and a new file created at P in the same pass become one
// update of M (an editor's atomic save keeps the memory's id).
func (f *flusher) plan(pending []journal.Entry) (ops []op, deletes []journal.Entry) {
	createAt := map[string]int{} // path -> index in ops of a create
	var dels []journal.Entry
	for _, e := range pending {
		if lsn, ok := f.refused[e.FileID]; ok && lsn == e.LSN {
			continue
		}
		switch {
		case e.Deleted && e.Origin == "":
			// never uploaded; nothing to do
		case e.Deleted:
			dels = append(dels, e)
		case !utf8.Valid(e.Content):
			// kept locally, not uploaded until it is valid (the filesystem warned)
		case e.Origin == "":
			createAt[e.Path] = len(ops)
			ops = append(ops, op{kind: "create", entry: e})
		default:
			ops = append(ops, op{kind: "update", entry: e})
		}
	}
	for _, d := range dels {
		if i, ok := createAt[d.Path]; ok && ops[i].replace == nil {
			d := d
			ops[i].kind, ops[i].replace = "update", &d
			continue
		}
		deletes = append(deletes, d)
	}
	return ops, deletes
}

// verdict is what a failed change means for the next pass.
type verdict int

const (
	transientFailure verdict = iota // retried next pass; counts toward an outage
	refusedFailure                  // the store refused the content: retried once it changes
	conflictFailure                 // the store changed it too: the store wins
	pathFailure                     // a path conflict: retried after the pass's other changes
)

// tick runs one pass: uploads (bounded concurrency), then the deletes that
// are due, within the per-pass cap; then it resolves, store-wins, every
// change the store refused because it changed the memory too.
func (f *flusher) tick(ctx context.Context, to tickOptions) SyncResult {
	f.e.syncMu.Lock()
	defer f.e.syncMu.Unlock()
	f.ticks++
	pending := f.journal.Pending()
	f.moving = map[string]bool{}
	for _, p := range pending {
		if p.Origin != "" {
			f.moving[p.Origin] = true
		}
	}
	ops, deletes := f.plan(pending)
	var res SyncResult
	var mu sync.Mutex // orders the goroutines' updates of res, retry, conflicted, transient
	transient := 0
	var retry []op
	var conflicted []string // memory ids
	record := func(o op, err error, again bool) {
		if err == nil {
			res.Uploaded++
			if o.kind == "create" {
				f.storeSize++
			}
			return
		}
		switch f.judge(o.entry, err) {
		case pathFailure:
			if !again {
				retry = append(retry, o)
				return
			}
		case conflictFailure:
			conflicted = append(conflicted, o.target())
		case transientFailure:
			transient++
		}
		res.Failed++
	}
	sem := make(chan struct{}, f.opts.Concurrency)
	var wg sync.WaitGroup
	for _, o := range ops {
		wg.Add(1)
		sem <- struct{}{}
		go func(o op) {
			defer wg.Done()
			defer func() { <-sem }()
			err := f.upload(ctx, o)
			mu.Lock()
			defer mu.Unlock()
			record(o, err, false)
		}(o)
	}
	wg.Wait()
	d, pendingDeletes, derr, dconf := f.sendDeletes(ctx, deletes, to)
	res.Deleted += d
	res.DeletesPending = pendingDeletes
	transient += derr
	conflicted = append(conflicted, dconf...)
	// Path conflicts between this pass's own changes (a file moved onto a
	// path another change frees: a move, or a delete sent just now, as in
	// a rename over an existing file) resolve in a second, sequential
	// round, after the deletes.
	sort.Slice(retry, func(i, j int) bool { return retry[i].entry.LSN < retry[j].entry.LSN })
	for _, o := range retry {
		record(o, f.upload(ctx, o), true)
	}
	if !to.final || to.deletes {
		// The store changed these memories too: the store wins, the local
		// versions go to the conflict log. (Not on an unclean end, which
		// only pushes writes.)
		for _, id := range conflicted {
			if err := f.e.resolve(ctx, id); err != nil {
				transient++
			}
		}
	}
	switch {
	case transient > 0:
		f.e.outage.fail(fmt.Errorf("%d change(s) could not be uploaded", transient))
	case res.Uploaded+res.Deleted > 0:
		f.e.outage.ok()
	}
	res.Left = len(f.journal.Pending())
	return res
}

// target is the memory an update or delete op is about.
func (o op) target() string {
	if o.replace != nil {
		return o.replace.Origin
	}
	return o.entry.Origin
}

// upload sends one create or update and confirms it in the journal. The
// sha it sends is remembered until seen again, so the overlay doesn't take
// our own write for a remote edit.
func (f *flusher) upload(ctx context.Context, o op) error {
	e := o.entry
	content := string(e.Content)
	if o.kind == "create" {
		f.noteCreate(e.Path, store.SHA256Hex(content))
		m, err := f.opts.Store.CreateMemory(ctx, f.opts.StoreID, e.Path, content)
		if err != nil {
			return err
		}
		if f.othersMemory(e, m) {
			return store.PathConflict(e.Path, m.ID, m.Path)
		}
		return f.confirm(e, m)
	}
	origin, base := o.target(), e.BaseSHA
	if o.replace != nil {
		base = o.replace.BaseSHA
	}
	f.noteSent(origin, store.SHA256Hex(content))
	m, err := f.opts.Store.UpdateMemory(ctx, f.opts.StoreID, origin, store.UpdateMemoryInput{
		Content: &content, Path: &e.Path, ExpectedSHA256: &base})
	if errors.Is(err, store.ErrNotFound) {
		// Deleted in the store meanwhile: the local file is the only copy.
		f.noteCreate(e.Path, store.SHA256Hex(content))
		m, err = f.opts.Store.CreateMemory(ctx, f.opts.StoreID, e.Path, content)
		if err == nil {
			f.forget(origin)
		}
	}
	if err != nil {
		return err
	}
	if o.replace != nil {
		if err := f.journal.Confirm(o.replace.FileID, o.replace.LSN, "", "", o.replace.Path); err != nil {
			return err
		}
	}
	return f.confirm(e, m)
}

// othersMemory reports whether m, which a create of e returned, is the
// memory of another local file whose move or delete was pending when the
// pass began. The client takes a memory already at the path with the same
// bytes for our own earlier create whose response was lost; but this one
// is still where another file of this mount left it ("mv a b; touch a",
// two empty files): adopting it would bind two files to one memory and
// lose e when the other's change goes up. It is a path conflict instead,
// retried once the other change is uploaded. (Decided on the pass's
// starting state: the other change may be confirmed by a concurrent
// upload between the create and this check.)
func (f *flusher) othersMemory(e journal.Entry, m *store.Memory) bool {
	return e.Origin == "" && f.moving[m.ID]
}

// noteSent and forget change the merge state from upload goroutines.
func (f *flusher) noteSent(memoryID, sha string) {
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	f.e.ms.noteSent(memoryID, sha)
}

func (f *flusher) noteCreate(path, sha string) {
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	f.e.ms.created[path] = sha
}

func (f *flusher) forget(memoryID string) {
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	f.e.ms.forget(memoryID)
}

// confirm settles an upload the store answered. The answer is a look at
// the store: what we sent is no longer to be recognized as our own write
// (a later identical write by someone else is a remote edit).
func (f *flusher) confirm(e journal.Entry, m *store.Memory) error {
	f.sentMu.Lock()
	delete(f.refused, e.FileID)
	f.e.ms.agree(e.FileID, m)
	delete(f.e.ms.sent, m.ID)
	delete(f.e.ms.created, e.Path)
	f.sentMu.Unlock()
	if err := f.journal.Confirm(e.FileID, e.LSN, m.ID, m.ContentSHA256, m.Path); err != nil && !errors.Is(err, journal.ErrNotPending) {
		return err
	}
	return nil
}

// judge classifies a failed change and warns once per refused file.
func (f *flusher) judge(e journal.Entry, err error) verdict {
	l := f.log.WithFields(logrus.Fields{"path": e.Path})
	switch {
	case errors.Is(err, store.ErrPathConflict):
		return pathFailure
	case errors.Is(err, store.ErrPreconditionFailed):
		return conflictFailure
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrLimit):
		if lsn, warned := f.refused[e.FileID]; !warned || lsn != e.LSN {
			l.WithError(err).Warn("the store refused this file; it stays local and is retried once it changes")
		}
		f.refused[e.FileID] = e.LSN
		return refusedFailure
	case errors.Is(err, store.ErrForbidden), errors.Is(err, store.ErrUnauthorized):
		if !f.e.outage.isDown() {
			l.WithError(err).Warn("the store refused the credential for this change (token expired or store archived?); it stays journaled and is retried")
		}
	}
	return transientFailure
}

// deleteCap is how many deletes one pass may send: a quarter of the store,
// at least 8, at most 50.
func deleteCap(storeSize int) int {
	return min(max(storeSize/4, 8), 50)
}

// sendDeletes applies the deletion mode, the 30 s + confirming-tick rule,
// the whole-store guard and the per-tick cap. It returns how many were
// sent, how many remain, and how many failed transiently.
func (f *flusher) sendDeletes(ctx context.Context, dels []journal.Entry, to tickOptions) (sent, left, transient int, conflicted []string) {
	now := time.Now()
	live := map[string]bool{}
	for _, d := range dels {
		live[d.FileID] = true
	}
	for id := range f.deleteSeen {
		if !live[id] {
			delete(f.deleteSeen, id) // reappeared or settled: cancel the watch
		}
	}
	if len(dels) == 0 {
		return 0, 0, 0, nil
	}
	if !to.deletes {
		return 0, len(dels), 0, nil
	}
	if f.storeSize >= 2 && len(dels) >= f.storeSize && f.tree.FileCount() == 0 {
		f.log.WithField("files", len(dels)).Warn("every file of the store disappeared at once: treated as an accident, nothing is deleted in the store; the files are restored from the store")
		for _, d := range dels {
			if err := f.e.restore(ctx, d); err != nil {
				transient++
			}
		}
		return 0, len(dels), transient, nil
	}
	var due []journal.Entry
	for _, d := range dels {
		w, ok := f.deleteSeen[d.FileID]
		if !ok || w.lsn != d.LSN {
			w = deleteWatch{lsn: d.LSN, tick: f.ticks, at: now}
			f.deleteSeen[d.FileID] = w
		}
		if to.waiveDelay || (now.Sub(w.at) >= f.opts.DeleteDelay && f.ticks > w.tick) {
			due = append(due, d)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].LSN < due[j].LSN })
	limit := deleteCap(f.storeSize)
	if len(due) > limit {
		f.log.WithFields(logrus.Fields{"sending": limit, "held_back": len(due) - limit}).Warn("deletions held back by the per-pass cap; the rest follow on later passes")
		due = due[:limit]
	}
	for _, d := range due {
		switch f.opts.Deletions {
		case DeletionsDisabled:
			// Never delete in the store; the file stays gone locally.
			f.settleDelete(d)
			continue
		case DeletionsLogOnly:
			f.log.WithField("path", d.Path).Warn("would delete memory " + d.Path)
			f.settleDelete(d)
			continue
		}
		sha := d.BaseSHA
		err := f.opts.Store.DeleteMemory(ctx, f.opts.StoreID, d.Origin, &sha)
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			f.settleDelete(d)
			f.e.ms.forget(d.Origin)
			sent++
			f.storeSize--
		case errors.Is(err, store.ErrPreconditionFailed):
			// The store changed it: the store's version comes back.
			conflicted = append(conflicted, d.Origin)
		default:
			if f.judge(d, err) == transientFailure {
				transient++
			}
		}
	}
	return sent, len(dels) - sent, transient, conflicted
}

// settleDelete releases a pending delete (sent, or not to be sent).
func (f *flusher) settleDelete(d journal.Entry) {
	delete(f.deleteSeen, d.FileID)
	if err := f.journal.Confirm(d.FileID, d.LSN, "", "", d.Path); err != nil && !errors.Is(err, journal.ErrNotPending) {
		f.log.WithError(err).WithField("path", d.Path).Error("could not record a settled delete in the journal")
	}
}
