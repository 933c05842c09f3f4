package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

var versionTests = []test{
	{"List", testVersionsList},
	{"Filters", testVersionsFilters},
	{"Get", testVersionGet},
	{"Redact", testVersionRedact},
}

// wantVersion describes the expected state of one version.
type wantVersion struct {
	id, memoryID, op string
	path             *string // nil: redacted
	content          *string // nil: deleted or redacted
	by               store.Actor
}

func checkVersion(t *testing.T, what string, v store.Version, w wantVersion, full bool) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: version %+v: %s", what, v, fmt.Sprintf(format, args...))
	}
	if w.id != "" && v.ID != w.id {
		fail("id %s, want %s", v.ID, w.id)
	}
	if !strings.HasPrefix(v.ID, store.PrefixVersion) || v.Type != store.TypeMemoryVersion {
		fail("want id prefix %s and type %s", store.PrefixVersion, store.TypeMemoryVersion)
	}
	if v.MemoryID != w.memoryID || v.Operation != w.op {
		fail("memory %s op %s, want %s %s", v.MemoryID, v.Operation, w.memoryID, w.op)
	}
	if (v.Path == nil) != (w.path == nil) || (v.Path != nil && *v.Path != *w.path) {
		fail("path %v, want %v", deref(v.Path), deref(w.path))
	}
	if w.content == nil {
		if v.Content != nil || v.ContentSHA256 != nil || v.ContentSizeBytes != nil {
			fail("want nil content, sha and size")
		}
	} else {
		if v.ContentSHA256 == nil || *v.ContentSHA256 != store.SHA256Hex(*w.content) || v.ContentSizeBytes == nil || *v.ContentSizeBytes != int64(len(*w.content)) {
			fail("sha/size %v/%v, want those of %q", deref(v.ContentSHA256), v.ContentSizeBytes, *w.content)
		}
		if full && (v.Content == nil || *v.Content != *w.content) {
			fail("content %v, want %q", deref(v.Content), *w.content)
		}
		if !full && v.Content != nil {
			fail("basic view carries content %q", *v.Content)
		}
	}
	if v.CreatedBy == nil || *v.CreatedBy != w.by {
		fail("created_by %+v, want %+v", v.CreatedBy, w.by)
	}
	checkUTC(t, what+" created_at", v.CreatedAt)
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func testVersionsList(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	m := createBy(t, b, s.ID, "/v", "one", apiActor)
	u2 := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("two"), Actor: sessionActor})
	u3 := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Path: ptr("/w"), Actor: otherAPI})
	ok(t, b.DeleteMemory(t.Context(), s.ID, m.ID, store.DeleteMemoryInput{Actor: otherSession}), "DeleteMemory")
	o := createBy(t, b, s.ID, "/o", "other", apiActor)

	for _, full := range []bool{false, true} {
		for _, limit := range []int{0, 1, 2, 100} {
			vs := allVersions(t, b, s.ID, store.ListVersionsOptions{Limit: limit, Full: full})
			if len(vs) != 5 {
				t.Fatalf("%d versions, want 5", len(vs))
			}
			what := fmt.Sprintf("full=%v limit=%d", full, limit)
			checkVersion(t, what+" [0]", vs[0], wantVersion{o.MemoryVersionID, o.ID, store.OpCreated, ptr("/o"), ptr("other"), apiActor}, full)
			checkVersion(t, what+" [1] deleted", vs[1], wantVersion{"", m.ID, store.OpDeleted, ptr("/w"), nil, otherSession}, full)
			checkVersion(t, what+" [2] renamed", vs[2], wantVersion{u3.MemoryVersionID, m.ID, store.OpModified, ptr("/w"), ptr("two"), otherAPI}, full)
			checkVersion(t, what+" [3] edited", vs[3], wantVersion{u2.MemoryVersionID, m.ID, store.OpModified, ptr("/v"), ptr("two"), sessionActor}, full)
			checkVersion(t, what+" [4] created", vs[4], wantVersion{m.MemoryVersionID, m.ID, store.OpCreated, ptr("/v"), ptr("one"), apiActor}, full)
			for i := 1; i < len(vs); i++ {
				if vs[i].CreatedAt.After(vs[i-1].CreatedAt) {
					t.Fatalf("versions not newest first: %v after %v", vs[i].CreatedAt, vs[i-1].CreatedAt)
				}
				if vs[i].RedactedAt != nil || vs[i].RedactedBy != nil {
					t.Fatalf("unredacted version has redacted_at/by: %+v", vs[i])
				}
			}
			for _, v := range vs {
				if v.MemoryStoreID != s.ID {
					t.Fatalf("version %s has store %s, want %s", v.ID, v.MemoryStoreID, s.ID)
				}
			}
		}
	}
}

