package syncqueue

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/syncqueue/reconcile"
)

// memState is what the local copy last agreed with the store on, for one
// memory: its path and content_sha256 (the "base" of docs/sync.md, "Words").
type memState struct {
	path, sha string
}

// mergeState is the engine's view of the store, the owner's alone
// (owner.go): the passes and the remote side change it, the journal and
// the tree on behalf of the store only on the owner, carrying out the
// answers of requests made in its pool.
type mergeState struct {
	known    map[string]memState // memory id -> base
	byMemory map[string]string   // memory id -> local file id
	// sent remembers, per memory, the sha of content we sent and have not
	// yet seen come back: a change carrying it is our own write, not a
	// remote edit (a lost response must not look like a conflict).
	sent map[string]map[string]bool
	// created is the same for creates, whose memory id we learn only from
	// the answer: path -> sha of the content of a create we sent and have
	// not yet seen answered, nor a memory at that path in the store.
	created map[string]string
}

func newMergeState() mergeState {
	return mergeState{known: map[string]memState{}, byMemory: map[string]string{},
		sent: map[string]map[string]bool{}, created: map[string]string{}}
}

func (s *mergeState) noteSent(memoryID, sha string) {
	if memoryID == "" {
		return
	}
	if s.sent[memoryID] == nil {
		s.sent[memoryID] = map[string]bool{}
	}
	s.sent[memoryID][sha] = true
}

// seen forgets one write we sent once the store shows it: a later
// identical write by someone else then counts as remote. Other writes of
// ours to the memory may still be on their way back (an editor saving
// again while the last save's update is answered): they stay known.
func (s *mergeState) seen(memoryID, sha string) {
	delete(s.sent[memoryID], sha)
	if len(s.sent[memoryID]) == 0 {
		delete(s.sent, memoryID)
	}
}

// agree records that the store holds memory m and the local file fileID
// is its copy.
func (s *mergeState) agree(fileID string, m *store.Memory) {
	s.known[m.ID] = memState{path: m.Path, sha: m.ContentSHA256}
	s.byMemory[m.ID] = fileID
}

func (s *mergeState) forget(memoryID string) {
	delete(s.known, memoryID)
	delete(s.byMemory, memoryID)
	delete(s.sent, memoryID)
}

// pendingOf returns the journal's pending entry of a file, if any.
func (e *Engine) pendingOf(fileID string) (journal.Entry, bool) {
	if fileID == "" || e.journal == nil {
		return journal.Entry{}, false
	}
	return e.journal.Lookup(fileID)
}

// applyRemote merges the store's state of one memory into the local copy,
// by the rule table of docs/sync.md (R1-R18): m is the memory as the store
// holds it now, or nil when it is gone. The decisions are the reconcile
// package's; this gathers their input and carries them out.
//
// It fails — settling nothing more, so that the change is merged again
// later — when a local version can't be kept: the conflict log can't be
// written, or writes through a handle still open can't be journaled (a
// full state dir). A local file is never replaced before its content is
// safe.
func (e *Engine) applyRemote(memoryID string, m *store.Memory) error {
	in, g := e.gather(memoryID, m)
	return e.execute(in, m, reconcile.Decide(in), g)
}

// adoptSame settles, without fetching anything, a memory the store now
// holds at path with sha when the local file there is pending with exactly
// those bytes (changed to the same bytes on both sides, or our own write
// whose response was lost): docs/sync.md, R7 and R17, "adopt silently:
// settle, no upload, no conflict". It reports whether it did; if not, the
// caller fetches the memory and merges it with applyRemote.
func (e *Engine) adoptSame(memoryID, path, sha string) bool {
	g := gathered{entries: map[string]journal.Entry{}}
	in := reconcile.Input{MemoryID: memoryID, Remote: &reconcile.State{Path: path, SHA: sha}}
	if fileID, local := e.ms.byMemory[memoryID]; local {
		in.FileID, in.Local = fileID, g.entry(e, fileID)
	} else if id, isDir, ok := e.tree.At(path); ok && !isDir && id != "" {
		p := g.entry(e, id)
		in.At = reconcile.Occupant{What: reconcile.File, FileID: id, Found: p, Pending: p}
	}
	acts := reconcile.DecideFeed(in)
	if len(acts) == 0 {
		return false
	}
	_ = e.execute(in, &store.Memory{ID: memoryID, Path: path, ContentSHA256: sha}, acts, g)
	return true
}

