package storetest

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

var storeTests = []test{
	{"CreateGet", testStoreCreateGet},
	{"Update", testStoreUpdate},
	{"List", testStoreList},
	{"ListArchived", testStoreListArchived},
	{"ListCreatedAt", testStoreListCreatedAt},
	{"Archive", testStoreArchive},
	{"Delete", testStoreDelete},
}

// sameStore fails the test unless got and want are the same store state.
func sameStore(t *testing.T, what string, got, want *store.Store) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || got.Name != want.Name || got.Description != want.Description ||
		!maps.Equal(got.Metadata, want.Metadata) || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) ||
		(got.ArchivedAt == nil) != (want.ArchivedAt == nil) || (got.ArchivedAt != nil && !got.ArchivedAt.Equal(*want.ArchivedAt)) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func testStoreCreateGet(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	in := store.CreateStoreInput{Name: "Project notes ✓", Description: "what we learned", Metadata: map[string]string{"team": "core", "env": ""}}
	s, err := b.CreateStore(ctx, in)
	ok(t, err, "CreateStore")
	if !strings.HasPrefix(s.ID, store.PrefixStore) || s.Type != store.TypeMemoryStore {
		t.Fatalf("store id %q type %q, want prefix %q and type %q", s.ID, s.Type, store.PrefixStore, store.TypeMemoryStore)
	}
	if s.Name != in.Name || s.Description != in.Description || !maps.Equal(s.Metadata, in.Metadata) {
		t.Fatalf("created store %+v does not carry its input %+v", s, in)
	}
	if s.ArchivedAt != nil || s.Archived() {
		t.Fatalf("a new store is archived: %v", s.ArchivedAt)
	}
	checkUTC(t, "created_at", s.CreatedAt)
	checkUTC(t, "updated_at", s.UpdatedAt)
	if s.UpdatedAt.Before(s.CreatedAt) {
		t.Fatalf("updated_at %v before created_at %v", s.UpdatedAt, s.CreatedAt)
	}
	got, err := b.GetStore(ctx, s.ID)
	ok(t, err, "GetStore")
	sameStore(t, "GetStore after create", got, s)

	// Defaults: no description, no metadata -> "" and an empty (not nil) map.
	bare, err := b.CreateStore(ctx, store.CreateStoreInput{Name: "Project notes ✓"})
	ok(t, err, "CreateStore without description and metadata")
	if bare.ID == s.ID {
		t.Fatal("two stores got the same id")
	}
	if bare.Description != "" || bare.Metadata == nil || len(bare.Metadata) != 0 {
		t.Fatalf("bare store: description %q metadata %#v, want \"\" and an empty map", bare.Description, bare.Metadata)
	}
	got, err = b.GetStore(ctx, bare.ID)
	ok(t, err, "GetStore bare")
	if got.Metadata == nil {
		t.Fatal("GetStore returned nil metadata; want an empty map")
	}

	// Any valid UTF-8 within the limits round-trips, NUL included (names
	// can't hold control characters; descriptions and metadata can).
	odd := store.CreateStoreInput{Name: "odd", Description: "nul\x00byte\ttab\u2028 é", Metadata: map[string]string{"k\x00": "v\x00\\\"", "é": "✓"}}
	for _, err := range []error{store.ValidateDescription(odd.Description), store.ValidateMetadata(odd.Metadata)} {
		ok(t, err, "validating the odd input")
	}
	o, err := b.CreateStore(ctx, odd)
	ok(t, err, "CreateStore with NUL in description and metadata")
	got, err = b.GetStore(ctx, o.ID)
	ok(t, err, "GetStore odd")
	if got.Description != odd.Description || !maps.Equal(got.Metadata, odd.Metadata) {
		t.Fatalf("odd store read back as %q %q, want %q %q", got.Description, got.Metadata, odd.Description, odd.Metadata)
	}
	u, err := b.UpdateStore(ctx, o.ID, store.UpdateStoreInput{Description: ptr("\x00")})
	ok(t, err, "UpdateStore description to NUL")
	if u.Description != "\x00" {
		t.Fatalf("description %q, want NUL", u.Description)
	}

	_, err = b.GetStore(ctx, "memstore_doesnotexist")
	wantErr(t, err, store.ErrNotFound, "GetStore unknown")
}

