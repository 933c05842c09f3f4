package syncqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/journal"
)

// resolve fetches one memory and merges it (a 409 on upload). It waits, bounded by ctx, while the
// memory is busy.
func (e *Engine) resolve(ctx context.Context, memoryID string) error {
	e.syncMu.Lock()
	err := e.hold(ctx, memoryID)
	e.syncMu.Unlock()
	if err != nil {
		return err
	}
	return e.fetchHeld(ctx, memoryID)
}

// fetchHeld fetches memory id, which the caller holds busy, merges the
// answer and frees it. A 404 is a deletion.
func (e *Engine) fetchHeld(ctx context.Context, id string) error {
	m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, id)
	if errors.Is(err, store.ErrNotFound) {
		m, err = nil, nil
	}
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	defer e.release(id)
	if err != nil {
		return err
	}
	return e.applyRemote(id, m)
}

// restore brings back the store's version of a file deleted here (the
// whole-store guard), settling the pending delete.
func (e *Engine) restore(ctx context.Context, d journal.Entry) error {
	e.syncMu.Lock()
	err := e.hold(ctx, d.Origin)
	e.syncMu.Unlock()
	if err != nil {
		return fmt.Errorf("restore %s: %w", d.Path, err)
	}
	m, err := e.opts.Store.GetMemory(ctx, e.opts.StoreID, d.Origin)
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	defer e.release(d.Origin)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("restore %s: %w", d.Path, err)
	}
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
