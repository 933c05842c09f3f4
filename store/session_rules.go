package store

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// ValidateSessionResources checks the memory_store resources of a new
// session: at most 8, each store once, access read_write (default) or
// read_only, instructions at most 4,096 characters. It fills in the
// default access.
func ValidateSessionResources(rs []SessionResource) error {
	if len(rs) > MaxSessionStores {
		return invalid("too_many_memory_stores", "a session can attach at most %d memory stores, not %d", MaxSessionStores, len(rs))
	}
	seen := map[string]bool{}
	for i := range rs {
		r := &rs[i]
		if r.MemoryStoreID == "" {
			return invalid("invalid_resource", "resources[%d]: memory_store_id is required", i)
		}
		if seen[r.MemoryStoreID] {
			return invalid("duplicate_memory_store", "memory store %s is attached twice; a store may appear once", r.MemoryStoreID)
		}
		seen[r.MemoryStoreID] = true
		switch r.Access {
		case "":
			r.Access = AccessReadWrite
		case AccessReadWrite, AccessReadOnly:
		default:
			return invalid("invalid_access", "resources[%d]: access must be read_write or read_only, not %q", i, r.Access)
		}
		if r.Instructions != nil && utf8.RuneCountInString(*r.Instructions) > MaxInstructions {
			return invalid("instructions_too_long", "resources[%d]: instructions are %d characters; the limit is %d", i, utf8.RuneCountInString(*r.Instructions), MaxInstructions)
		}
	}
	return nil
}

// Slug is a store name as a directory name: lowercased, every run of
// characters other than a-z and 0-9 turned into one "-", leading and
// trailing "-" trimmed; an empty slug becomes the store id.
func Slug(name, storeID string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return storeID
	}
	return s
}

// MountPaths gives each store of a session its mount path under root:
// root/<slug>, and when two stores get the same slug the later ones get
// -2, -3, ...
func MountPaths(root string, names, ids []string) []string {
	out := make([]string, len(names))
	used := map[string]bool{}
	for i := range names {
		base := Slug(names[i], ids[i])
		s := base
		for n := 2; used[s]; n++ {
			s = fmt.Sprintf("%s-%d", base, n)
		}
		used[s] = true
		out[i] = path.Join(root, s)
	}
	return out
}
