package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
)

var memoryTests = []test{
	{"Create", testMemoryCreate},
	{"ContentRoundTrip", testMemoryContentRoundTrip},
	{"NotFound", testMemoryNotFound},
	{"PathConflict", testMemoryPathConflict},
	{"FileDirExclusivity", testFileDirExclusivity},
	{"RenameExclusivity", testRenameExclusivity},
	{"UpdatePrecondition", testUpdatePrecondition},
	{"Rename", testRename},
	{"RenameConflict", testRenameConflict},
	{"NoOpUpdate", testNoOpUpdate},
	{"Delete", testMemoryDelete},
	{"Cap", testMemoryCap},
}

// wantConflict fails the test unless err is ErrPathConflict naming the
// conflicting memory.
func wantConflict(t *testing.T, err error, what string, withID, withPath string) {
	t.Helper()
	wantErr(t, err, store.ErrPathConflict, what)
	var se *store.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v (%T) is not a *store.Error", what, err, err)
	}
	if se.ConflictingMemoryID != withID || se.ConflictingPath != withPath {
		t.Fatalf("%s: conflicting memory %q at %q, want %q at %q", what, se.ConflictingMemoryID, se.ConflictingPath, withID, withPath)
	}
}

// versionCount counts the versions of one memory.
func versionCount(t *testing.T, b store.Backend, storeID, memoryID string) int {
	t.Helper()
	return len(allVersions(t, b, storeID, store.ListVersionsOptions{MemoryID: memoryID}))
}

func testMemoryCreate(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	content := "héllo wörld ✓\n" // 18 bytes, 14 runes
	m := createBy(t, b, s.ID, "/notes/hello.md", content, sessionActor)
	if !strings.HasPrefix(m.ID, store.PrefixMemory) || m.Type != store.TypeMemory || m.MemoryStoreID != s.ID || m.Path != "/notes/hello.md" {
		t.Fatalf("created memory %+v: want id prefix %q, type memory, store %s, path /notes/hello.md", m, store.PrefixMemory, s.ID)
	}
	if m.ContentSHA256 != store.SHA256Hex(content) || m.ContentSizeBytes != int64(len(content)) || m.ContentSizeBytes != 18 {
		t.Fatalf("sha %s size %d, want %s and 18 (bytes, not characters)", m.ContentSHA256, m.ContentSizeBytes, store.SHA256Hex(content))
	}
	if !strings.HasPrefix(m.MemoryVersionID, store.PrefixVersion) {
		t.Fatalf("memory_version_id %q, want prefix %q", m.MemoryVersionID, store.PrefixVersion)
	}
	checkUTC(t, "created_at", m.CreatedAt)
	if !m.UpdatedAt.Equal(m.CreatedAt) {
		t.Fatalf("new memory: updated_at %v != created_at %v", m.UpdatedAt, m.CreatedAt)
	}

	g := get(t, b, s.ID, m.ID)
	if contentOf(t, g) != content || g.ID != m.ID || g.Path != m.Path || g.ContentSHA256 != m.ContentSHA256 ||
		g.ContentSizeBytes != m.ContentSizeBytes || g.MemoryVersionID != m.MemoryVersionID || !g.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("GetMemory = %+v, want %+v with content", g, m)
	}

	v, err := b.GetVersion(ctx, s.ID, m.MemoryVersionID)
	ok(t, err, "GetVersion of a new memory")
	if v.Operation != store.OpCreated || v.MemoryID != m.ID || v.MemoryStoreID != s.ID || v.Path == nil || *v.Path != m.Path ||
		v.Content == nil || *v.Content != content || v.ContentSHA256 == nil || *v.ContentSHA256 != m.ContentSHA256 ||
		v.ContentSizeBytes == nil || *v.ContentSizeBytes != 18 || v.CreatedBy == nil || *v.CreatedBy != sessionActor {
		t.Fatalf("version of a new memory = %+v", v)
	}
	if n := versionCount(t, b, s.ID, m.ID); n != 1 {
		t.Fatalf("new memory has %d versions, want 1", n)
	}

	e := create(t, b, s.ID, "/empty", "")
	if e.ContentSHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" || e.ContentSizeBytes != 0 {
		t.Fatalf("empty memory: sha %s size %d", e.ContentSHA256, e.ContentSizeBytes)
	}
	if g := get(t, b, s.ID, e.ID); g.Content == nil || *g.Content != "" {
		t.Fatalf("empty memory reads back as %v, want a non-nil \"\"", g.Content)
	}
}

