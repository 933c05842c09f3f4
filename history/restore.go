package history

import (
	"context"
	"fmt"

	"github.com/memfs/memfs/store"
)

// RestoreResult is what Restore did.
type RestoreResult struct {
	// Memory is the memory written (a new one when the memory was deleted:
	// then Recreated).
	Memory    *store.Memory
	Recreated bool
	// Unchanged: the memory already held that content.
	Unchanged bool
}

// Restore writes version back's content to its memory as a new version.
// current is the memory as it is now (nil when it is deleted: the content
// is then created again at back's path, under a new memory id). The write
// has current's sha as its precondition, so a change made since current
// was read is refused (store.ErrPreconditionFailed), never overwritten.
func Restore(ctx context.Context, w Writer, storeID string, current *store.Memory, back *store.Version) (RestoreResult, error) {
	if back.Content == nil || back.Path == nil {
		if back.Operation == store.OpDeleted {
			return RestoreResult{}, store.Errorf(store.ErrInvalid, "version %s is the memory's deletion: it has no content to restore", back.ID)
		}
		return RestoreResult{}, store.Errorf(store.ErrInvalid, "version %s is redacted: its content is gone for ever", back.ID)
	}
	if current == nil {
		m, err := w.CreateMemory(ctx, storeID, *back.Path, *back.Content)
		if err != nil {
			return RestoreResult{}, fmt.Errorf("create %s again: %w", *back.Path, err)
		}
		return RestoreResult{Memory: m, Recreated: true}, nil
	}
	if back.MemoryID != current.ID {
		return RestoreResult{}, store.Errorf(store.ErrInvalid, "version %s is of memory %s, not of %s (%s)", back.ID, back.MemoryID, current.ID, current.Path)
	}
	if back.ContentSHA256 != nil && *back.ContentSHA256 == current.ContentSHA256 {
		return RestoreResult{Memory: current, Unchanged: true}, nil
	}
	sha := current.ContentSHA256
	m, err := w.UpdateMemory(ctx, storeID, current.ID, store.UpdateMemoryInput{Content: back.Content, ExpectedSHA256: &sha})
	if err != nil {
		return RestoreResult{}, err
	}
	return RestoreResult{Memory: m}, nil
}
