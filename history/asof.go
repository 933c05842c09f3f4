package history

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/memfs/memfs/store"
)

// AsOf is a store as it was at a time, for a read-only mount (memfs mount
// --at): it answers the sync engine's calls (syncqueue.Store) from a
// Snapshot, reading each memory's content from its version when asked.
// Nothing changes in it: it has no change feed, its versions listing is
// empty (the engine finds nothing new to follow, and asks the store
// nothing while idle), and every write is refused.
//
// When no version was made after the time (the commonest --at: a moment
// after the last change), the store now is the store then, and an AsOf
// "as now" answers the engine's listing from the store's own, keeping
// what it lists as the snapshot: one listing, not two. Verify, once the
// mount has listed, checks that still no version was made after the
// time; if one was, what was listed may be newer than the time, and the
// mount must be made again from NewAsOfFromVersions.
type AsOf struct {
	src     Source
	storeID string
	at      time.Time
	asNow   bool // the snapshot is what the store's listing showed (see above)

	mu    sync.Mutex
	snap  Snapshot          // GUARDED_BY(mu) when asNow (filled by ListMemories)
	byID  map[string]*Entry // GUARDED_BY(mu) when asNow
	newer bool              // GUARDED_BY(mu): asNow listed a memory changed after at
}

// ErrChangedWhileRead: a version was made after the time while an AsOf
// "as now" was listed (Verify).
var ErrChangedWhileRead = errors.New("the store changed while it was read as it was")

// NewAsOf builds the store storeID as it was at at: "as now" when no
// version was made since (Verify after the mount's listing), else from
// the versions (NewAsOfFromVersions).
func NewAsOf(ctx context.Context, src Source, storeID string, at time.Time) (*AsOf, error) {
	none, err := noneSince(ctx, src, storeID, at)
	if err != nil {
		return nil, fmt.Errorf("list the versions of %s made after %s: %w", storeID, at.Format(time.RFC3339), err)
	}
	if none {
		return &AsOf{src: src, storeID: storeID, at: at, asNow: true, snap: Snapshot{At: at}, byID: map[string]*Entry{}}, nil
	}
	return NewAsOfFromVersions(ctx, src, storeID, at)
}

// NewAsOfFromVersions builds the store storeID as it was at at from its
// versions (BuildSnapshot), before anything is listed from it.
func NewAsOfFromVersions(ctx context.Context, src Source, storeID string, at time.Time) (*AsOf, error) {
	snap, err := BuildSnapshot(ctx, src, storeID, at)
	if err != nil {
		return nil, err
	}
	a := &AsOf{src: src, storeID: storeID, at: at, snap: snap, byID: make(map[string]*Entry, len(snap.Entries))}
	for i := range snap.Entries {
		a.byID[snap.Entries[i].MemoryID] = &snap.Entries[i]
	}
	return a, nil
}

// noneSince says whether no version of the store was made after at: its
// newest version (the head of the listing, one row of the index) is not.
func noneSince(ctx context.Context, src Source, storeID string, at time.Time) (bool, error) {
	p, err := src.ListVersions(ctx, storeID, store.ListVersionsOptions{Limit: 1})
	return err == nil && (len(p.Data) == 0 || !p.Data[0].CreatedAt.After(at)), err
}

// Verify checks, once the mount has listed the store, that an AsOf "as
// now" listed the store as it was: no version made after the time, then
// or since (versions are never taken back, so none now means none while
// it was listed). ErrChangedWhileRead says the mount must be made again
// (from NewAsOfFromVersions). Built from the versions, it is always true.
func (a *AsOf) Verify(ctx context.Context) error {
	if !a.asNow {
		return nil
	}
	a.mu.Lock()
	newer := a.newer
	a.mu.Unlock()
	none, err := noneSince(ctx, a.src, a.storeID, a.at)
	switch {
	case err != nil:
		return err
	case newer || !none:
		return ErrChangedWhileRead
	}
	return nil
}

// Snapshot is what the store held then (as now: what the mount listed).
func (a *AsOf) Snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.snap
	s.Entries = append([]Entry(nil), s.Entries...)
	sort.Slice(s.Entries, func(i, j int) bool { return s.Entries[i].Path < s.Entries[j].Path })
	return s
}

// entry is the snapshot's entry of a memory.
func (a *AsOf) entry(id string) *Entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byID[id]
}