// testMemoryContentRoundTrip stores content at the edges of what
// validation allows (any valid UTF-8 up to 102,400 bytes) and reads it
// back byte for byte.
func testMemoryContentRoundTrip(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	contents := map[string]string{
		"/max-ascii":     strings.Repeat("x", store.MaxContentBytes),
		"/max-multibyte": strings.Repeat("é", store.MaxContentBytes/2),
		"/controls":      "tab\there\r\nnul\x00byte\x01\x7f\u200b\u2028\ufeff",
		"/not-nfc":       "e\u0301 vs \u00e9",
		"/astral":        "\U0001F600\U0010FFFF",
		"/sql-ish":       "'; DROP TABLE memories; -- \\ ? $1 %",
	}
	ids := map[string]string{}
	for path, c := range contents {
		if err := store.ValidateContent(c); err != nil {
			t.Fatalf("test content for %s is invalid: %v", path, err)
		}
		m := create(t, b, s.ID, path, c)
		ids[path] = m.ID
		if m.ContentSHA256 != store.SHA256Hex(c) || m.ContentSizeBytes != int64(len(c)) {
			t.Fatalf("%s: sha/size %s/%d, want %s/%d", path, m.ContentSHA256, m.ContentSizeBytes, store.SHA256Hex(c), len(c))
		}
	}
	for path, c := range contents {
		g := get(t, b, s.ID, ids[path])
		if got := contentOf(t, g); got != c {
			t.Fatalf("%s: content read back differs (len %d, want %d)", path, len(got), len(c))
		}
		v, err := b.GetVersion(t.Context(), s.ID, g.MemoryVersionID)
		ok(t, err, "GetVersion")
		if v.Content == nil || *v.Content != c {
			t.Fatalf("%s: version content differs", path)
		}
	}
	// Updating to and from the edge values round-trips too.
	m := update(t, b, s.ID, ids["/controls"], store.UpdateMemoryInput{Content: ptr(contents["/max-multibyte"])})
	if contentOf(t, get(t, b, s.ID, m.ID)) != contents["/max-multibyte"] {
		t.Fatal("updated content differs")
	}
}

