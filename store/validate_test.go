package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sentinels are every sentinel error; a validation error must match exactly
// the one it is meant to (docs/api.md, "Errors", maps each to one HTTP status).
var sentinels = []error{
	ErrInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrPreconditionFailed,
	ErrPathConflict, ErrConflict, ErrGone, ErrTooLarge, ErrLimit, ErrRateLimited,
	ErrUnavailable, ErrInternal,
}

// checkErr asserts that err is nil when want is nil, and otherwise that it
// is an *Error matching want and no other sentinel.
func checkErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: unexpected error: %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
		return
	}
	var se *Error
	if !errors.As(err, &se) {
		t.Errorf("%s: error %v (%T) is not a *store.Error", what, err, err)
	} else if se.Message == "" {
		t.Errorf("%s: *store.Error has no message", what)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Errorf("%s: error %v also matches %v", what, err, s)
		}
	}
}

// segments returns a path of n one-letter segments.
func segments(n int) string { return strings.Repeat("/a", n) }

// pathOfBytes returns a valid path exactly n bytes long.
func pathOfBytes(n int) string { return "/" + strings.Repeat("x", n-1) }

func TestValidatePath(t *testing.T) {
	tests := []struct {
		name string
		path string
		want error
	}{
		{"simple", "/a", nil},
		{"nested", "/notes/2024/today.md", nil},
		{"empty", "", ErrInvalid},
		{"no leading slash", "a/b", ErrInvalid},
		{"leading space", " /a", ErrInvalid},
		{"root alone", "/", ErrInvalid},
		{"trailing slash", "/a/b/", ErrInvalid},
		{"double slash", "/a//b", ErrInvalid},
		{"leading double slash", "//a", ErrInvalid},
		{"dot segment", "/a/./b", ErrInvalid},
		{"final dot segment", "/a/.", ErrInvalid},
		{"dotdot segment", "/a/../b", ErrInvalid},
		{"final dotdot segment", "/a/..", ErrInvalid},
		{"dot prefix in name is fine", "/.hidden/..x/x..", nil},
		{"20 segments", segments(20), nil},
		{"21 segments", segments(21), ErrInvalid},
		{"1024 bytes", pathOfBytes(1024), nil},
		{"1025 bytes", pathOfBytes(1025), ErrInvalid},
		{"control char U+0001", "/a\x01b", ErrInvalid},
		{"control char DEL", "/a\x7fb", ErrInvalid},
		{"newline", "/a\nb", ErrInvalid},
		{"NUL", "/a\x00b", ErrInvalid},
		{"C1 control U+0085", "/a\u0085b", ErrInvalid},
		{"format char U+200B", "/a\u200bb", ErrInvalid},
		{"format char U+FEFF", "/\ufeffa", ErrInvalid},
		{"format char U+202E", "/a\u202eb", ErrInvalid},
		{"line separator U+2028", "/a\u2028b", ErrInvalid},
		{"paragraph separator U+2029", "/a\u2029b", ErrInvalid},
		{"non-NFC e+combining acute", "/caf" + "e\u0301", ErrInvalid},
		{"NFC e-acute", "/caf\u00e9", nil},
		{"non-NFC Hangul jamo", "/\u1100\u1161", ErrInvalid},
		{"NFC Hangul syllable", "/\uac00", nil},
		{"invalid UTF-8", "/a\xffb", ErrInvalid},
		{"truncated UTF-8", "/a\xc3", ErrInvalid},
		{"upper case", "/Notes/README.md", nil},
		{"space and punctuation", "/my notes/a!b#c(1).md", nil},
		{"emoji", "/\U0001F600.md", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, fmt.Sprintf("ValidatePath(%q)", tc.path), ValidatePath(tc.path), tc.want)
		})
	}
	// Case matters: both spellings are distinct valid paths.
	if ValidatePath("/a") != nil || ValidatePath("/A") != nil {
		t.Error("paths differing only in case must both be valid")
	}
}

func TestValidatePathPrefix(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		want   error
	}{
		{"root", "/", nil},
		{"one segment", "/notes/", nil},
		{"two segments", "/notes/2024/", nil},
		{"empty", "", ErrInvalid},
		{"no trailing slash", "/notes", ErrInvalid},
		{"no leading slash", "notes/", ErrInvalid},
		{"double slash", "//", ErrInvalid},
		{"inner empty segment", "/a//b/", ErrInvalid},
		{"dot segment", "/a/./", ErrInvalid},
		{"dotdot segment", "/a/../", ErrInvalid},
		{"20 segments", segments(20) + "/", nil},
		{"21 segments", segments(21) + "/", ErrInvalid},
		{"control char", "/a\x01/", ErrInvalid},
		{"format char", "/a\u200b/", ErrInvalid},
		{"non-NFC", "/e\u0301/", ErrInvalid},
		{"NFC", "/\u00e9/", nil},
		{"invalid UTF-8", "/\xff/", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, fmt.Sprintf("ValidatePathPrefix(%q)", tc.prefix), ValidatePathPrefix(tc.prefix), tc.want)
		})
	}
}

