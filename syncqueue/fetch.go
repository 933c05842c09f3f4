package syncqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// maxFetchTries bounds how often resolve fetches a memory again because
// the engine's view of it changed while the fetch was in flight.
const maxFetchTries = 5

// resolve fetches one memory and merges it (a 409 on upload, or a change
// seen in the feed or a listing). The fetch is made without syncMu; if
// the engine settled the memory meanwhile (its gen moved), the answer may
// be older than what was applied, so it fetches again.
//
// REQUIRES: e.syncMu NOT held.
func (e *Engine) resolve(ctx context.Context, memoryID string) error {
	for try := 0; ; try++ {
		e.syncMu.Lock()
		gen := e.ms.gen[memoryID]
		e.syncMu.Unlock()
		m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, memoryID)
		if errors.Is(err, store.ErrNotFound) {
			m, err = nil, nil
		}
		if err != nil {
			return err
		}
		e.syncMu.Lock()
		if e.ms.gen[memoryID] != gen {
			e.syncMu.Unlock()
			if try < maxFetchTries {
				continue
			}
			// Never merge an answer that may be older than what was
			// applied: the change is merged again later.
			return localError{fmt.Errorf("memory %s keeps changing while it is fetched; merged later", memoryID)}
		}
		err = e.applyRemote(memoryID, m)
		e.syncMu.Unlock()
		return err
	}
}

// restore brings back the store's version of a file deleted here (the
// whole-store guard), settling the pending delete.
//
// REQUIRES: e.syncMu NOT held.
func (e *Engine) restore(ctx context.Context, d journal.Entry) error {
	m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, d.Origin)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("restore %s: %w", d.Path, err)
	}
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	if m == nil {
		e.confirm(d.FileID, d.LSN, "", "", d.Path)
		e.ms.forget(d.Origin)
		return nil
	}
	e.treeApply(fs.Change{FileID: d.FileID, Path: m.Path, Content: contentBytes(m)})
	e.confirm(d.FileID, d.LSN, m.ID, m.ContentSHA256, m.Path)
	e.ms.agree(d.FileID, m)
	return nil
}