func testMemoryNotFound(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	other := newStore(t, b, "other")
	m := create(t, b, s.ID, "/a", "x")

	_, err := b.GetMemory(ctx, s.ID, "mem_doesnotexist")
	wantErr(t, err, store.ErrNotFound, "GetMemory unknown memory")
	_, err = b.GetMemory(ctx, "memstore_doesnotexist", "mem_doesnotexist")
	wantErr(t, err, store.ErrNotFound, "GetMemory unknown store")
	_, err = b.GetMemory(ctx, "memstore_doesnotexist", m.ID)
	wantErr(t, err, store.ErrNotFound, "GetMemory real memory, unknown store")
	_, err = b.CreateMemory(ctx, "memstore_doesnotexist", store.CreateMemoryInput{Path: "/a", Content: "x", Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "CreateMemory unknown store")
	_, err = b.UpdateMemory(ctx, s.ID, "mem_doesnotexist", store.UpdateMemoryInput{Content: ptr("y"), Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "UpdateMemory unknown memory")
	err = b.DeleteMemory(ctx, s.ID, "mem_doesnotexist", store.DeleteMemoryInput{Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "DeleteMemory unknown memory")
	_, err = b.ListMemories(ctx, "memstore_doesnotexist", store.ListMemoriesOptions{})
	wantErr(t, err, store.ErrNotFound, "ListMemories unknown store")

	// A memory is reachable only through its own store.
	_, err = b.GetMemory(ctx, other.ID, m.ID)
	wantErr(t, err, store.ErrNotFound, "GetMemory through another store")
	_, err = b.UpdateMemory(ctx, other.ID, m.ID, store.UpdateMemoryInput{Content: ptr("hijack"), Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "UpdateMemory through another store")
	err = b.DeleteMemory(ctx, other.ID, m.ID, store.DeleteMemoryInput{Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "DeleteMemory through another store")
	_, err = b.GetVersion(ctx, other.ID, m.MemoryVersionID)
	wantErr(t, err, store.ErrNotFound, "GetVersion through another store")
	_, err = b.RedactVersion(ctx, other.ID, m.MemoryVersionID, apiActor)
	wantErr(t, err, store.ErrNotFound, "RedactVersion through another store")
	if g := get(t, b, s.ID, m.ID); contentOf(t, g) != "x" || g.MemoryVersionID != m.MemoryVersionID {
		t.Fatalf("memory changed through another store: %+v", g)
	}
	if names := listNames(t, b, other.ID, store.ListMemoriesOptions{}); len(names) != 0 {
		t.Fatalf("other store lists %q, want nothing", names)
	}
}

func testMemoryPathConflict(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/a/b.md", "first")
	_, err := b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/a/b.md", Content: "second", Actor: apiActor})
	wantConflict(t, err, "CreateMemory on a taken path", m.ID, "/a/b.md")
	_, err = b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/a/b.md", Content: "first", Actor: apiActor})
	wantConflict(t, err, "CreateMemory on a taken path with identical content", m.ID, "/a/b.md")
	if g := get(t, b, s.ID, m.ID); contentOf(t, g) != "first" || g.MemoryVersionID != m.MemoryVersionID {
		t.Fatalf("a refused create changed the memory: %+v", g)
	}
	if n := versionCount(t, b, s.ID, m.ID); n != 1 {
		t.Fatalf("%d versions after refused creates, want 1", n)
	}

	// Paths are case-sensitive, and each store has its own namespace.
	create(t, b, s.ID, "/A/b.md", "upper dir")
	create(t, b, s.ID, "/a/B.md", "upper file")
	other := newStore(t, b, "other")
	create(t, b, other.ID, "/a/b.md", "other store")
	equalStrings(t, "paths", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/A/b.md", "/a/B.md", "/a/b.md"})
}

func testFileDirExclusivity(t *testing.T, open Opener) {
	b := open(t, 0)
	tests := []struct {
		existing string
		create   string
		conflict bool
	}{
		{"/a", "/a/b", true},
		{"/a", "/a/b/c/d", true},
		{"/a/b", "/a", true},
		{"/x/y/z", "/x", true},
		{"/x/y/z", "/x/y", true},
		{"/x/y/z", "/x/y/z/w", true},
		// Neighbours that share a byte prefix but not a segment are fine.
		{"/a", "/ab", false},
		{"/a", "/ab/c", false},
		{"/a/b", "/a!", false},
		{"/a/b", "/a.b", false},
		{"/a/b", "/a0", false},
		{"/ab/c", "/a", false},
		{"/a/bc", "/a/b/c", false},
	}
	for _, tc := range tests {
		s := newStore(t, b, tc.existing+" then "+tc.create)
		e := create(t, b, s.ID, tc.existing, "existing")
		_, err := b.CreateMemory(t.Context(), s.ID, store.CreateMemoryInput{Path: tc.create, Content: "new", Actor: apiActor})
		what := fmt.Sprintf("create %s with %s present", tc.create, tc.existing)
		if tc.conflict {
			wantConflict(t, err, what, e.ID, tc.existing)
			equalStrings(t, what, listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{tc.existing})
		} else {
			ok(t, err, what)
		}
	}
}

func testRenameExclusivity(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	f := create(t, b, s.ID, "/f", "file")
	d := create(t, b, s.ID, "/d/e", "in a dir")

	_, err := b.UpdateMemory(ctx, s.ID, f.ID, store.UpdateMemoryInput{Path: ptr("/d"), Actor: apiActor})
	wantConflict(t, err, "rename /f onto directory /d", d.ID, "/d/e")
	_, err = b.UpdateMemory(ctx, s.ID, f.ID, store.UpdateMemoryInput{Path: ptr("/d/e/g"), Actor: apiActor})
	wantConflict(t, err, "rename /f below file /d/e", d.ID, "/d/e")
	_, err = b.UpdateMemory(ctx, s.ID, d.ID, store.UpdateMemoryInput{Path: ptr("/f/x"), Content: ptr("changed"), Actor: apiActor})
	wantConflict(t, err, "rename /d/e below file /f", f.ID, "/f")
	equalStrings(t, "after refused renames", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/d/e", "/f"})
	if g := get(t, b, s.ID, d.ID); contentOf(t, g) != "in a dir" {
		t.Fatal("a refused rename changed the content")
	}

	// A memory may move onto its own parent directory (it was the only
	// child) and back below itself: it never conflicts with itself.
	u := update(t, b, s.ID, d.ID, store.UpdateMemoryInput{Path: ptr("/d")})
	if u.Path != "/d" || u.ID != d.ID {
		t.Fatalf("rename /d/e -> /d = %+v", u)
	}
	u = update(t, b, s.ID, d.ID, store.UpdateMemoryInput{Path: ptr("/d/e/deeper")})
	if u.Path != "/d/e/deeper" {
		t.Fatalf("rename /d -> /d/e/deeper = %+v", u)
	}
	equalStrings(t, "after renames", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/d/e/deeper", "/f"})
}

func testUpdatePrecondition(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/p", "v1")

	u := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("v2"), ExpectedSHA256: ptr(m.ContentSHA256), Actor: sessionActor})
	if u.ID != m.ID || u.Path != "/p" || u.ContentSHA256 != store.SHA256Hex("v2") || u.ContentSizeBytes != 2 ||
		u.MemoryVersionID == m.MemoryVersionID || !u.CreatedAt.Equal(m.CreatedAt) || u.UpdatedAt.Before(m.UpdatedAt) {
		t.Fatalf("update with matching precondition = %+v (was %+v)", u, m)
	}

	// The old sha no longer matches: nothing may change.
	_, err := b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("v3"), ExpectedSHA256: ptr(m.ContentSHA256), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "UpdateMemory with stale precondition")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Path: ptr("/q"), ExpectedSHA256: ptr(m.ContentSHA256), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "rename with stale precondition")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("v3"), ExpectedSHA256: ptr(strings.Repeat("0", 64)), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "UpdateMemory with unrelated precondition")
	g := get(t, b, s.ID, m.ID)
	if contentOf(t, g) != "v2" || g.Path != "/p" || g.MemoryVersionID != u.MemoryVersionID || g.ContentSHA256 != u.ContentSHA256 {
		t.Fatalf("failed preconditions changed the memory: %+v", g)
	}
	if n := versionCount(t, b, s.ID, m.ID); n != 2 {
		t.Fatalf("%d versions, want 2", n)
	}

	// Without a precondition the update is unconditional.
	u3 := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("v3")})
	if contentOf(t, get(t, b, s.ID, m.ID)) != "v3" || u3.ContentSHA256 != store.SHA256Hex("v3") {
		t.Fatal("unconditional update did not apply")
	}
}

func testRename(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/old/name.md", "body")

	r := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Path: ptr("/new/name.md"), ExpectedSHA256: ptr(m.ContentSHA256)})
	if r.ID != m.ID || r.Path != "/new/name.md" || r.ContentSHA256 != m.ContentSHA256 || r.MemoryVersionID == m.MemoryVersionID {
		t.Fatalf("rename = %+v (was %+v): want same id and sha, new path and version", r, m)
	}
	g := get(t, b, s.ID, m.ID)
	if g.Path != "/new/name.md" || contentOf(t, g) != "body" {
		t.Fatalf("GetMemory after rename = %+v", g)
	}
	equalStrings(t, "after rename", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/new/name.md"})
	v, err := b.GetVersion(ctx, s.ID, r.MemoryVersionID)
	ok(t, err, "GetVersion of rename")
	if v.Operation != store.OpModified || v.Path == nil || *v.Path != "/new/name.md" || v.Content == nil || *v.Content != "body" {
		t.Fatalf("rename version = %+v", v)
	}
	// The old path is free again.
	n := create(t, b, s.ID, "/old/name.md", "new memory")
	if n.ID == m.ID {
		t.Fatal("a new memory at the old path reused the renamed memory's id")
	}

	// Rename and change content at once.
	both := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Path: ptr("/x"), Content: ptr("body 2"), ExpectedSHA256: ptr(r.ContentSHA256)})
	if both.ID != m.ID || both.Path != "/x" || both.ContentSHA256 != store.SHA256Hex("body 2") {
		t.Fatalf("rename+edit = %+v", both)
	}
	if n := versionCount(t, b, s.ID, m.ID); n != 3 {
		t.Fatalf("%d versions, want 3 (created, renamed, renamed+edited)", n)
	}
}