func TestValidateContent(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    error
	}{
		{"empty", "", nil},
		{"text", "hello\nworld\n", nil},
		{"control chars are fine in content", "a\x00b\x7f\u200b\u2028", nil},
		{"non-NFC is fine in content", "e\u0301", nil},
		{"exactly 102400 bytes", strings.Repeat("x", 102400), nil},
		{"102400 bytes of multibyte text", strings.Repeat("\u00e9", 51200), nil},
		{"102401 bytes", strings.Repeat("x", 102401), ErrTooLarge},
		{"102402 bytes of multibyte text", strings.Repeat("\u00e9", 51201), ErrTooLarge},
		{"invalid UTF-8", "ok\xffok", ErrInvalid},
		{"lone continuation byte", "\x80", ErrInvalid},
		{"UTF-16 surrogate encoded", "\xed\xa0\x80", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, fmt.Sprintf("ValidateContent(%d bytes)", len(tc.content)), ValidateContent(tc.content), tc.want)
		})
	}
}

func TestValidateStoreName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"simple", "Project notes", nil},
		{"one char", "x", nil},
		{"empty", "", ErrInvalid},
		{"255 chars", strings.Repeat("n", 255), nil},
		{"256 chars", strings.Repeat("n", 256), ErrInvalid},
		{"255 multibyte chars (510 bytes)", strings.Repeat("\u00e9", 255), nil},
		{"256 multibyte chars", strings.Repeat("\u00e9", 256), ErrInvalid},
		{"control char", "a\x01b", ErrInvalid},
		{"newline", "a\nb", ErrInvalid},
		{"tab", "a\tb", ErrInvalid},
		{"DEL", "a\x7fb", ErrInvalid},
		{"invalid UTF-8", "a\xffb", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, fmt.Sprintf("ValidateStoreName(%q)", tc.in), ValidateStoreName(tc.in), tc.want)
		})
	}
}

func TestValidateDescription(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", nil},
		{"text with newlines", "line one\nline two", nil},
		{"1024 chars", strings.Repeat("d", 1024), nil},
		{"1025 chars", strings.Repeat("d", 1025), ErrInvalid},
		{"1024 multibyte chars", strings.Repeat("\u00e9", 1024), nil},
		{"1025 multibyte chars", strings.Repeat("\u00e9", 1025), ErrInvalid},
		{"invalid UTF-8", "\xff", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, fmt.Sprintf("ValidateDescription(%d bytes)", len(tc.in)), ValidateDescription(tc.in), tc.want)
		})
	}
}

// pairs returns a metadata map of n pairs.
func pairs(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func TestValidateMetadata(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want error
	}{
		{"nil", nil, nil},
		{"empty", map[string]string{}, nil},
		{"16 pairs", pairs(16), nil},
		{"17 pairs", pairs(17), ErrInvalid},
		{"empty value", map[string]string{"k": ""}, nil},
		{"empty key", map[string]string{"": "v"}, ErrInvalid},
		{"key 64 chars", map[string]string{strings.Repeat("k", 64): "v"}, nil},
		{"key 65 chars", map[string]string{strings.Repeat("k", 65): "v"}, ErrInvalid},
		{"key 64 multibyte chars", map[string]string{strings.Repeat("\u00e9", 64): "v"}, nil},
		{"value 512 chars", map[string]string{"k": strings.Repeat("v", 512)}, nil},
		{"value 513 chars", map[string]string{"k": strings.Repeat("v", 513)}, ErrInvalid},
		{"value 512 multibyte chars", map[string]string{"k": strings.Repeat("\u00e9", 512)}, nil},
		{"invalid UTF-8 key", map[string]string{"\xff": "v"}, ErrInvalid},
		{"invalid UTF-8 value", map[string]string{"k": "\xff"}, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, "ValidateMetadata", ValidateMetadata(tc.in), tc.want)
		})
	}
}

func TestValidateSHA256(t *testing.T) {
	good := SHA256Hex("hello")
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"sha of hello", good, nil},
		{"sha of empty", SHA256Hex(""), nil},
		{"empty", "", ErrInvalid},
		{"upper case", strings.ToUpper(good), ErrInvalid},
		{"63 digits", good[:63], ErrInvalid},
		{"65 digits", good + "0", ErrInvalid},
		{"non-hex letter", "g" + good[1:], ErrInvalid},
		{"sha256: prefix", "sha256:" + good[7:], ErrInvalid},
		{"space", " " + good[1:], ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, fmt.Sprintf("ValidateSHA256(%q)", tc.in), ValidateSHA256(tc.in), tc.want)
		})
	}
}