func testStoreUpdate(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s, err := b.CreateStore(ctx, store.CreateStoreInput{Name: "old", Description: "desc", Metadata: map[string]string{"a": "1", "b": "2"}})
	ok(t, err, "CreateStore")

	u, err := b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Name: ptr("new")})
	ok(t, err, "UpdateStore name")
	if u.Name != "new" || u.Description != "desc" || !maps.Equal(u.Metadata, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("after renaming: %+v; want only the name changed", u)
	}
	if u.ID != s.ID || !u.CreatedAt.Equal(s.CreatedAt) || u.UpdatedAt.Before(s.UpdatedAt) {
		t.Fatalf("update changed id/created_at or moved updated_at back: %+v (was %+v)", u, s)
	}

	u, err = b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Description: ptr("")})
	ok(t, err, "UpdateStore description")
	if u.Description != "" || u.Name != "new" {
		t.Fatalf("description \"\" should clear it and keep the name: %+v", u)
	}

	u, err = b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Metadata: map[string]*string{"a": nil, "c": ptr("3"), "absent": nil}})
	ok(t, err, "UpdateStore metadata patch")
	if want := map[string]string{"b": "2", "c": "3"}; !maps.Equal(u.Metadata, want) {
		t.Fatalf("metadata after patch = %v, want %v (nil removes, others kept)", u.Metadata, want)
	}
	u, err = b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Metadata: map[string]*string{"b": ptr("20")}})
	ok(t, err, "UpdateStore metadata overwrite")
	if want := map[string]string{"b": "20", "c": "3"}; !maps.Equal(u.Metadata, want) {
		t.Fatalf("metadata after overwrite = %v, want %v", u.Metadata, want)
	}

	// An empty update changes nothing.
	same, err := b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{})
	ok(t, err, "UpdateStore empty")
	if same.Name != "new" || same.Description != "" || !maps.Equal(same.Metadata, u.Metadata) {
		t.Fatalf("empty update changed the store: %+v", same)
	}
	got, err := b.GetStore(ctx, s.ID)
	ok(t, err, "GetStore")
	if got.Name != "new" || got.Description != "" || !maps.Equal(got.Metadata, u.Metadata) {
		t.Fatalf("GetStore after updates = %+v", got)
	}

	// A patch that would leave more than 16 pairs is refused whole.
	many := map[string]*string{}
	for i := range 15 {
		many[string(rune('k'))+strings.Repeat("x", i)] = ptr("v")
	}
	_, err = b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Name: ptr("renamed"), Metadata: many})
	wantErr(t, err, store.ErrInvalid, "UpdateStore to 17 metadata pairs")
	got, err = b.GetStore(ctx, s.ID)
	ok(t, err, "GetStore")
	if got.Name != "new" || len(got.Metadata) != 2 {
		t.Fatalf("a refused update changed the store: %+v", got)
	}

	_, err = b.UpdateStore(ctx, "memstore_doesnotexist", store.UpdateStoreInput{Name: ptr("x")})
	wantErr(t, err, store.ErrNotFound, "UpdateStore unknown")
}

func testStoreList(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	var created []string
	for _, n := range []string{"s1", "s2", "s3", "s4", "s5"} {
		created = append(created, newStore(t, b, n).ID)
	}
	want := reversed(created)

	// limit 2: pages of 2, 2, 1; next_page "" only on the last.
	var got []string
	opts := store.ListStoresOptions{Limit: 2}
	var sizes []int
	for range maxPages {
		p, err := b.ListStores(ctx, opts)
		ok(t, err, "ListStores")
		sizes = append(sizes, len(p.Data))
		got = append(got, storeIDs(p.Data)...)
		if p.NextPage == "" {
			break
		}
		opts.Page = p.NextPage
	}
	equalStrings(t, "ListStores limit 2, newest first", got, want)
	if len(sizes) != 3 || sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 1 {
		t.Fatalf("page sizes = %v, want [2 2 1]", sizes)
	}

	p, err := b.ListStores(ctx, store.ListStoresOptions{})
	ok(t, err, "ListStores default limit")
	equalStrings(t, "ListStores default", storeIDs(p.Data), want)
	if p.NextPage != "" {
		t.Fatalf("ListStores with everything on one page has next_page %q", p.NextPage)
	}
	p, err = b.ListStores(ctx, store.ListStoresOptions{Limit: 5})
	ok(t, err, "ListStores limit 5")
	if len(p.Data) != 5 || p.NextPage != "" {
		t.Fatalf("ListStores limit 5 of 5: %d items, next_page %q; want 5 and none", len(p.Data), p.NextPage)
	}
	for i := range p.Data {
		if p.Data[i].Type != store.TypeMemoryStore || p.Data[i].Metadata == nil {
			t.Fatalf("listed store %+v: want type memory_store and a non-nil metadata map", p.Data[i])
		}
	}

	_, err = b.ListStores(ctx, store.ListStoresOptions{Page: "not a token!"})
	wantErr(t, err, store.ErrInvalid, "ListStores bad page token")
}

