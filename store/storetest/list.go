package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
)

var listTests = []test{
	{"Order", testListOrder},
	{"PathPrefix", testListPathPrefix},
	{"Depth", testListDepth},
	{"Paging", testListPaging},
	{"Views", testListViews},
	{"FullViewLimit", testListFullViewLimit},
}

func testListOrder(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	paths := []string{"/b", "/a/x", "/B", "/a!", "/_", "/\u00e9", "/a/y/z", "/Z", "/a-b", "/0", "/a.b", "/\U0001F600", "/~"}
	for _, p := range paths {
		create(t, b, s.ID, p, p)
	}
	want := slices.Clone(paths)
	slices.Sort(want) // Go strings sort byte-wise
	for _, limit := range []int{0, 1, 3, 100} {
		got := listNames(t, b, s.ID, store.ListMemoriesOptions{Limit: limit})
		equalStrings(t, fmt.Sprintf("byte-wise order, limit %d", limit), got, want)
		// The cases that differ from case-insensitive or segment-wise order.
		if slices.Index(got, "/B") > slices.Index(got, "/a!") || slices.Index(got, "/a!") > slices.Index(got, "/a/x") ||
			slices.Index(got, "/a-b") > slices.Index(got, "/a/x") || slices.Index(got, "/a/y/z") > slices.Index(got, "/b") {
			t.Fatalf("order %q is not byte-wise", got)
		}
	}
}

func testListPathPrefix(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	for _, p := range []string{"/notes/x", "/notes/y/z", "/notes-archive/x", "/notesx", "/note", "/notes0", "/other/notes/x", "/notes!/x"} {
		create(t, b, s.ID, p, "")
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"/notes/", []string{"/notes/x", "/notes/y/z"}},
		{"/notes/y/", []string{"/notes/y/z"}},
		{"/notes-archive/", []string{"/notes-archive/x"}},
		{"/notes/x/", nil},
		{"/nothing/", nil},
		{"/other/", []string{"/other/notes/x"}},
		{"/", []string{"/note", "/notes!/x", "/notes-archive/x", "/notes/x", "/notes/y/z", "/notes0", "/notesx", "/other/notes/x"}},
		{"", []string{"/note", "/notes!/x", "/notes-archive/x", "/notes/x", "/notes/y/z", "/notes0", "/notesx", "/other/notes/x"}},
	}
	for _, tc := range tests {
		for _, limit := range []int{0, 1} {
			pages := listPages(t, b, s.ID, store.ListMemoriesOptions{PathPrefix: tc.prefix, Limit: limit})
			var got []string
			for _, p := range pages {
				got = append(got, itemNames(t, p)...)
			}
			equalStrings(t, fmt.Sprintf("path_prefix %q limit %d", tc.prefix, limit), got, tc.want)
		}
	}
}

func testListDepth(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	for _, p := range []string{"/a/b", "/a/c", "/b", "/c/d/e", "/c/f"} {
		create(t, b, s.ID, p, p)
	}
	tests := []struct {
		prefix string
		depth  int
		want   []string
	}{
		{"", 1, []string{"/a/", "/b", "/c/"}},
		{"/", 1, []string{"/a/", "/b", "/c/"}},
		{"/c/", 1, []string{"/c/d/", "/c/f"}},
		{"/a/", 1, []string{"/a/b", "/a/c"}},
		{"/c/d/", 1, []string{"/c/d/e"}},
		{"/zzz/", 1, nil},
		{"", 0, []string{"/a/b", "/a/c", "/b", "/c/d/e", "/c/f"}},
		{"/c/", 0, []string{"/c/d/e", "/c/f"}},
	}
	for _, tc := range tests {
		items := listAll(t, b, s.ID, store.ListMemoriesOptions{PathPrefix: tc.prefix, Depth: tc.depth})
		equalStrings(t, fmt.Sprintf("path_prefix %q depth %d", tc.prefix, tc.depth), itemNames(t, items), tc.want)
		for _, it := range items {
			if it.Memory != nil && it.Memory.Type != store.TypeMemory {
				t.Fatalf("memory item has type %q", it.Memory.Type)
			}
		}
	}
}

