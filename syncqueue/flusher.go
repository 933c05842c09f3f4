package syncqueue

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// flusher uploads the journal's pending entries: the net change of every
// file since the store last confirmed it, not the history of operations.
// Only one tick runs at a time (tickMu).
type flusher struct {
	opts    EngineOptions
	log     logrus.FieldLogger
	journal *Journal
	tree    *fs.Tree

	tickMu sync.Mutex
	// Everything below is GUARDED_BY(tickMu).
	ticks      int
	storeSize  int                    // memories in the store as last seen (for the delete cap)
	refused    map[string]uint64      // fileID -> LSN the store refused (400/413); retried once it changes
	held       map[string]uint64      // fileID -> LSN held back by a conflict (until it changes)
	deleteSeen map[string]deleteWatch // fileID -> when a tick first saw its pending delete
	failing    int                    // consecutive ticks with transient failures
	failures   int                    // transient failures since the last success
}

type deleteWatch struct {
	lsn  uint64
	tick int
	at   time.Time
}

func newFlusher(opts EngineOptions, j *Journal, t *fs.Tree, storeSize int) *flusher {
	return &flusher{opts: opts, log: opts.Log, journal: j, tree: t, storeSize: storeSize,
		refused: map[string]uint64{}, held: map[string]uint64{}, deleteSeen: map[string]deleteWatch{}}
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
	entry   Entry
	replace *Entry // update: a pending delete at the same path folded into this create
}

