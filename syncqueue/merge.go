package syncqueue

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// memState is what the local copy last agreed with the store on, for one
// memory: its path and content_sha256 (the "base" of sync.md).
type memState struct {
	path, sha string
}

// mergeState is the engine's view of the store, GUARDED_BY(Engine.syncMu):
// the flusher and the overlay both take syncMu before changing it, the
// journal or the tree on behalf of the store.
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
	return mergeState{known: map[string]memState{}, byMemory: map[string]string{}, sent: map[string]map[string]bool{}, created: map[string]string{}}
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
	for _, p := range e.journal.Pending() {
		if p.FileID == fileID {
			return p, true
		}
	}
	return journal.Entry{}, false
}

// applyRemote merges the store's state of one memory into the local copy,
// by the rules of sync.md: m is the memory as the store holds it now, or
// nil when it is gone. The store wins every collision; a losing local
// version goes to the conflict log.
//
// It fails only when the conflict log can't be written; then nothing is
// settled and the local version stays journaled.
//
// REQUIRES: e.syncMu held.
func (e *Engine) applyRemote(memoryID string, m *store.Memory) error {
	ms := &e.ms
	log := e.log.WithField("memory_id", memoryID)
	fileID, local := ms.byMemory[memoryID]
	if local {
		e.commitOpen(fileID)
	}
	p, pending := e.pendingOf(fileID)
	if m != nil {
		log = log.WithField("path", m.Path)
		ours := ms.sent[memoryID][m.ContentSHA256]
		if ours {
			// Our own write coming back (perhaps its response was lost):
			// not a remote edit. Forget it now, so that a later identical
			// write by someone else counts as remote.
			delete(ms.sent, memoryID)
		}
		k, ok := ms.known[memoryID]
		agreed := ok && k.sha == m.ContentSHA256 && k.path == m.Path
		// Nothing new — unless a pending change was made against another
		// base (it raced with an earlier remote change): that one must be
		// resolved now or it would be refused for ever.
		if ours && local && pending && !p.Deleted && p.Origin == memoryID && p.BaseSHA != m.ContentSHA256 {
			// A newer local change was made on top of our own write.
			if err := e.journal.Rebase(fileID, m.ID, m.ContentSHA256); err != nil {
				log.WithError(err).Error("could not rebase a pending change in the journal")
			}
			ms.agree(fileID, m)
			return nil
		}
		if (agreed || ours) && (!pending || p.Deleted || p.Origin == "" || p.BaseSHA == m.ContentSHA256) {
			if ours && !agreed && local {
				ms.agree(fileID, m)
			}
			return nil
		}
	}

	if m == nil { // deleted in the store
		if !local {
			return nil
		}
		ms.forget(memoryID)
		switch {
		case !pending:
			e.treeApply(fs.Change{FileID: fileID, Deleted: true})
		case p.Deleted:
			e.confirm(p, "", "", p.Path) // deleted on both sides
		case e.opts.ReadOnly:
			e.treeApply(fs.Change{FileID: fileID, Deleted: true})
		default:
			// Changed here, deleted there: the local file is the only copy.
			if err := e.journal.Rebase(fileID, "", ""); err != nil {
				log.WithError(err).Error("could not journal the re-creation of a memory deleted in the store")
				return nil
			}
			log.Warn("the memory was deleted in the store but changed here: it will be created again from the local file")
		}
		return nil
	}

	content := []byte(*m.Content)
	if !local {
		// A memory new to this mount. A local file may already stand at
		// its path (created here, not yet uploaded).
		ourCreate := ms.created[m.Path] == m.ContentSHA256
		delete(ms.created, m.Path)
		if id, isDir, ok := e.tree.At(m.Path); ok && !isDir && id != "" {
			e.commitOpen(id)
			if lp, ok := e.pendingOf(id); ok && !lp.Deleted && lp.Origin == "" {
				if ourCreate && store.SHA256Hex(string(lp.Content)) != m.ContentSHA256 {
					// Our own create, whose answer was lost, and the file
					// changed again since: the newer content goes up on top
					// of it, as an update of that memory.
					if err := e.journal.Rebase(id, m.ID, m.ContentSHA256); err != nil {
						log.WithError(err).Error("could not rebase a pending change in the journal")
					}
					ms.agree(id, m)
					return nil
				}
				if store.SHA256Hex(string(lp.Content)) != m.ContentSHA256 {
					if err := e.keepConflict(lp, m, "created here and in the store at the same path"); err != nil {
						return err
					}
					e.treeApply(fs.Change{FileID: id, Path: m.Path, Content: content})
				}
				e.confirm(lp, m.ID, m.ContentSHA256, m.Path)
				ms.agree(id, m)
				return nil
			}
		} else if ok && isDir {
			log.Warn("the store has a memory where this mount has a directory; skipped until one of them moves")
			return nil
		}
		if err := e.displace(m, memoryID); err != nil {
			return err
		}
		e.treeApply(fs.Change{FileID: memoryID, Path: m.Path, Content: content})
		e.setBase(memoryID, m)
		ms.agree(memoryID, m)
		return nil
	}

	if err := e.displace(m, fileID); err != nil {
		return err
	}
	switch {
	case !pending:
		// Unchanged here: take the store's version.
		e.treeApply(fs.Change{FileID: fileID, Path: m.Path, Content: content})
		e.setBase(fileID, m)
	case p.Deleted:
		log.Warn("the memory changed in the store after it was deleted here: the store's version is restored")
		e.treeApply(fs.Change{FileID: fileID, Path: m.Path, Content: content})
		e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	case p.Path == m.Path && store.SHA256Hex(string(p.Content)) == m.ContentSHA256:
		// Changed to the same bytes on both sides: adopt silently.
		e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	default:
		if err := e.keepConflict(p, m, "changed here and in the store"); err != nil {
			return err
		}
		e.treeApply(fs.Change{FileID: fileID, Path: m.Path, Content: content})
		e.confirm(p, m.ID, m.ContentSHA256, m.Path)
	}
	ms.agree(fileID, m)
	return nil
}

