package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"time"
)

// ID prefixes of the objects memfs creates.
const (
	PrefixStore   = "memstore_"
	PrefixMemory  = "mem_"
	PrefixVersion = "memver_"
	PrefixAPIKey  = "apikey_"
)

// idEncoding is Crockford's base32: case-insensitive, no ambiguous letters.
var idEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// NewID returns prefix followed by 26 base32 characters: 48 bits of
// millisecond time then 80 random bits, so ids of one kind sort roughly by
// creation and never collide in practice.
func NewID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// SHA256Hex is the lowercase hex SHA-256 of s: the content_sha256 of a memory.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