// plan turns pending entries into requests. An entry that deletes memory
// M at path P and a new file created at P in the same pass become one
// update of M (an editor's atomic save keeps the memory's id).
func (f *flusher) plan(pending []Entry) (ops []op, deletes []Entry) {
	createAt := map[string]int{} // path -> index in ops of a create
	var dels []Entry
	for _, e := range pending {
		if lsn, ok := f.refused[e.FileID]; ok && lsn == e.LSN {
			continue
		}
		if lsn, ok := f.held[e.FileID]; ok && lsn == e.LSN {
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

// tick runs one pass: uploads (bounded concurrency), then the deletes that
// are due, within the per-tick cap.
func (f *flusher) tick(ctx context.Context, to tickOptions) SyncResult {
	f.tickMu.Lock()
	defer f.tickMu.Unlock()
	f.ticks++
	ops, deletes := f.plan(f.journal.Pending())
	var res SyncResult
	var mu sync.Mutex
	transient := 0
	sem := make(chan struct{}, f.opts.Concurrency)
	var wg sync.WaitGroup
	var retry []op
	for _, o := range ops {
		wg.Add(1)
		sem <- struct{}{}
		go func(o op) {
			defer wg.Done()
			defer func() { <-sem }()
			err := f.upload(ctx, o)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				res.Uploaded++
				if o.kind == "create" {
					f.storeSize++ // GUARDED_BY(tickMu), held by tick; mu orders the goroutines
				}
			case errors.Is(err, store.ErrPathConflict):
				retry = append(retry, o)
			case f.judge(o.entry, err):
				transient++
				res.Failed++
			default:
				res.Failed++
			}
		}(o)
	}
	wg.Wait()
	// Path conflicts between this pass's own changes (a file moved onto a
	// path another change frees) resolve in a second, sequential round.
	sort.Slice(retry, func(i, j int) bool { return retry[i].entry.LSN < retry[j].entry.LSN })
	for _, o := range retry {
		if err := f.upload(ctx, o); err == nil {
			res.Uploaded++
			if o.kind == "create" {
				f.storeSize++
			}
		} else {
			if f.judge(o.entry, err) {
				transient++
			}
			res.Failed++
		}
	}
	d, pendingDeletes, derr := f.sendDeletes(ctx, deletes, to)
	res.Deleted += d
	res.DeletesPending = pendingDeletes
	transient += derr
	f.noteOutage(transient, res.Uploaded+res.Deleted)
	res.Left = len(f.journal.Pending())
	return res
}

// upload sends one create or update and confirms it in the journal.
func (f *flusher) upload(ctx context.Context, o op) error {
	e := o.entry
	content := string(e.Content)
	switch o.kind {
	case "create":
		m, err := f.opts.Store.CreateMemory(ctx, f.opts.StoreID, e.Path, content)
		if err != nil {
			return err
		}
		return f.confirm(e, m)
	default:
		origin, base := e.Origin, e.BaseSHA
		if o.replace != nil {
			origin, base = o.replace.Origin, o.replace.BaseSHA
		}
		m, err := f.opts.Store.UpdateMemory(ctx, f.opts.StoreID, origin, store.UpdateMemoryInput{
			Content: &content, Path: &e.Path, ExpectedSHA256: &base})
		if errors.Is(err, store.ErrNotFound) {
			// Deleted in the store meanwhile: the local file is the only copy.
			m, err = f.opts.Store.CreateMemory(ctx, f.opts.StoreID, e.Path, content)
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
}

func (f *flusher) confirm(e Entry, m *store.Memory) error {
	delete(f.refused, e.FileID)
	delete(f.held, e.FileID)
	return f.journal.Confirm(e.FileID, e.LSN, m.ID, m.ContentSHA256, m.Path)
}

// judge classifies a failed change: it returns true for a transient
// failure (retried next pass); a refusal is flagged until the file changes.
func (f *flusher) judge(e Entry, err error) (transient bool) {
	l := f.log.WithFields(logrus.Fields{"path": e.Path})
	switch {
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge):
		if _, warned := f.refused[e.FileID]; !warned {
			l.WithError(err).Warn("the store refused this file; it stays local and is retried once it changes")
		}
		f.refused[e.FileID] = e.LSN
		return false
	case errors.Is(err, store.ErrPreconditionFailed):
		// The store changed this memory too. Store-wins resolution with a
		// conflict log comes with the remote overlay; until then the local
		// change is held, journaled, not overwritten.
		if _, warned := f.held[e.FileID]; !warned {
			l.WithError(err).Warn("conflict: the memory changed in the store too; the local change is kept in the journal")
		}
		f.held[e.FileID] = e.LSN
		return false
	case errors.Is(err, store.ErrForbidden), errors.Is(err, store.ErrUnauthorized):
		if f.failures == 0 {
			l.WithError(err).Warn("the store refused the credential for this change; it stays journaled and is retried")
		}
		return true
	case errors.Is(err, store.ErrLimit):
		if _, warned := f.refused[e.FileID]; !warned {
			l.WithError(err).Warn("the store is at its memory limit; the file stays local")
		}
		f.refused[e.FileID] = e.LSN
		return false
	}
	return true
}

// noteOutage logs "store unreachable" once (with a count) and "recovered" once.
func (f *flusher) noteOutage(transient, succeeded int) {
	switch {
	case transient > 0:
		f.failures += transient
		f.failing++
		if f.failing == 1 {
			f.log.WithField("failures", f.failures).Warn("store unreachable: changes stay journaled and are retried every interval")
		}
	case f.failing > 0:
		f.log.WithFields(logrus.Fields{"failures": f.failures, "passes": f.failing}).Info("store recovered: journaled changes are being uploaded")
		f.failing, f.failures = 0, 0
	}
}

// deleteCap is how many deletes one pass may send: a quarter of the store,
// at least 8, at most 50.
func deleteCap(storeSize int) int {
	return min(max(storeSize/4, 8), 50)
}

// sendDeletes applies the deletion mode, the 30 s + confirming-tick rule,
// the whole-store guard and the per-tick cap. It returns how many were
// sent, how many remain, and how many failed transiently.
func (f *flusher) sendDeletes(ctx context.Context, dels []Entry, to tickOptions) (sent, left, transient int) {
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
		return 0, 0, 0
	}
	if !to.deletes {
		return 0, len(dels), 0
	}
	if f.storeSize >= 2 && len(dels) >= f.storeSize && f.tree.FileCount() == 0 {
		f.log.WithField("files", len(dels)).Warn("every file of the store disappeared at once: treated as an accident, nothing is deleted in the store")
		return 0, len(dels), 0
	}
	var due []Entry
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
			// never delete in the store; the file stays gone locally
			f.journal.Confirm(d.FileID, d.LSN, "", "", d.Path) //nolint:errcheck
			continue
		case DeletionsLogOnly:
			f.log.WithField("path", d.Path).Warn("would delete memory " + d.Path)
			f.journal.Confirm(d.FileID, d.LSN, "", "", d.Path) //nolint:errcheck
			continue
		}
		sha := d.BaseSHA
		err := f.opts.Store.DeleteMemory(ctx, f.opts.StoreID, d.Origin, &sha)
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			f.journal.Confirm(d.FileID, d.LSN, "", "", d.Path) //nolint:errcheck
			delete(f.deleteSeen, d.FileID)
			sent++
			f.storeSize--
		case errors.Is(err, store.ErrPreconditionFailed):
			// The store changed it: the store's version comes back (with the overlay).
			f.held[d.FileID] = d.LSN
			f.log.WithField("path", d.Path).Warn("delete not sent: the memory changed in the store; the store's version wins")
		default:
			if f.judge(d, err) {
				transient++
			}
		}
	}
	return sent, len(dels) - sent, transient
}