// gathered is what the executor needs of a merge's input beyond the
// decisions' view of it: the pending entries whole, by file id, and why
// the open writes of the memory's local copy could not be journaled.
type gathered struct {
	entries map[string]journal.Entry
	err     error
}

// entry reads the pending entry of fileID, keeps it whole in g and
// returns the decisions' view of it (nil: nothing pending).
func (g *gathered) entry(e *Engine, fileID string) *reconcile.Entry {
	p, ok := e.pendingOf(fileID)
	if !ok {
		return nil
	}
	g.entries[fileID] = p
	r := &reconcile.Entry{FileID: p.FileID, LSN: p.LSN, Path: p.Path, Deleted: p.Deleted, Origin: p.Origin, BaseSHA: p.BaseSHA}
	if !p.Deleted {
		r.SHA = store.SHA256Hex(string(p.Content))
	}
	return r
}

// gather reads the input of one merge from the engine's state, the
// journal and the tree. What was written to the memory's local copy
// through open handles is journaled first (commitOpen): those writes are
// a local change like any other. Those of a file standing at the remote
// path are journaled when a decision asks for it ([reconcile.Commit]).
func (e *Engine) gather(memoryID string, m *store.Memory) (reconcile.Input, gathered) {
	g := gathered{entries: map[string]journal.Entry{}}
	in := reconcile.Input{MemoryID: memoryID, ReadOnly: e.opts.ReadOnly}
	if k, ok := e.ms.known[memoryID]; ok {
		in.Base = &reconcile.State{Path: k.path, SHA: k.sha}
	}
	for sha := range e.ms.sent[memoryID] {
		in.Sent = append(in.Sent, sha)
	}
	if fileID, local := e.ms.byMemory[memoryID]; local {
		in.FileID = fileID
		if err := e.commitOpen(fileID); err != nil {
			in.CommitFailed, g.err = true, err
			return in, g // nothing else is read: the merge waits
		}
		in.Local = g.entry(e, fileID)
	}
	if m == nil {
		return in, g
	}
	in.Remote = &reconcile.State{Path: m.Path, SHA: m.ContentSHA256}
	in.SentCreate = e.ms.created[m.Path]
	id, isDir, ok := e.tree.At(m.Path)
	switch {
	case ok && isDir:
		in.At.What = reconcile.Directory
	case ok && id != "":
		in.At = reconcile.Occupant{What: reconcile.File, FileID: id}
		if id != in.FileID {
			in.At.Found = g.entry(e, id)
			in.At.Pending = in.At.Found
		}
	}
	return in, g
}

