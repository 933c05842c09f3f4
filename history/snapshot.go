package history

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/memfs/memfs/store"
)

// Source is what reading a store's past needs of the API; store/client's
// Client satisfies it.
type Source interface {
	GetStore(ctx context.Context, storeID string) (*store.Store, error)
	ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error)
	ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error)
	GetVersion(ctx context.Context, storeID, versionID string) (*store.Version, error)
}

// Entry is one memory of a store as it was: its version at that time.
type Entry struct {
	MemoryID  string
	VersionID string
	Path      string
	SHA256    string
	Size      int64
	// Changed is when that version was made: the memory's mtime then.
	Changed time.Time
}

// entryOf is the entry of a memory as the store lists it now.
func entryOf(m *store.Memory) Entry {
	return Entry{MemoryID: m.ID, VersionID: m.MemoryVersionID, Path: m.Path,
		SHA256: m.ContentSHA256, Size: m.ContentSizeBytes, Changed: m.UpdatedAt}
}

// Snapshot is a store as it was At: each memory at its last version at or
// before At, in path order. A memory deleted by then is not in it, and
// neither is one whose version then is redacted: redaction wipes the
// path and content of a version for ever, so there is nothing to show at
// any path. Redacted lists those memories' ids, to be said.
type Snapshot struct {
	At       time.Time
	Entries  []Entry
	Redacted []string
	// Versions is how many versions were read to build it.
	Versions int
}

// SnapshotOf is the store as it was at at, from its versions in the
// order the API lists them, newest first. Versions made after at are
// ignored. Two memories at one path (which the store never holds at
// once) keep the one whose version comes first in the listing.
func SnapshotOf(versions []store.Version, at time.Time) Snapshot {
	snap := Snapshot{At: at}
	seen := map[string]bool{}
	taken := map[string]bool{}
	for _, v := range versions {
		if v.CreatedAt.After(at) || seen[v.MemoryID] {
			continue
		}
		seen[v.MemoryID] = true
		switch {
		case v.Operation == store.OpDeleted:
			continue
		case v.RedactedAt != nil || v.Path == nil || v.ContentSHA256 == nil:
			snap.Redacted = append(snap.Redacted, v.MemoryID)
			continue
		case taken[*v.Path]:
			continue
		}
		taken[*v.Path] = true
		e := Entry{MemoryID: v.MemoryID, VersionID: v.ID, Path: *v.Path, SHA256: *v.ContentSHA256, Changed: v.CreatedAt}
		if v.ContentSizeBytes != nil {
			e.Size = *v.ContentSizeBytes
		}
		snap.Entries = append(snap.Entries, e)
	}
	sort.Slice(snap.Entries, func(i, j int) bool { return snap.Entries[i].Path < snap.Entries[j].Path })
	sort.Strings(snap.Redacted)
	return snap
}

// BuildSnapshot returns storeID as it was at at. When few memories
// changed since (fromNow), it is the store now with those changes undone:
// the listing a normal mount makes, the versions made after at, and one
// lookup per memory they name. Else it is built from every version made
// at or before at (basic view: no content).
func BuildSnapshot(ctx context.Context, src Source, storeID string, at time.Time) (Snapshot, error) {
	snap, ok, err := fromNow(ctx, src, storeID, at)
	if err != nil || ok {
		return snap, err
	}
	vs, err := listAll(ctx, src, storeID, store.ListVersionsOptions{CreatedLTE: &at})
	if err != nil {
		return Snapshot{}, fmt.Errorf("list the versions of %s up to %s: %w", storeID, at.Format(time.RFC3339), err)
	}
	snap = SnapshotOf(vs, at)
	snap.Versions = len(vs)
	return snap, nil
}

// versionsAfter lists the versions made after at, newest first, by
// walking the store's versions newest first, unfiltered, until one made
// at or before at: each page is the head of the listing, which every
// server answers from its index (memfs serve applies a created_at filter
// to each row it walks, so a filtered listing with few matches reads every
// older version). With maxMemories > 0 the walk ends once the versions
// listed name more memories than that: complete is then false.
func versionsAfter(ctx context.Context, src Source, storeID string, at time.Time, maxMemories int) (vs []store.Version, complete bool, err error) {
	opts := store.ListVersionsOptions{Limit: store.MaxListLimit}
	named := map[string]bool{}
	for {
		p, err := src.ListVersions(ctx, storeID, opts)
		if err != nil {
			return nil, false, err
		}
		for _, v := range p.Data {
			if !v.CreatedAt.After(at) {
				return vs, true, nil
			}
			vs = append(vs, v)
			named[v.MemoryID] = true
		}
		switch {
		case p.NextPage == "":
			return vs, true, nil
		case maxMemories > 0 && len(named) > maxMemories:
			return vs, false, nil
		}
		opts.Page = p.NextPage
	}
}

// listAll lists every version matching opts, newest first, following
// next_page (store.MaxListLimit a page).
func listAll(ctx context.Context, src Source, storeID string, opts store.ListVersionsOptions) ([]store.Version, error) {
	opts.Limit = store.MaxListLimit
	var out []store.Version
	for {
		p, err := src.ListVersions(ctx, storeID, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Data...)
		if p.NextPage == "" {
			return out, nil
		}
		opts.Page = p.NextPage
	}
}

// Log is every version of one memory, newest first.
func Log(ctx context.Context, src Source, storeID, memoryID string) ([]store.Version, error) {
	return listAll(ctx, src, storeID, store.ListVersionsOptions{MemoryID: memoryID})
}

// VersionAt is memoryID's last version at or before at, with its
// content (store.ErrNotFound when the memory had none by then).
func VersionAt(ctx context.Context, src Source, storeID, memoryID string, at time.Time) (*store.Version, error) {
	return versionAt(ctx, src, storeID, memoryID, at, true)
}

// versionAt is VersionAt, with its content when full.
func versionAt(ctx context.Context, src Source, storeID, memoryID string, at time.Time, full bool) (*store.Version, error) {
	p, err := src.ListVersions(ctx, storeID, store.ListVersionsOptions{MemoryID: memoryID, CreatedLTE: &at, Limit: 1, Full: full})
	if err != nil {
		return nil, err
	}
	if len(p.Data) == 0 {
		return nil, store.Errorf(store.ErrNotFound, "memory %s had no version at or before %s", memoryID, at.Format(time.RFC3339))
	}
	return &p.Data[0], nil
}