func testRenameConflict(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	a := create(t, b, s.ID, "/a", "A")
	bm := create(t, b, s.ID, "/b", "B")
	_, err := b.UpdateMemory(ctx, s.ID, a.ID, store.UpdateMemoryInput{Path: ptr("/b"), Actor: apiActor})
	wantConflict(t, err, "rename onto a taken path", bm.ID, "/b")
	_, err = b.UpdateMemory(ctx, s.ID, a.ID, store.UpdateMemoryInput{Path: ptr("/b"), Content: ptr("A2"), ExpectedSHA256: ptr(a.ContentSHA256), Actor: apiActor})
	wantConflict(t, err, "rename+edit onto a taken path", bm.ID, "/b")
	if g := get(t, b, s.ID, a.ID); g.Path != "/a" || contentOf(t, g) != "A" || g.MemoryVersionID != a.MemoryVersionID {
		t.Fatalf("refused rename changed /a: %+v", g)
	}
	if g := get(t, b, s.ID, bm.ID); g.Path != "/b" || contentOf(t, g) != "B" {
		t.Fatalf("refused rename changed /b: %+v", g)
	}
	if vs := allVersions(t, b, s.ID, store.ListVersionsOptions{}); len(vs) != 2 {
		t.Fatalf("%d versions, want 2", len(vs))
	}
}