// execute carries out the actions decided on in, in order, with m the
// store's state of the memory (nil when gone). It stops at the first that
// fails.
func (e *Engine) execute(in reconcile.Input, m *store.Memory, acts []reconcile.Action, g gathered) error {
	log := e.log.WithField("memory_id", in.MemoryID)
	for _, a := range acts {
		switch a.Kind {
		case reconcile.Skip:
		case reconcile.RoomSeen:
			if e.f != nil {
				e.f.capw.roomSeen() // a delete: creates waiting at the cap try again (capwait.go)
			}
		case reconcile.Fail:
			return g.err
		case reconcile.Apply:
			e.treeApply(fs.Change{FileID: a.FileID, Path: a.Path, Content: contentBytes(m)})
		case reconcile.Remove:
			e.treeApply(fs.Change{FileID: a.FileID, Deleted: true})
		case reconcile.Confirm:
			e.confirm(a.FileID, a.LSN, a.MemoryID, a.SHA, a.Path)
		case reconcile.Rebase:
			if err := e.journal.Rebase(a.FileID, a.MemoryID, a.SHA); err != nil {
				log.WithField("path", a.Path).WithError(err).Error(a.Reason)
				if a.StopOnFail {
					return nil
				}
			}
		case reconcile.KeepConflict:
			if err := e.keepConflict(g.entries[a.FileID], m, a.Reason); err != nil {
				return err
			}
		case reconcile.SetBase:
			e.setBase(a.FileID, m)
		case reconcile.Agree:
			e.ms.agree(a.FileID, m)
		case reconcile.Forget:
			e.ms.forget(a.MemoryID)
		case reconcile.Seen:
			e.ms.seen(a.MemoryID, a.SHA)
		case reconcile.SeenCreate:
			delete(e.ms.created, a.Path)
		case reconcile.Warn:
			log.WithField("path", a.Path).Warn(a.Reason)
		case reconcile.Commit:
			if err := e.commitOpen(a.FileID); err != nil {
				return err
			}
			in.At.Committed, in.At.Pending = true, g.entry(e, a.FileID)
			return e.execute(in, m, reconcile.Decide(in), g)
		}
	}
	return nil
}

// commitOpen journals what was written to a file and not journaled yet —
// through a handle not yet closed, or a close the journal could not take
// — before a remote change is merged into it (fs.Tree.CommitFile): those
// writes are a local change like any other. If they can't be journaled,
// the file must not be touched: the error makes the caller leave it, and
// the remote change is merged again later.
func (e *Engine) commitOpen(fileID string) error {
	if e.journal == nil || fileID == "" {
		return nil
	}
	if err := e.tree.CommitFile(fileID); err != nil {
		return localError{fmt.Errorf("a local file has writes the journal can't take yet, so the store's change to it waits: %w", err)}
	}
	return nil
}

// treeApply applies one change to the tree, logging what it can't show.
func (e *Engine) treeApply(c fs.Change) {
	if err := e.tree.Apply([]fs.Change{c}); err != nil {
		e.log.WithError(err).Warn("a change from the store can't be shown on the mount")
		return
	}
	e.opts.Observer.RemoteApplied()
}

// confirm settles the pending entry of fileID made by the record lsn on
// the store's state.
func (e *Engine) confirm(fileID string, lsn uint64, memoryID, sha, path string) {
	if err := e.journal.Confirm(fileID, lsn, memoryID, sha, path); err != nil && !errors.Is(err, journal.ErrNotPending) {
		e.log.WithError(err).WithField("path", path).Error("could not record a resolved change in the journal")
	}
}

// keepConflict puts the losing local version in the conflict log and
// warns once. If the log can't be written it returns the error, and the
// caller settles nothing: the local content is still in the journal.
func (e *Engine) keepConflict(p journal.Entry, m *store.Memory, reason string) error {
	c, err := e.conflicts.Add(Conflict{StoreID: e.opts.StoreID, Path: p.Path, LocalSHA: store.SHA256Hex(string(p.Content)),
		StoreSHA: m.ContentSHA256, StoreMemoryID: m.ID, Reason: reason}, p.Content)
	fields := logrus.Fields{"path": p.Path, "local_sha256": c.LocalSHA, "store_sha256": m.ContentSHA256}
	if err != nil {
		e.log.WithFields(fields).WithError(err).Error("conflict: could not keep the local version; it stays journaled")
		return localError{err}
	}
	e.opts.Observer.ConflictKept()
	e.log.WithFields(fields).WithField("conflict", c.ID).Warn("conflict: the store's version won; the local version is kept in the conflict log (memfs conflicts show " + c.ID + ")")
	return nil
}

// setBase tells the journal (if any) what a file's memory now holds.
func (e *Engine) setBase(fileID string, m *store.Memory) {
	if e.journal != nil {
		e.journal.SetBase(fileID, m.ID, m.ContentSHA256)
	}
}