func testStoreListArchived(t *testing.T, open Opener) {
	b := open(t, 0)
	s1, s2, s3 := newStore(t, b, "s1"), newStore(t, b, "s2"), newStore(t, b, "s3")
	_, err := b.ArchiveStore(t.Context(), s2.ID)
	ok(t, err, "ArchiveStore")

	for _, limit := range []int{0, 1} {
		got := storeIDs(allStores(t, b, store.ListStoresOptions{Limit: limit}))
		equalStrings(t, "ListStores without archived", got, []string{s3.ID, s1.ID})
		all := allStores(t, b, store.ListStoresOptions{Limit: limit, IncludeArchived: true})
		equalStrings(t, "ListStores include_archived", storeIDs(all), []string{s3.ID, s2.ID, s1.ID})
		if all[1].ArchivedAt == nil || all[0].ArchivedAt != nil || all[2].ArchivedAt != nil {
			t.Fatalf("archived_at in listing: %v %v %v; want only s2 set", all[0].ArchivedAt, all[1].ArchivedAt, all[2].ArchivedAt)
		}
	}
}

func testStoreListCreatedAt(t *testing.T, open Opener) {
	b := open(t, 0)
	s1 := newStore(t, b, "s1")
	waitClockPast(t, s1.CreatedAt)
	s2 := newStore(t, b, "s2")
	waitClockPast(t, s2.CreatedAt)
	s3 := newStore(t, b, "s3")
	if !s1.CreatedAt.Before(s2.CreatedAt) || !s2.CreatedAt.Before(s3.CreatedAt) {
		t.Fatalf("created_at not increasing: %v %v %v", s1.CreatedAt, s2.CreatedAt, s3.CreatedAt)
	}
	later := s3.CreatedAt.Add(time.Microsecond)
	tests := []struct {
		name     string
		gte, lte *time.Time
		want     []string
	}{
		{"gte s2", &s2.CreatedAt, nil, []string{s3.ID, s2.ID}},
		{"lte s2", nil, &s2.CreatedAt, []string{s2.ID, s1.ID}},
		{"gte=lte=s2", &s2.CreatedAt, &s2.CreatedAt, []string{s2.ID}},
		{"gte s1 lte s3", &s1.CreatedAt, &s3.CreatedAt, []string{s3.ID, s2.ID, s1.ID}},
		{"gte after s3", &later, nil, nil},
	}
	for _, tc := range tests {
		for _, limit := range []int{0, 1} {
			got := storeIDs(allStores(t, b, store.ListStoresOptions{Limit: limit, CreatedGTE: tc.gte, CreatedLTE: tc.lte}))
			equalStrings(t, "ListStores "+tc.name, got, tc.want)
		}
	}
}

