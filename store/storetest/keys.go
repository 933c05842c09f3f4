package storetest

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
)

var keyTests = []test{
	{"CreateLookupCount", testKeys},
}

func testKeys(t *testing.T, open Opener) {
	b := open(t, 0)
	ctx := t.Context()
	h1, h2, h3 := sha256.Sum256([]byte("key one")), sha256.Sum256([]byte("key two")), sha256.Sum256([]byte("never stored"))

	if n, err := b.CountAPIKeys(ctx, store.KeyKindAdmin); err != nil || n != 0 {
		t.Fatalf("CountAPIKeys on a fresh backend = %d, %v; want 0", n, err)
	}
	id1, err := b.CreateAPIKey(ctx, store.KeyKindAdmin, h1[:])
	ok(t, err, "CreateAPIKey")
	if !strings.HasPrefix(id1, store.PrefixAPIKey) {
		t.Fatalf("key id %q, want prefix %q", id1, store.PrefixAPIKey)
	}
	id2, err := b.CreateAPIKey(ctx, "environment", h2[:])
	ok(t, err, "CreateAPIKey")
	if id2 == id1 {
		t.Fatal("two keys got the same id")
	}

	k, err := b.LookupAPIKey(ctx, h1[:])
	ok(t, err, "LookupAPIKey")
	if k.ID != id1 || k.Kind != store.KeyKindAdmin {
		t.Fatalf("LookupAPIKey = %+v, want id %s kind admin", k, id1)
	}
	checkUTC(t, "key created_at", k.CreatedAt)
	k, err = b.LookupAPIKey(ctx, h2[:])
	ok(t, err, "LookupAPIKey")
	if k.ID != id2 || k.Kind != "environment" {
		t.Fatalf("LookupAPIKey = %+v, want id %s kind environment", k, id2)
	}
	_, err = b.LookupAPIKey(ctx, h3[:])
	wantErr(t, err, store.ErrUnauthorized, "LookupAPIKey unknown hash")
	_, err = b.LookupAPIKey(ctx, h1[:31])
	wantErr(t, err, store.ErrUnauthorized, "LookupAPIKey truncated hash")

	for kind, want := range map[string]int{store.KeyKindAdmin: 1, "environment": 1, "other": 0} {
		if n, err := b.CountAPIKeys(ctx, kind); err != nil || n != want {
			t.Fatalf("CountAPIKeys(%s) = %d, %v; want %d", kind, n, err, want)
		}
	}
}