func TestSHA256Hex(t *testing.T) {
	// Known vectors: the hash is of the exact UTF-8 bytes.
	for in, want := range map[string]string{
		"":      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"hello": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
	} {
		if got := SHA256Hex(in); got != want {
			t.Errorf("SHA256Hex(%q) = %s, want %s", in, got, want)
		}
	}
	if SHA256Hex("e\u0301") == SHA256Hex("\u00e9") {
		t.Error("content must be hashed without normalisation")
	}
}

func TestPageJSON(t *testing.T) {
	t.Run("last page has null next_page and empty data array", func(t *testing.T) {
		b, err := json.Marshal(Page[Store]{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(b), `{"data":[],"next_page":null}`; got != want {
			t.Errorf("Marshal(empty page) = %s, want %s", got, want)
		}
		var p Page[Store]
		p.NextPage = "stale"
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.NextPage != "" || len(p.Data) != 0 {
			t.Errorf("Unmarshal(%s) = %+v, want empty last page", b, p)
		}
	})
	t.Run("empty non-nil data", func(t *testing.T) {
		b, _ := json.Marshal(Page[Version]{Data: []Version{}})
		if got, want := string(b), `{"data":[],"next_page":null}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	t.Run("round trip with next_page", func(t *testing.T) {
		at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
		in := Page[Store]{
			Data: []Store{{ID: "memstore_1", Type: TypeMemoryStore, Name: "n", Metadata: map[string]string{"a": "b"},
				CreatedAt: at, UpdatedAt: at}},
			NextPage: "tok123",
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw["next_page"]) != `"tok123"` {
			t.Errorf("next_page on the wire = %s, want \"tok123\"", raw["next_page"])
		}
		if len(raw) != 2 {
			t.Errorf("page has fields %s, want only data and next_page", b)
		}
		var out Page[Store]
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if out.NextPage != "tok123" || len(out.Data) != 1 || out.Data[0].ID != "memstore_1" ||
			out.Data[0].Metadata["a"] != "b" || !out.Data[0].CreatedAt.Equal(at) || out.Data[0].ArchivedAt != nil {
			t.Errorf("round trip = %+v, want %+v", out, in)
		}
		if !strings.Contains(string(b), `"archived_at":null`) {
			t.Errorf("a live store must carry archived_at: null; got %s", b)
		}
	})
}

func TestMemoryListItemJSON(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	mem := &Memory{ID: "mem_1", Type: TypeMemory, MemoryStoreID: "memstore_1", MemoryVersionID: "memver_1",
		Path: "/b", ContentSHA256: SHA256Hex(""), CreatedAt: at, UpdatedAt: at}
	in := Page[MemoryListItem]{Data: []MemoryListItem{{Prefix: "/a/"}, {Memory: mem}, {Prefix: "/c/"}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Data) != 3 {
		t.Fatalf("wire data has %d items, want 3: %s", len(raw.Data), b)
	}
	prefix := raw.Data[0]
	if prefix["type"] != TypeMemoryPrefix || prefix["path"] != "/a/" || len(prefix) != 2 {
		t.Errorf("prefix item on the wire = %v, want exactly {type: memory_prefix, path: /a/}", prefix)
	}
	m := raw.Data[1]
	if m["type"] != TypeMemory || m["id"] != "mem_1" || m["path"] != "/b" {
		t.Errorf("memory item on the wire = %v", m)
	}
	if c, ok := m["content"]; !ok || c != nil {
		t.Errorf("basic-view memory must carry content: null, got %v (present %v)", c, ok)
	}

	var out Page[MemoryListItem]
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Data) != 3 {
		t.Fatalf("round trip has %d items, want 3", len(out.Data))
	}
	if out.Data[0].Memory != nil || out.Data[0].Prefix != "/a/" {
		t.Errorf("item 0 = %+v, want prefix /a/", out.Data[0])
	}
	if out.Data[1].Memory == nil || out.Data[1].Prefix != "" {
		t.Fatalf("item 1 = %+v, want a memory", out.Data[1])
	}
	if got := *out.Data[1].Memory; got.ID != mem.ID || got.Type != TypeMemory || got.Path != mem.Path ||
		got.MemoryVersionID != mem.MemoryVersionID || got.ContentSHA256 != mem.ContentSHA256 ||
		!got.CreatedAt.Equal(at) || got.Content != nil {
		t.Errorf("item 1 memory = %+v, want %+v", got, *mem)
	}
	if out.Data[2].Memory != nil || out.Data[2].Prefix != "/c/" {
		t.Errorf("item 2 = %+v, want prefix /c/", out.Data[2])
	}

	// A full-view memory keeps its content, including "".
	empty := ""
	full := *mem
	full.Content = &empty
	b, _ = json.Marshal(MemoryListItem{Memory: &full})
	var it MemoryListItem
	if err := json.Unmarshal(b, &it); err != nil {
		t.Fatal(err)
	}
	if it.Memory == nil || it.Memory.Content == nil || *it.Memory.Content != "" {
		t.Errorf("full-view memory with empty content round-tripped to %+v (%s)", it, b)
	}
}