// listNow answers a listing "as now": the store's own, whose memories
// become the snapshot's.
func (a *AsOf) listNow(ctx context.Context, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	p, err := a.src.ListMemories(ctx, a.storeID, opts)
	if err != nil {
		return p, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range p.Data {
		m := it.Memory
		if m == nil {
			continue
		}
		if m.UpdatedAt.After(a.at) {
			a.newer = true // changed since at: Verify says so
		}
		if a.byID[m.ID] == nil {
			e := entryOf(m)
			a.byID[m.ID] = &e
			a.snap.Entries = append(a.snap.Entries, e)
		}
	}
	return p, nil
}

// GetStore reads the store itself (its name, whether it is archived).
func (a *AsOf) GetStore(ctx context.Context, storeID string) (*store.Store, error) {
	if err := a.check(storeID); err != nil {
		return nil, err
	}
	return a.src.GetStore(ctx, storeID)
}

// ListMemories lists the snapshot as the API lists a store: path order,
// under PathPrefix, deeper memories rolled up into memory_prefix items at
// Depth, in one page. The full view is the store's own full listing, of
// the memories that have not changed since (their version now is the
// snapshot's): the engine fills those from it, 20 a request, and reads
// the others one by one (GetMemory).
func (a *AsOf) ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	var page store.Page[store.MemoryListItem]
	if err := a.check(storeID); err != nil {
		return page, err
	}
	if opts.Full {
		return a.unchanged(ctx, opts)
	}
	if a.asNow {
		return a.listNow(ctx, opts)
	}
	prefix := opts.PathPrefix
	if prefix == "" {
		prefix = "/"
	}
	rolled := map[string]bool{}
	for i := range a.snap.Entries {
		e := &a.snap.Entries[i]
		if !strings.HasPrefix(e.Path, prefix) {
			continue
		}
		rest := e.Path[len(prefix):]
		if j := nthSlash(rest, opts.Depth); j >= 0 {
			dir := prefix + rest[:j+1]
			if !rolled[dir] {
				rolled[dir] = true
				page.Data = append(page.Data, store.MemoryListItem{Prefix: dir})
			}
			continue
		}
		page.Data = append(page.Data, store.MemoryListItem{Memory: a.memory(e, nil)})
	}
	return page, nil
}

// unchanged is a page of the store's full listing, keeping the memories
// whose version is the snapshot's (and the prefixes, which the engine's
// listing walks).
func (a *AsOf) unchanged(ctx context.Context, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	p, err := a.src.ListMemories(ctx, a.storeID, opts)
	if err != nil {
		return p, err
	}
	kept := p.Data[:0]
	for _, it := range p.Data {
		if it.Memory != nil {
			if e := a.entry(it.Memory.ID); e == nil || e.VersionID != it.Memory.MemoryVersionID || it.Memory.Content == nil {
				continue
			}
		}
		kept = append(kept, it)
	}
	p.Data = kept
	return p, nil
}

// nthSlash returns the index of the n-th '/' in s, or -1 when n <= 0 or
// s has fewer.
func nthSlash(s string, n int) int {
	if n <= 0 {
		return -1
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}

// GetMemory reads a memory's content as it was: its version's.
func (a *AsOf) GetMemory(ctx context.Context, storeID, memoryID string) (*store.Memory, error) {
	if err := a.check(storeID); err != nil {
		return nil, err
	}
	e := a.entry(memoryID)
	if e == nil {
		return nil, store.Errorf(store.ErrNotFound, "memory %s was not in the store at %s", memoryID, a.at.Format(time.RFC3339Nano))
	}
	v, err := a.src.GetVersion(ctx, storeID, e.VersionID)
	if err != nil {
		return nil, err
	}
	if v.Content == nil {
		return nil, store.Errorf(store.ErrNotFound, "version %s of %s has no content any more (redacted since)", e.VersionID, e.Path)
	}
	return a.memory(e, v.Content), nil
}

func (a *AsOf) memory(e *Entry, content *string) *store.Memory {
	return &store.Memory{ID: e.MemoryID, Type: store.TypeMemory, MemoryStoreID: a.storeID, MemoryVersionID: e.VersionID,
		Path: e.Path, Content: content, ContentSHA256: e.SHA256, ContentSizeBytes: e.Size, CreatedAt: e.Changed, UpdatedAt: e.Changed}
}

// ListVersions lists nothing: nothing happens to a store as it was.
func (a *AsOf) ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error) {
	return store.Page[store.Version]{}, a.check(storeID)
}

// Changes: a store as it was has no change feed.
func (a *AsOf) Changes(ctx context.Context, storeID string, after int64, limit int, wait time.Duration) (store.ChangePage, error) {
	return store.ChangePage{}, store.ErrFeedUnsupported
}

// CreateMemory is refused: the past is read-only.
func (a *AsOf) CreateMemory(ctx context.Context, storeID, path, content string) (*store.Memory, error) {
	return nil, a.readOnly()
}

// UpdateMemory is refused: the past is read-only.
func (a *AsOf) UpdateMemory(ctx context.Context, storeID, memoryID string, in store.UpdateMemoryInput) (*store.Memory, error) {
	return nil, a.readOnly()
}

// DeleteMemory is refused: the past is read-only.
func (a *AsOf) DeleteMemory(ctx context.Context, storeID, memoryID string, expectedSHA256 *string) error {
	return a.readOnly()
}

func (a *AsOf) readOnly() error {
	return store.Errorf(store.ErrForbidden, "the store as it was at %s is read-only (memfs restore or memfs stores revert write the past back)", a.at.Format(time.RFC3339))
}

func (a *AsOf) check(storeID string) error {
	if storeID != a.storeID {
		return store.Errorf(store.ErrNotFound, "memory store %s is not the one read as it was (%s)", storeID, a.storeID)
	}
	return nil
}