// testListPaging pages through depth=1 and recursive listings with small
// limits: memory_prefix items count toward the limit, and every item
// appears exactly once, in the same order as in one big page.
func testListPaging(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	for _, p := range []string{
		"/a/1", "/a/2", "/a/3", "/a!", "/b", "/c/d/e", "/c/d/f", "/c/g", "/d/x/y/z",
		"/e", "/f/1", "/g", "/h/i/j", "/h/k", "/h/l/m", "/h/n",
	} {
		create(t, b, s.ID, p, "")
	}
	tests := []struct {
		prefix string
		depth  int
		want   []string
	}{
		{"", 1, []string{"/a!", "/a/", "/b", "/c/", "/d/", "/e", "/f/", "/g", "/h/"}},
		{"/h/", 1, []string{"/h/i/", "/h/k", "/h/l/", "/h/n"}},
		{"/c/", 1, []string{"/c/d/", "/c/g"}},
		{"", 0, []string{"/a!", "/a/1", "/a/2", "/a/3", "/b", "/c/d/e", "/c/d/f", "/c/g", "/d/x/y/z", "/e", "/f/1", "/g", "/h/i/j", "/h/k", "/h/l/m", "/h/n"}},
	}
	for _, tc := range tests {
		for _, limit := range []int{1, 2, 3, 4, 100} {
			what := fmt.Sprintf("path_prefix %q depth %d limit %d", tc.prefix, tc.depth, limit)
			pages := listPages(t, b, s.ID, store.ListMemoriesOptions{PathPrefix: tc.prefix, Depth: tc.depth, Limit: limit})
			var got []string
			for i, p := range pages {
				if len(p) == 0 && len(tc.want) > 0 {
					t.Fatalf("%s: page %d is empty", what, i)
				}
				got = append(got, itemNames(t, p)...)
			}
			equalStrings(t, what, got, tc.want)
			if wantPages := (len(tc.want) + limit - 1) / limit; len(pages) != wantPages {
				t.Fatalf("%s: %d pages, want %d (full pages, no trailing empty page)", what, len(pages), wantPages)
			}
		}
	}
}

func testListViews(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m1 := create(t, b, s.ID, "/v1", "one")
	m2 := create(t, b, s.ID, "/v2", "")
	create(t, b, s.ID, "/dir/v3", "three")

	basic := listAll(t, b, s.ID, store.ListMemoriesOptions{})
	full := listAll(t, b, s.ID, store.ListMemoriesOptions{Full: true})
	equalStrings(t, "basic", itemNames(t, basic), []string{"/dir/v3", "/v1", "/v2"})
	equalStrings(t, "full", itemNames(t, full), []string{"/dir/v3", "/v1", "/v2"})
	want := map[string]string{"/dir/v3": "three", "/v1": "one", "/v2": ""}
	for i := range basic {
		bm, fm := basic[i].Memory, full[i].Memory
		if bm.Content != nil {
			t.Fatalf("basic view %s has content %q, want nil", bm.Path, *bm.Content)
		}
		if fm.Content == nil || *fm.Content != want[fm.Path] {
			t.Fatalf("full view %s has content %v, want %q", fm.Path, fm.Content, want[fm.Path])
		}
		for _, m := range []*store.Memory{bm, fm} {
			if m.ContentSHA256 != store.SHA256Hex(want[m.Path]) || m.ContentSizeBytes != int64(len(want[m.Path])) ||
				!strings.HasPrefix(m.MemoryVersionID, store.PrefixVersion) || m.MemoryStoreID != s.ID || m.Type != store.TypeMemory {
				t.Fatalf("listed memory %+v lacks its metadata", m)
			}
		}
	}
	if basic[1].Memory.ID != m1.ID || basic[2].Memory.ID != m2.ID {
		t.Fatal("listing ids differ from the created memories")
	}
	// depth=1 full view: prefix items carry no memory.
	items := listAll(t, b, s.ID, store.ListMemoriesOptions{Depth: 1, Full: true})
	equalStrings(t, "depth 1 full", itemNames(t, items), []string{"/dir/", "/v1", "/v2"})
	if contentOf(t, items[1].Memory) != "one" {
		t.Fatal("depth 1 full view lost content")
	}

	_, err := b.ListMemories(ctx, s.ID, store.ListMemoriesOptions{Page: "garbage!"})
	wantErr(t, err, store.ErrInvalid, "ListMemories bad page token")
}

func testListFullViewLimit(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	for i := range 25 {
		create(t, b, s.ID, fmt.Sprintf("/m%02d", i), "x")
	}
	p, err := b.ListMemories(ctx, s.ID, store.ListMemoriesOptions{Limit: 100, Full: true})
	ok(t, err, "ListMemories full limit 100")
	if len(p.Data) != store.MaxFullViewListLimit || p.NextPage == "" {
		t.Fatalf("full view with limit 100: %d items, next_page %q; want it clamped to %d with a next page", len(p.Data), p.NextPage, store.MaxFullViewListLimit)
	}
	p, err = b.ListMemories(ctx, s.ID, store.ListMemoriesOptions{Limit: 100})
	ok(t, err, "ListMemories basic limit 100")
	if len(p.Data) != 25 || p.NextPage != "" {
		t.Fatalf("basic view with limit 100: %d items, next_page %q; want 25 and none", len(p.Data), p.NextPage)
	}
	p, err = b.ListMemories(ctx, s.ID, store.ListMemoriesOptions{})
	ok(t, err, "ListMemories default limit")
	if len(p.Data) != store.DefaultListLimit || p.NextPage == "" {
		t.Fatalf("default limit: %d items, want %d and a next page", len(p.Data), store.DefaultListLimit)
	}
	if got := listNames(t, b, s.ID, store.ListMemoriesOptions{Limit: 100, Full: true}); len(got) != 25 {
		t.Fatalf("paging the full view found %d memories, want 25", len(got))
	}
}