func testVersionsFilters(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	k1, k2 := store.APIActor("apikey_1"), store.APIActor("apikey_2")
	s1, s2 := store.SessionActor("sesn_1"), store.SessionActor("sesn_2")

	a := createBy(t, b, s.ID, "/a", "a1", k1) // v1
	waitClockPast(t, a.UpdatedAt)
	a2 := update(t, b, s.ID, a.ID, store.UpdateMemoryInput{Content: ptr("a2"), Actor: s1}) // v2
	waitClockPast(t, a2.UpdatedAt)
	bm := createBy(t, b, s.ID, "/b", "b1", s2) // v3
	waitClockPast(t, bm.UpdatedAt)
	b2 := update(t, b, s.ID, bm.ID, store.UpdateMemoryInput{Content: ptr("b2"), Actor: k2}) // v4
	waitClockPast(t, b2.UpdatedAt)
	ok(t, b.DeleteMemory(ctx, s.ID, a.ID, store.DeleteMemoryInput{Actor: k1}), "DeleteMemory") // v5

	all := allVersions(t, b, s.ID, store.ListVersionsOptions{})
	if len(all) != 5 {
		t.Fatalf("%d versions, want 5", len(all))
	}
	v1, v2, v3, v4, v5 := all[4], all[3], all[2], all[1], all[0]
	if v1.ID != a.MemoryVersionID || v2.ID != a2.MemoryVersionID || v3.ID != bm.MemoryVersionID || v4.ID != b2.MemoryVersionID || v5.Operation != store.OpDeleted {
		t.Fatalf("unexpected version order: %v", versionIDs(all))
	}
	for i := 1; i < len(all); i++ {
		if !all[i].CreatedAt.Before(all[i-1].CreatedAt) {
			t.Fatalf("versions %d and %d share created_at %v; the clock wait failed", i, i-1, all[i].CreatedAt)
		}
	}
	ids := func(vs ...store.Version) []string { return versionIDs(vs) }
	tests := []struct {
		name string
		opts store.ListVersionsOptions
		want []string
	}{
		{"memory a", store.ListVersionsOptions{MemoryID: a.ID}, ids(v5, v2, v1)},
		{"memory b", store.ListVersionsOptions{MemoryID: bm.ID}, ids(v4, v3)},
		{"unknown memory", store.ListVersionsOptions{MemoryID: "mem_doesnotexist"}, nil},
		{"created", store.ListVersionsOptions{Operation: store.OpCreated}, ids(v3, v1)},
		{"modified", store.ListVersionsOptions{Operation: store.OpModified}, ids(v4, v2)},
		{"deleted", store.ListVersionsOptions{Operation: store.OpDeleted}, ids(v5)},
		{"session 1", store.ListVersionsOptions{SessionID: "sesn_1"}, ids(v2)},
		{"session 2", store.ListVersionsOptions{SessionID: "sesn_2"}, ids(v3)},
		{"unknown session", store.ListVersionsOptions{SessionID: "sesn_none"}, nil},
		{"api key 1", store.ListVersionsOptions{APIKeyID: "apikey_1"}, ids(v5, v1)},
		{"api key 2", store.ListVersionsOptions{APIKeyID: "apikey_2"}, ids(v4)},
		{"api key filter with a session id", store.ListVersionsOptions{APIKeyID: "sesn_1"}, nil},
		{"session filter with an api key id", store.ListVersionsOptions{SessionID: "apikey_1"}, nil},
		{"created gte v3", store.ListVersionsOptions{CreatedGTE: &v3.CreatedAt}, ids(v5, v4, v3)},
		{"created lte v2", store.ListVersionsOptions{CreatedLTE: &v2.CreatedAt}, ids(v2, v1)},
		{"created v2..v4", store.ListVersionsOptions{CreatedGTE: &v2.CreatedAt, CreatedLTE: &v4.CreatedAt}, ids(v4, v3, v2)},
		{"created after v5", store.ListVersionsOptions{CreatedGTE: ptr(v5.CreatedAt.Add(time.Microsecond))}, nil},
		{"memory a modified", store.ListVersionsOptions{MemoryID: a.ID, Operation: store.OpModified}, ids(v2)},
		{"memory b by key 2", store.ListVersionsOptions{MemoryID: bm.ID, APIKeyID: "apikey_2"}, ids(v4)},
	}
	for _, tc := range tests {
		for _, limit := range []int{0, 1} {
			opts := tc.opts
			opts.Limit = limit
			equalStrings(t, fmt.Sprintf("%s limit %d", tc.name, limit), versionIDs(allVersions(t, b, s.ID, opts)), tc.want)
		}
	}
	_, err := b.ListVersions(ctx, "memstore_doesnotexist", store.ListVersionsOptions{})
	wantErr(t, err, store.ErrNotFound, "ListVersions unknown store")
	_, err = b.ListVersions(ctx, s.ID, store.ListVersionsOptions{Page: "garbage!"})
	wantErr(t, err, store.ErrInvalid, "ListVersions bad page token")
}

