package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	const id = "memstore_01abc"
	for _, tc := range []struct{ name, want string }{
		{"notes", "notes"},
		{"Notes", "notes"},
		{"User Preferences", "user-preferences"},
		{"ABC123", "abc123"},
		{"a-b", "a-b"},
		{"a__b", "a-b"},
		{"a - b", "a-b"},
		{"x.y/z", "x-y-z"},
		{"  --Hello,   World!! ", "hello-world"},
		{"-a-", "a"},
		{"2024 plans", "2024-plans"},
		{"café au lait", "caf-au-lait"},
		{"Ünïcode", "n-code"},
		{"\u212Aelvin", "kelvin"}, // KELVIN SIGN lowercases to ASCII k
		{"tab\there", "tab-here"},
		{"", id},
		{"!!!", id},
		{"   ", id},
		{"日本語", id},
		{"---", id},
	} {
		if got := Slug(tc.name, id); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMountPaths(t *testing.T) {
	for _, tc := range []struct {
		what  string
		root  string
		names []string
		want  []string
	}{
		{"none", "/mnt/memory", nil, []string{}},
		{"one", "/mnt/memory", []string{"User Preferences"}, []string{"/mnt/memory/user-preferences"}},
		{"distinct", "/mnt/memory", []string{"a", "b", "c"}, []string{"/mnt/memory/a", "/mnt/memory/b", "/mnt/memory/c"}},
		{"same slug three times", "/mnt/memory", []string{"Notes", "notes", "NOTES!"},
			[]string{"/mnt/memory/notes", "/mnt/memory/notes-2", "/mnt/memory/notes-3"}},
		{"duplicates not adjacent", "/mnt/memory", []string{"x", "y", "X"}, []string{"/mnt/memory/x", "/mnt/memory/y", "/mnt/memory/x-2"}},
		{"a suffix already taken by a name", "/mnt/memory", []string{"a", "a-2", "a"}, []string{"/mnt/memory/a", "/mnt/memory/a-2", "/mnt/memory/a-3"}},
		{"a name equal to a later suffix", "/mnt/memory", []string{"a-2", "a", "a"}, []string{"/mnt/memory/a-2", "/mnt/memory/a", "/mnt/memory/a-3"}},
		{"empty slugs become store ids", "/mnt/memory", []string{"", "!!", "ok"},
			[]string{"/mnt/memory/memstore_0", "/mnt/memory/memstore_1", "/mnt/memory/ok"}},
		{"root with a trailing slash", "/mnt/memory/", []string{"a"}, []string{"/mnt/memory/a"}},
		{"another root", "/data/mem", []string{"a", "a"}, []string{"/data/mem/a", "/data/mem/a-2"}},
	} {
		ids := make([]string, len(tc.names))
		for i := range ids {
			ids[i] = fmt.Sprintf("memstore_%d", i)
		}
		got := MountPaths(tc.root, tc.names, ids)
		if got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: MountPaths(%q, %q) = %q, want %q", tc.what, tc.root, tc.names, got, tc.want)
		}
	}
}

// resources returns n read_write resources on distinct stores.
func resources(n int) []SessionResource {
	rs := make([]SessionResource, n)
	for i := range rs {
		rs[i] = SessionResource{MemoryStoreID: fmt.Sprintf("memstore_%d", i)}
	}
	return rs
}

func TestValidateSessionResources(t *testing.T) {
	s := func(v string) *string { return &v }
	dup := resources(3)
	dup[2].MemoryStoreID = dup[0].MemoryStoreID
	with := func(f func(r *SessionResource)) []SessionResource {
		rs := resources(2)
		f(&rs[1])
		return rs
	}
	for _, tc := range []struct {
		what string
		rs   []SessionResource
		code string // "" = valid
	}{
		{"none", nil, ""},
		{"one", resources(1), ""},
		{"8 stores", resources(8), ""},
		{"9 stores", resources(9), "too_many_memory_stores"},
		{"20 stores", resources(20), "too_many_memory_stores"},
		{"a store twice", dup, "duplicate_memory_store"},
		{"no store id", with(func(r *SessionResource) { r.MemoryStoreID = "" }), "invalid_resource"},
		{"access read_only", with(func(r *SessionResource) { r.Access = AccessReadOnly }), ""},
		{"access read_write", with(func(r *SessionResource) { r.Access = AccessReadWrite }), ""},
		{"access write", with(func(r *SessionResource) { r.Access = "write" }), "invalid_access"},
		{"access READ_ONLY", with(func(r *SessionResource) { r.Access = "READ_ONLY" }), "invalid_access"},
		{"access with a space", with(func(r *SessionResource) { r.Access = "read_only " }), "invalid_access"},
		{"empty instructions", with(func(r *SessionResource) { r.Instructions = s("") }), ""},
		{"4096-character instructions", with(func(r *SessionResource) { r.Instructions = s(strings.Repeat("x", 4096)) }), ""},
		{"4097-character instructions", with(func(r *SessionResource) { r.Instructions = s(strings.Repeat("x", 4097)) }), "instructions_too_long"},
		// The limit counts characters, not bytes: 4,096 two-byte characters are fine.
		{"4096 two-byte characters", with(func(r *SessionResource) { r.Instructions = s(strings.Repeat("é", 4096)) }), ""},
		{"4097 two-byte characters", with(func(r *SessionResource) { r.Instructions = s(strings.Repeat("é", 4097)) }), "instructions_too_long"},
	} {
		err := ValidateSessionResources(tc.rs)
		if tc.code == "" {
			checkErr(t, tc.what, err, nil)
			continue
		}
		checkErr(t, tc.what, err, ErrInvalid)
		var se *Error
		if errors.As(err, &se) && se.Code != tc.code {
			t.Errorf("%s: error code %q, want %q (%v)", tc.what, se.Code, tc.code, err)
		}
	}
}

func TestValidateSessionResourcesDefaultAccess(t *testing.T) {
	rs := []SessionResource{
		{MemoryStoreID: "memstore_a"},
		{MemoryStoreID: "memstore_b", Access: AccessReadOnly},
		{MemoryStoreID: "memstore_c", Access: AccessReadWrite},
	}
	if err := ValidateSessionResources(rs); err != nil {
		t.Fatal(err)
	}
	got := []string{rs[0].Access, rs[1].Access, rs[2].Access}
	if want := []string{AccessReadWrite, AccessReadOnly, AccessReadWrite}; !slices.Equal(got, want) {
		t.Errorf("access after validation = %q, want %q", got, want)
	}
}
