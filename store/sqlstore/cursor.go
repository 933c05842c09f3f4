package sqlstore

import (
	"encoding/base64"
	"encoding/json"

	"github.com/memfs/memfs/store"
)

// pageToken is the decoded form of an opaque next_page value. Lists are
// keyset-paginated: the token holds the last key returned, never an
// offset, so rows inserted or deleted between pages neither repeat nor
// vanish. Stores and versions page by their serial number N (newest
// first); memories by path (K, with X set when K itself must be skipped;
// with depth=1 after a memory_prefix, K is the first path past the prefix).
// Session events page by their seq N in either order, D set for newest first.
type pageToken struct {
	N int64  `json:"n,omitempty"`
	K string `json:"k,omitempty"`
	X bool   `json:"x,omitempty"`
	D bool   `json:"d,omitempty"`
}

func encodeToken(t pageToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string) (pageToken, error) {
	var t pageToken
	if s == "" {
		return t, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil {
		return t, store.Errorf(store.ErrInvalid, "page: not a next_page value from this server")
	}
	return t, nil
}

// clampLimit applies the list defaults: 20 when unset; full views at most 20.
func clampLimit(limit int, full bool) int {
	if limit <= 0 {
		limit = store.DefaultListLimit
	}
	if limit > store.MaxListLimit {
		limit = store.MaxListLimit
	}
	if full && limit > store.MaxFullViewListLimit {
		limit = store.MaxFullViewListLimit
	}
	return limit
}