func testStoreArchive(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/a", "one")
	create(t, b, s.ID, "/b", "two")
	h := head(t, b, s.ID)

	a, err := b.ArchiveStore(ctx, s.ID)
	ok(t, err, "ArchiveStore")
	if a.ArchivedAt == nil || !a.Archived() {
		t.Fatal("ArchiveStore returned a store without archived_at")
	}
	checkUTC(t, "archived_at", *a.ArchivedAt)
	again, err := b.ArchiveStore(ctx, s.ID)
	ok(t, err, "ArchiveStore again (idempotent)")
	if again.ArchivedAt == nil || !again.ArchivedAt.Equal(*a.ArchivedAt) {
		t.Fatalf("archiving twice moved archived_at: %v then %v", a.ArchivedAt, again.ArchivedAt)
	}
	got, err := b.GetStore(ctx, s.ID)
	ok(t, err, "GetStore")
	if !got.Archived() {
		t.Fatal("GetStore after archive: not archived")
	}

	// Every memory write is refused.
	_, err = b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/c", Content: "x", Actor: apiActor})
	wantErr(t, err, store.ErrForbidden, "CreateMemory in archived store")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("changed"), Actor: apiActor})
	wantErr(t, err, store.ErrForbidden, "UpdateMemory content in archived store")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Path: ptr("/moved"), ExpectedSHA256: ptr(m.ContentSHA256), Actor: apiActor})
	wantErr(t, err, store.ErrForbidden, "UpdateMemory path in archived store")

	// Reads still work and nothing changed.
	if g := get(t, b, s.ID, m.ID); contentOf(t, g) != "one" || g.Path != "/a" || g.MemoryVersionID != m.MemoryVersionID {
		t.Fatalf("memory changed in archived store: %+v", g)
	}
	equalStrings(t, "ListMemories archived", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/a", "/b"})
	if vs := allVersions(t, b, s.ID, store.ListVersionsOptions{}); len(vs) != 2 {
		t.Fatalf("archived store has %d versions, want 2", len(vs))
	}
	if _, err := b.GetVersion(ctx, s.ID, m.MemoryVersionID); err != nil {
		t.Fatalf("GetVersion in archived store: %v", err)
	}
	if h2 := head(t, b, s.ID); h2 != h {
		t.Fatalf("refused writes moved the feed head from %d to %d", h, h2)
	}

	// Deleting memories stays possible (the SDK documents it: "You can still
	// read and delete its memories"), preconditions included.
	err = b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{ExpectedSHA256: ptr("0000000000000000000000000000000000000000000000000000000000000000"), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "DeleteMemory with a wrong precondition in archived store")
	err = b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{ExpectedSHA256: ptr(m.ContentSHA256), Actor: apiActor})
	ok(t, err, "DeleteMemory in archived store")
	equalStrings(t, "ListMemories after delete in archived store", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/b"})

	_, err = b.ArchiveStore(ctx, "memstore_doesnotexist")
	wantErr(t, err, store.ErrNotFound, "ArchiveStore unknown")
}

func testStoreDelete(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "doomed")
	keep := newStore(t, b, "kept")
	m := create(t, b, s.ID, "/a/b", "content")
	update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("content 2")})
	km := create(t, b, keep.ID, "/a/b", "kept content")

	ok(t, b.DeleteStore(ctx, s.ID), "DeleteStore")

	_, err := b.GetStore(ctx, s.ID)
	wantErr(t, err, store.ErrNotFound, "GetStore after delete")
	_, err = b.GetMemory(ctx, s.ID, m.ID)
	wantErr(t, err, store.ErrNotFound, "GetMemory after store delete")
	_, err = b.ListMemories(ctx, s.ID, store.ListMemoriesOptions{})
	wantErr(t, err, store.ErrNotFound, "ListMemories after store delete")
	_, err = b.ListVersions(ctx, s.ID, store.ListVersionsOptions{})
	wantErr(t, err, store.ErrNotFound, "ListVersions after store delete")
	_, err = b.GetVersion(ctx, s.ID, m.MemoryVersionID)
	wantErr(t, err, store.ErrNotFound, "GetVersion after store delete")
	_, err = b.Changes(ctx, s.ID, 0, 0)
	wantErr(t, err, store.ErrNotFound, "Changes after store delete")
	_, err = b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/x", Content: "", Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "CreateMemory after store delete")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("x"), Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "UpdateMemory after store delete")
	err = b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "DeleteMemory after store delete")
	_, err = b.RedactVersion(ctx, s.ID, m.MemoryVersionID, apiActor)
	wantErr(t, err, store.ErrNotFound, "RedactVersion after store delete")
	_, err = b.UpdateStore(ctx, s.ID, store.UpdateStoreInput{Name: ptr("x")})
	wantErr(t, err, store.ErrNotFound, "UpdateStore after delete")
	_, err = b.ArchiveStore(ctx, s.ID)
	wantErr(t, err, store.ErrNotFound, "ArchiveStore after delete")
	wantErr(t, b.DeleteStore(ctx, s.ID), store.ErrNotFound, "DeleteStore twice")

	equalStrings(t, "stores after delete", storeIDs(allStores(t, b, store.ListStoresOptions{IncludeArchived: true})), []string{keep.ID})
	// The other store, with a memory at the same path, is untouched.
	if g := get(t, b, keep.ID, km.ID); contentOf(t, g) != "kept content" {
		t.Fatalf("other store's memory changed: %+v", g)
	}
	if vs := allVersions(t, b, keep.ID, store.ListVersionsOptions{}); len(vs) != 1 {
		t.Fatalf("other store has %d versions, want 1", len(vs))
	}
}
