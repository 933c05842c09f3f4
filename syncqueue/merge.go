package syncqueue

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// memState is what the local copy last agreed with the store on, for one
// memory: its path and content_sha256 (the "base" of docs/sync.md, "Words").
type memState struct {
	path, sha string
}

// mergeState is the engine's view of the store, GUARDED_BY(Engine.syncMu):
// the flusher and the overlay both take syncMu before changing it, the
// journal or the tree on behalf of the store — and never hold it across a
// request to the store.
type mergeState struct {
	known    map[string]memState // memory id -> base
	byMemory map[string]string   // memory id -> local file id
	// gen counts, per memory, the changes of known and byMemory. A
	// request made without the lock (a fetch, an upload) notes it before
	// and compares after: a memory whose gen moved meanwhile was settled
	// by someone else, and the answer may be older than what was applied.
	gen map[string]uint64
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
	return mergeState{known: map[string]memState{}, byMemory: map[string]string{}, gen: map[string]uint64{},
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
	s.gen[m.ID]++
}

func (s *mergeState) forget(memoryID string) {
	delete(s.known, memoryID)
	delete(s.byMemory, memoryID)
	delete(s.sent, memoryID)
	s.gen[memoryID]++
}

// agrees reports whether the store's m is exactly what was agreed on.
func (s *mergeState) agrees(m *store.Memory) bool {
	k, ok := s.known[m.ID]
	return ok && k.sha == m.ContentSHA256 && k.path == m.Path
}

// carries reports whether the local file fileID is still a memory's copy
// at path: it stands there, or it has a change pending (a move, or the
// delete an atomic save left when it replaced the file).
//
// REQUIRES: e.syncMu held.
func (e *Engine) carries(fileID, path string) bool {
	if id, isDir, ok := e.tree.At(path); ok && !isDir && id == fileID {
		return true
	}
	_, pending := e.pendingOf(fileID)
	return pending
}

// pendingOf returns the journal's pending entry of a file, if any.
func (e *Engine) pendingOf(fileID string) (journal.Entry, bool) {
	if fileID == "" || e.journal == nil {
		return journal.Entry{}, false
	}
	return e.journal.Lookup(fileID)
}

// applyRemote merges the store's state of one memory into the local copy,
// by the rule table of docs/sync.md (R1-R18): m is the memory as the store holds it
// now, or nil when it is gone. The store wins every collision; a losing
// local version goes to the conflict log. Each row of the table is one
// function below.
//
// It fails — settling nothing, so that the change is merged again later —
// when a local version can't be kept: the conflict log can't be written,
// or writes through a handle still open can't be journaled (a full state
// dir). A local file is never replaced before its content is safe.
//
// REQUIRES: e.syncMu held.
func (e *Engine) applyRemote(memoryID string, m *store.Memory) error {
	if m == nil && e.f != nil {
		e.f.capw.roomSeen() // a delete: creates waiting at the cap try again (capwait.go)
	}
	fileID, local := e.ms.byMemory[memoryID]
	if local {
		if err := e.commitOpen(fileID); err != nil {
			return err
		}
	}
	switch {
	case m == nil && !local:
		return nil // deleted/deleted, or never seen here
	case m == nil:
		return e.storeDeleted(memoryID, fileID)
	case !local:
		return e.storeNew(m)
	}
	log := e.log.WithFields(logrus.Fields{"memory_id": memoryID, "path": m.Path})
	p, pending := e.pendingOf(fileID)
	ours := e.ms.sent[memoryID][m.ContentSHA256]
	if ours {
		// Our own write coming back (perhaps its response was lost): not
		// a remote edit.
		e.ms.seen(memoryID, m.ContentSHA256)
	}
	if ours && pending && !p.Deleted && p.Origin == memoryID && p.BaseSHA != m.ContentSHA256 {
		return e.ourWriteBack(fileID, p, m, log)
	}
	agreed := e.ms.agrees(m)
	if pending && p.Deleted && (ours || agreed) {
		return e.deletedAfterOurWrite(fileID, p, m, log)
	}
	if (agreed || ours) && (!pending || p.Deleted || p.Origin == "" || p.BaseSHA == m.ContentSHA256) {
		// Nothing new for the local copy (the local change, if any, was
		// made against this very state and goes up as it is).
		if ours && !agreed {
			e.ms.agree(fileID, m)
		}
		return nil
	}
	if err := e.displace(m, fileID); err != nil {
		return err
	}
	var err error
	switch {
	case !pending:
		err = e.takeStore(fileID, m)
	case p.Deleted:
		err = e.restoreDeletedHere(p, m, log)
	case p.Path == m.Path && store.SHA256Hex(string(p.Content)) == m.ContentSHA256:
		err = e.adopt(p, m)
	default:
		err = e.storeWins(fileID, p, m, "changed here and in the store")
	}
	if err != nil {
		return err
	}
	e.ms.agree(fileID, m)
	return nil
}

// ourWriteBack: the store holds a write we sent, and the file's pending
// entry was made against an older base. Either the entry is exactly what
// we sent (its upload is still being answered): it is settled; or the
// file changed again on top of it: the newer change is rebased on our
// write, so its upload carries the right precondition.
//
// REQUIRES: e.syncMu held.
func (e *Engine) ourWriteBack(fileID string, p journal.Entry, m *store.Memory, log logrus.FieldLogger) error {
	if p.Path == m.Path && store.SHA256Hex(string(p.Content)) == m.ContentSHA256 {
		e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	} else if err := e.journal.Rebase(fileID, m.ID, m.ContentSHA256); err != nil {
		log.WithError(err).Error("could not rebase a pending change in the journal")
	}
	e.ms.agree(fileID, m)
	return nil
}

// deletedAfterOurWrite: the store holds a write of ours (or a state this
// mount agreed on) for a memory whose file here is pending delete. Either the write was an editor's atomic save
// folded into an update of the memory (the new file stands at the
// memory's path with exactly its bytes): the delete and the new file are
// settled, and the new file is the memory's copy; or the file was deleted
// after its update was sent: the delete is rebased on that update (if it
// was made against an older base), so its precondition holds. Without this the delete's precondition fails
// for ever, and the memory stays bound to a file that is gone.
//
// REQUIRES: e.syncMu held.
func (e *Engine) deletedAfterOurWrite(fileID string, p journal.Entry, m *store.Memory, log logrus.FieldLogger) error {
	e.ms.seen(m.ID, m.ContentSHA256)
	if id, isDir, ok := e.tree.At(m.Path); ok && !isDir && id != "" && id != fileID {
		if lp, ok := e.pendingOf(id); ok && !lp.Deleted && lp.Origin == "" && lp.Path == m.Path &&
			store.SHA256Hex(string(lp.Content)) == m.ContentSHA256 {
			e.confirm(p, "", "", p.Path)
			e.confirm(lp, m.ID, m.ContentSHA256, m.Path)
			e.ms.agree(id, m)
			return nil
		}
	}
	if p.BaseSHA != m.ContentSHA256 {
		if err := e.journal.Rebase(fileID, m.ID, m.ContentSHA256); err != nil {
			log.WithError(err).Error("could not rebase a pending delete in the journal")
		}
	}
	e.ms.agree(fileID, m)
	return nil
}

// takeStore — store changed, local unchanged: take the store's version.
//
// REQUIRES: e.syncMu held.
func (e *Engine) takeStore(fileID string, m *store.Memory) error {
	e.treeApply(fs.Change{FileID: fileID, Path: m.Path, Content: contentBytes(m)})
	e.setBase(fileID, m)
	return nil
}

// restoreDeletedHere — store changed, local deleted: the store's version
// comes back (a delete is the one change safe to lose).
//
// REQUIRES: e.syncMu held.
func (e *Engine) restoreDeletedHere(p journal.Entry, m *store.Memory, log logrus.FieldLogger) error {
	log.Warn("the memory changed in the store after it was deleted here: the store's version is restored")
	e.treeApply(fs.Change{FileID: p.FileID, Path: m.Path, Content: contentBytes(m)})
	e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	return nil
}

// adopt — changed to the same bytes (and path) on both sides: adopt
// silently, no upload, no conflict.
//
// REQUIRES: e.syncMu held.
func (e *Engine) adopt(p journal.Entry, m *store.Memory) error {
	e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	return nil
}

// storeWins — changed on both sides (or an upload refused 409): the local
// file takes the store's version, the local version goes to the conflict
// log first.
//
// REQUIRES: e.syncMu held.
func (e *Engine) storeWins(fileID string, p journal.Entry, m *store.Memory, reason string) error {
	if err := e.keepConflict(p, m, reason); err != nil {
		return err
	}
	e.treeApply(fs.Change{FileID: fileID, Path: m.Path, Content: contentBytes(m)})
	e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	return nil
}

// storeDeleted handles a memory gone from the store whose file is here:
//   - local unchanged: the local file goes;
//   - local deleted too: nothing to do but settle;
//   - local changed (writable store): the local file is the only copy, and
//     it is created again;
//   - a read-only mount can't have changed it: the file goes.
//
// REQUIRES: e.syncMu held.
func (e *Engine) storeDeleted(memoryID, fileID string) error {
	e.ms.forget(memoryID)
	p, pending := e.pendingOf(fileID)
	switch {
	case !pending || e.opts.ReadOnly:
		e.treeApply(fs.Change{FileID: fileID, Deleted: true})
	case p.Deleted:
		e.confirm(p, "", "", p.Path)
	default:
		log := e.log.WithFields(logrus.Fields{"memory_id": memoryID, "path": p.Path})
		if err := e.journal.Rebase(fileID, "", ""); err != nil {
			log.WithError(err).Error("could not journal the re-creation of a memory deleted in the store")
			return nil
		}
		log.Warn("the memory was deleted in the store but changed here: it will be created again from the local file")
	}
	return nil
}

// storeNew places a memory new to this mount. A file created here, not
// yet uploaded, may already stand at its path: our own create whose
// answer was lost (recognised, adopted or rebased), the same bytes
// (adopted), or other bytes (store wins, the local file to the conflict
// log). A directory at its path keeps the memory out until one moves.
//
// REQUIRES: e.syncMu held.
func (e *Engine) storeNew(m *store.Memory) error {
	log := e.log.WithFields(logrus.Fields{"memory_id": m.ID, "path": m.Path})
	ourCreate := e.ms.created[m.Path] == m.ContentSHA256
	delete(e.ms.created, m.Path)
	id, isDir, ok := e.tree.At(m.Path)
	if ok && isDir {
		log.Warn("the store has a memory where this mount has a directory; skipped until one of them moves")
		return nil
	}
	if ok && id != "" {
		if err := e.commitOpen(id); err != nil {
			return err
		}
		if lp, ok := e.pendingOf(id); ok && !lp.Deleted && lp.Origin == "" {
			same := store.SHA256Hex(string(lp.Content)) == m.ContentSHA256
			switch {
			case ourCreate && !same:
				// Our own create, whose answer was lost, and the file
				// changed again since: the newer content goes up on top
				// of it, as an update of that memory.
				if err := e.journal.Rebase(id, m.ID, m.ContentSHA256); err != nil {
					log.WithError(err).Error("could not rebase a pending change in the journal")
				}
			case !same:
				if err := e.storeWins(id, lp, m, "created here and in the store at the same path"); err != nil {
					return err
				}
			default:
				e.confirm(lp, m.ID, m.ContentSHA256, m.Path)
			}
			e.ms.agree(id, m)
			return nil
		}
	}
	if err := e.displace(m, m.ID); err != nil {
		return err
	}
	e.treeApply(fs.Change{FileID: m.ID, Path: m.Path, Content: contentBytes(m)})
	e.setBase(m.ID, m)
	e.ms.agree(m.ID, m)
	return nil
}

// adoptSame settles, without fetching anything, a memory the store now
// holds at path with sha when the local file there is pending with exactly
// those bytes (changed to the same bytes on both sides, or our own write
// whose response was lost): docs/sync.md, R7 and R17, "adopt silently:
// settle, no upload, no conflict". It reports whether it did; if not, the caller fetches the
// memory and merges it with applyRemote.
//
// REQUIRES: e.syncMu held.
func (e *Engine) adoptSame(memoryID, path, sha string) bool {
	if e.journal == nil {
		return false
	}
	fileID, local := e.ms.byMemory[memoryID]
	if !local {
		// A memory new to this mount, where a file created here may stand.
		id, isDir, ok := e.tree.At(path)
		if !ok || isDir || id == "" {
			return false
		}
		fileID = id
	}
	p, pending := e.pendingOf(fileID)
	if !pending || p.Deleted || p.Path != path || (!local && p.Origin != "") || store.SHA256Hex(string(p.Content)) != sha {
		return false
	}
	e.confirm(p, memoryID, sha, path)
	e.ms.agree(fileID, &store.Memory{ID: memoryID, Path: path, ContentSHA256: sha})
	e.ms.seen(memoryID, sha)
	if !local {
		delete(e.ms.created, path)
	}
	return true
}

// displace makes room for memory m at its path when another local file
// stands there (the store moved or created m there while that file was
// made or changed here): the store wins. If that file has unsynced
// changes, its content goes to the conflict log (unless it is m's very
// bytes) and its pending change is settled — otherwise applying m would
// drop it from the tree unseen, and its upload would fail on the taken
// path for ever. The caller then applies m, which replaces the file.
//
// REQUIRES: e.syncMu held.
func (e *Engine) displace(m *store.Memory, fileID string) error {
	id, isDir, ok := e.tree.At(m.Path)
	if !ok || isDir || id == "" || id == fileID {
		return nil
	}
	if err := e.commitOpen(id); err != nil {
		return err
	}
	p, pending := e.pendingOf(id)
	if !pending || p.Deleted {
		return nil
	}
	if store.SHA256Hex(string(p.Content)) != m.ContentSHA256 {
		if err := e.keepConflict(p, m, "the store put another memory at this path"); err != nil {
			return err
		}
	}
	e.confirm(p, "", "", p.Path)
	return nil
}

// commitOpen journals what was written to a file and not journaled yet —
// through a handle not yet closed, or a close the journal could not take
// — before a remote change is merged into it (fs.Tree.CommitFile): those
// writes are a local change like any other. If they can't be journaled,
// the file must not be touched: the error makes the caller leave it, and
// the remote change is merged again later.
//
// REQUIRES: e.syncMu held.
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

// confirm settles a pending entry on the store's state.
func (e *Engine) confirm(p journal.Entry, memoryID, sha, path string) {
	if err := e.journal.Confirm(p.FileID, p.LSN, memoryID, sha, path); err != nil && !errors.Is(err, journal.ErrNotPending) {
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