func testNoOpUpdate(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/n", "same")
	h := head(t, b, s.ID)
	for i, in := range []store.UpdateMemoryInput{
		{},
		{Content: ptr("same")},
		{Path: ptr("/n")},
		{Content: ptr("same"), Path: ptr("/n"), ExpectedSHA256: ptr(m.ContentSHA256)},
	} {
		u := update(t, b, s.ID, m.ID, in)
		if u.MemoryVersionID != m.MemoryVersionID || !u.UpdatedAt.Equal(m.UpdatedAt) || u.Path != "/n" || u.ContentSHA256 != m.ContentSHA256 {
			t.Fatalf("no-op update %d changed the memory: %+v (was %+v)", i, u, m)
		}
	}
	// A no-op with a stale precondition still fails the precondition.
	_, err := b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("same"), ExpectedSHA256: ptr(store.SHA256Hex("other")), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "no-op update with a stale precondition")
	if n := versionCount(t, b, s.ID, m.ID); n != 1 {
		t.Fatalf("no-op updates created versions: %d, want 1", n)
	}
	if h2 := head(t, b, s.ID); h2 != h {
		t.Fatalf("no-op updates moved the feed head from %d to %d", h, h2)
	}
}

func testMemoryDelete(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := create(t, b, s.ID, "/d", "x")

	err := b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{ExpectedSHA256: ptr(store.SHA256Hex("y")), Actor: apiActor})
	wantErr(t, err, store.ErrPreconditionFailed, "DeleteMemory with wrong sha")
	if g := get(t, b, s.ID, m.ID); contentOf(t, g) != "x" {
		t.Fatal("memory changed by a refused delete")
	}
	ok(t, b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{ExpectedSHA256: ptr(m.ContentSHA256), Actor: sessionActor}), "DeleteMemory with right sha")

	_, err = b.GetMemory(ctx, s.ID, m.ID)
	wantErr(t, err, store.ErrNotFound, "GetMemory after delete")
	wantErr(t, b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{Actor: apiActor}), store.ErrNotFound, "DeleteMemory twice")
	_, err = b.UpdateMemory(ctx, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("z"), Actor: apiActor})
	wantErr(t, err, store.ErrNotFound, "UpdateMemory after delete")
	if names := listNames(t, b, s.ID, store.ListMemoriesOptions{}); len(names) != 0 {
		t.Fatalf("deleted memory still listed: %q", names)
	}

	vs := allVersions(t, b, s.ID, store.ListVersionsOptions{MemoryID: m.ID, Full: true})
	if len(vs) != 2 || vs[0].Operation != store.OpDeleted || vs[1].Operation != store.OpCreated {
		t.Fatalf("versions after delete: %+v, want deleted then created", vs)
	}
	del := vs[0]
	if del.Path == nil || *del.Path != "/d" || del.Content != nil || del.ContentSHA256 != nil || del.ContentSizeBytes != nil ||
		del.CreatedBy == nil || *del.CreatedBy != sessionActor || del.MemoryID != m.ID {
		t.Fatalf("deleted version = %+v: want path /d, nil content/sha/size, created_by the session", del)
	}

	// The path is free again, for a new memory with a new id.
	n := create(t, b, s.ID, "/d", "again")
	if n.ID == m.ID {
		t.Fatal("re-created memory reused the deleted id")
	}
	ok(t, b.DeleteMemory(ctx, s.ID, n.ID, store.DeleteMemoryInput{Actor: apiActor}), "DeleteMemory without precondition")
}

