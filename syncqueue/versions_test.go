package syncqueue

import (
	"slices"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// TestNewVersions: one rule per row of the pure step of following the
// versions: what is merged, and the mark listed from next.
func TestNewVersions(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	v := func(id, mem string, s int) store.Version {
		return store.Version{ID: id, MemoryID: mem, CreatedAt: at(s)}
	}
	mark := func(s int, ids ...string) versionMark {
		m := versionMark{seen: map[string]bool{}}
		if s >= 0 {
			m.at = at(s)
		}
		for _, id := range ids {
			m.seen[id] = true
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		mark     versionMark
		listed   []store.Version // newest first, as listed
		wantIDs  []string        // versions merged, newest first
		wantMark versionMark
	}{
		{"nothing new keeps the mark", mark(5, "a"), []store.Version{v("a", "m1", 5)}, nil, mark(5, "a")},
		{"from the start: every memory's newest", mark(-1), []store.Version{v("c", "m1", 3), v("b", "m2", 2), v("a", "m1", 1)}, []string{"c", "b"}, mark(3, "c")},
		{"gte reads the mark's versions again: deduped by id", mark(5, "a"), []store.Version{v("b", "m2", 6), v("a", "m1", 5)}, []string{"b"}, mark(6, "b")},
		{"a new version at the mark's very timestamp is merged", mark(5, "a"), []store.Version{v("b", "m2", 5), v("a", "m1", 5)}, []string{"b"}, mark(5, "a", "b")},
		{"two versions at the new newest timestamp are both seen", mark(1, "x"), []store.Version{v("c", "m3", 7), v("b", "m2", 7), v("a", "m1", 4)}, []string{"c", "b", "a"}, mark(7, "b", "c")},
		{"older than the mark is ignored", mark(5, "a"), []store.Version{v("z", "m9", 4)}, nil, mark(5, "a")},
		{"a memory changed twice: only its newest", mark(-1), []store.Version{v("d", "m1", 9), v("c", "m1", 8)}, []string{"d"}, mark(9, "d")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			latest, next := newVersions(tc.mark, tc.listed)
			var ids []string
			for _, v := range latest {
				ids = append(ids, v.ID)
			}
			if !slices.Equal(ids, tc.wantIDs) {
				t.Errorf("merged %v, want %v", ids, tc.wantIDs)
			}
			if !next.at.Equal(tc.wantMark.at) || len(next.seen) != len(tc.wantMark.seen) {
				t.Errorf("next mark %v %v, want %v %v", next.at, next.seen, tc.wantMark.at, tc.wantMark.seen)
			}
			for id := range tc.wantMark.seen {
				if !next.seen[id] {
					t.Errorf("next mark lacks %s: %v", id, next.seen)
				}
			}
		})
	}
}