// adoptSame settles, without fetching anything, a memory the store now
// holds at path with sha when the local file there is pending with exactly
// those bytes (changed to the same bytes on both sides, or our own write
// whose response was lost): sync.md's "adopt silently: no fetch, no upload,
// no conflict". It reports whether it did; if not, the caller fetches the
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
	delete(e.ms.sent, memoryID)
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
	e.commitOpen(id)
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

// commitOpen journals what was written to a file through a handle not yet
// closed, before a remote change is merged into it (fs.Tree.CommitFile):
// those writes are a local change like any other.
//
// REQUIRES: e.syncMu held.
func (e *Engine) commitOpen(fileID string) {
	if e.journal == nil || fileID == "" {
		return
	}
	if err := e.tree.CommitFile(fileID); err != nil {
		e.log.WithError(err).WithField("file_id", fileID).Error("could not journal a file's unclosed writes before merging a remote change; the store's version replaces them")
	}
}

// treeApply applies one change to the tree, logging what it can't show.
func (e *Engine) treeApply(c fs.Change) {
	if err := e.tree.Apply([]fs.Change{c}); err != nil {
		e.log.WithError(err).Warn("a change from the store can't be shown on the mount")
	}
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
		return err
	}
	e.log.WithFields(fields).WithField("conflict", c.ID).Warn("conflict: the store's version won; the local version is kept in the conflict log (memfs conflicts show " + c.ID + ")")
	return nil
}

// resolve fetches one memory and merges it (a 409 on upload, or a change
// seen in the feed or a listing).
//
// REQUIRES: e.syncMu held.
func (e *Engine) resolve(ctx context.Context, memoryID string) error {
	m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, memoryID)
	if errors.Is(err, store.ErrNotFound) {
		m, err = nil, nil
	}
	if err != nil {
		return err
	}
	return e.applyRemote(memoryID, m)
}

// restore brings back the store's version of a file deleted here (the
// whole-store guard), settling the pending delete.
//
// REQUIRES: e.syncMu held.
func (e *Engine) restore(ctx context.Context, d journal.Entry) error {
	m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, d.Origin)
	if errors.Is(err, store.ErrNotFound) {
		e.confirm(d, "", "", d.Path)
		e.ms.forget(d.Origin)
		return nil
	}
	if err != nil {
		return err
	}
	e.treeApply(fs.Change{FileID: d.FileID, Path: m.Path, Content: []byte(*m.Content)})
	e.confirm(d, m.ID, m.ContentSHA256, m.Path)
	e.ms.agree(d.FileID, m)
	return nil
}

// setBase tells the journal (if any) what a file's memory now holds.
func (e *Engine) setBase(fileID string, m *store.Memory) {
	if e.journal != nil {
		e.journal.SetBase(fileID, m.ID, m.ContentSHA256)
	}
}