func testMemoryCap(t *testing.T, open Opener) {
	b := open(t, 3)
	ctx := t.Context()
	s := newStore(t, b, "capped")
	m1 := create(t, b, s.ID, "/1", "one")
	m2 := create(t, b, s.ID, "/2", "two")
	m3 := create(t, b, s.ID, "/3", "three")

	_, err := b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/4", Content: "four", Actor: apiActor})
	wantErr(t, err, store.ErrLimit, "4th create at a cap of 3")
	var se *store.Error
	if !errors.As(err, &se) || se.Message == "" {
		t.Fatalf("cap error %v: want a *store.Error with a message", err)
	}
	// Existing memories stay readable and editable.
	update(t, b, s.ID, m1.ID, store.UpdateMemoryInput{Content: ptr("one, edited")})
	update(t, b, s.ID, m2.ID, store.UpdateMemoryInput{Path: ptr("/two")})
	if contentOf(t, get(t, b, s.ID, m1.ID)) != "one, edited" {
		t.Fatal("edit at the cap did not apply")
	}
	// The cap is per store.
	other := newStore(t, b, "other")
	for _, p := range []string{"/1", "/2", "/3"} {
		create(t, b, other.ID, p, "x")
	}

	ok(t, b.DeleteMemory(ctx, s.ID, m3.ID, store.DeleteMemoryInput{Actor: apiActor}), "DeleteMemory at the cap")
	create(t, b, s.ID, "/4", "four")
	_, err = b.CreateMemory(ctx, s.ID, store.CreateMemoryInput{Path: "/5", Content: "five", Actor: apiActor})
	wantErr(t, err, store.ErrLimit, "create at the cap after delete+create")
	equalStrings(t, "capped store", listNames(t, b, s.ID, store.ListMemoriesOptions{}), []string{"/1", "/4", "/two"})
}