func testVersionGet(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	m := createBy(t, b, s.ID, "/g", "c1", sessionActor)
	u := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("c2")})

	v, err := b.GetVersion(ctx, s.ID, m.MemoryVersionID)
	ok(t, err, "GetVersion")
	checkVersion(t, "GetVersion of the first version", *v, wantVersion{m.MemoryVersionID, m.ID, store.OpCreated, ptr("/g"), ptr("c1"), sessionActor}, true)
	v, err = b.GetVersion(ctx, s.ID, u.MemoryVersionID)
	ok(t, err, "GetVersion")
	checkVersion(t, "GetVersion of the head", *v, wantVersion{u.MemoryVersionID, m.ID, store.OpModified, ptr("/g"), ptr("c2"), apiActor}, true)

	_, err = b.GetVersion(ctx, s.ID, "memver_doesnotexist")
	wantErr(t, err, store.ErrNotFound, "GetVersion unknown")
	_, err = b.GetVersion(ctx, "memstore_doesnotexist", m.MemoryVersionID)
	wantErr(t, err, store.ErrNotFound, "GetVersion unknown store")
}

func testVersionRedact(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	s := newStore(t, b, "s")
	cursor := head(t, b, s.ID)
	admin := store.APIActor("apikey_admin")

	m := create(t, b, s.ID, "/r", "secret one")
	u := update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("secret two")})

	r, err := b.RedactVersion(ctx, s.ID, m.MemoryVersionID, admin)
	ok(t, err, "RedactVersion of a non-head version")
	checkVersion(t, "redacted", *r, wantVersion{m.MemoryVersionID, m.ID, store.OpCreated, nil, nil, apiActor}, true)
	if r.RedactedAt == nil || r.RedactedBy == nil || *r.RedactedBy != admin {
		t.Fatalf("redacted version: redacted_at %v by %+v, want set and %+v", r.RedactedAt, r.RedactedBy, admin)
	}
	checkUTC(t, "redacted_at", *r.RedactedAt)
	g, err := b.GetVersion(ctx, s.ID, m.MemoryVersionID)
	ok(t, err, "GetVersion after redact")
	checkVersion(t, "GetVersion after redact", *g, wantVersion{m.MemoryVersionID, m.ID, store.OpCreated, nil, nil, apiActor}, true)
	if g.RedactedAt == nil || !g.RedactedAt.Equal(*r.RedactedAt) {
		t.Fatalf("GetVersion redacted_at %v, want %v", g.RedactedAt, r.RedactedAt)
	}
	listed := allVersions(t, b, s.ID, store.ListVersionsOptions{MemoryID: m.ID, Full: true})
	if len(listed) != 2 || listed[1].ID != m.MemoryVersionID || listed[1].Path != nil || listed[1].Content != nil || listed[1].RedactedAt == nil {
		t.Fatalf("listed versions after redact: %+v", listed)
	}
	// The redacted content is gone from the change feed too.
	for _, c := range changesAfter(t, b, s.ID, cursor) {
		if c.MemoryVersionID == m.MemoryVersionID && (c.Path != "" || c.ContentSHA256 != nil || c.ContentSizeBytes != nil) {
			t.Fatalf("change feed still carries the redacted version's path/sha: %+v", c)
		}
	}

	// Idempotent: a second redaction keeps the first one's time and actor.
	again, err := b.RedactVersion(ctx, s.ID, m.MemoryVersionID, sessionActor)
	ok(t, err, "RedactVersion again")
	if again.RedactedAt == nil || !again.RedactedAt.Equal(*r.RedactedAt) || again.RedactedBy == nil || *again.RedactedBy != admin {
		t.Fatalf("second redaction changed redacted_at/by: %+v", again)
	}

	// The head of a live memory can't be redacted.
	_, err = b.RedactVersion(ctx, s.ID, u.MemoryVersionID, admin)
	wantErr(t, err, store.ErrInvalid, "RedactVersion of the head version")
	hv, err := b.GetVersion(ctx, s.ID, u.MemoryVersionID)
	ok(t, err, "GetVersion head")
	checkVersion(t, "head after refused redact", *hv, wantVersion{u.MemoryVersionID, m.ID, store.OpModified, ptr("/r"), ptr("secret two"), apiActor}, true)
	if hv.RedactedAt != nil {
		t.Fatal("refused redaction set redacted_at")
	}
	if contentOf(t, get(t, b, s.ID, m.ID)) != "secret two" {
		t.Fatal("redacting an old version changed the memory")
	}

	// Once the memory is deleted, its last content version can go too,
	// and so can the deletion version.
	ok(t, b.DeleteMemory(ctx, s.ID, m.ID, store.DeleteMemoryInput{Actor: apiActor}), "DeleteMemory")
	r2, err := b.RedactVersion(ctx, s.ID, u.MemoryVersionID, admin)
	ok(t, err, "RedactVersion of the last version of a deleted memory")
	if r2.Path != nil || r2.Content != nil || r2.ContentSHA256 != nil || r2.ContentSizeBytes != nil || r2.RedactedAt == nil {
		t.Fatalf("redacted former head: %+v", r2)
	}
	del := allVersions(t, b, s.ID, store.ListVersionsOptions{MemoryID: m.ID, Operation: store.OpDeleted})
	if len(del) != 1 {
		t.Fatalf("%d deleted versions, want 1", len(del))
	}
	r3, err := b.RedactVersion(ctx, s.ID, del[0].ID, admin)
	ok(t, err, "RedactVersion of the deletion version")
	if r3.Path != nil || r3.RedactedAt == nil || r3.Operation != store.OpDeleted {
		t.Fatalf("redacted deletion version: %+v", r3)
	}

	_, err = b.RedactVersion(ctx, s.ID, "memver_doesnotexist", admin)
	wantErr(t, err, store.ErrNotFound, "RedactVersion unknown")
	_, err = b.RedactVersion(ctx, "memstore_doesnotexist", m.MemoryVersionID, admin)
	wantErr(t, err, store.ErrNotFound, "RedactVersion unknown store")
}
