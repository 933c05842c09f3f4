package store

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits from docs/api.md, "Rules every write enforces".
const (
	MaxContentBytes      = 102400
	MaxPathBytes         = 1024
	MaxPathSegments      = 20
	MaxStoreNameChars    = 255
	MaxDescriptionChars  = 1024
	MaxMetadataPairs     = 16
	MaxMetadataKeyChars  = 64
	MaxMetadataValChars  = 512
	DefaultMaxMemories   = 10000
	DefaultListLimit     = 20
	MaxListLimit         = 100
	MaxFullViewListLimit = 20
)

// MaxMemoriesLimit is the highest memory cap memfs serve accepts
// (--max-memories-per-store). A mount holds its store's whole tree in
// memory and lists the store at every start, and 100,000 memories is what
// was measured to work (docs/operating.md, "Owners, modes and limits"); beyond it
// nothing was, so it is refused rather than left to fail at a mount.
const MaxMemoriesLimit = 100000

func invalid(code, format string, args ...any) *Error {
	return &Error{Kind: ErrInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ValidatePath checks a memory path: it begins with "/", has 1 to 20
// segments, is at most 1,024 bytes, has no empty, "." or ".." segment, no
// control or format characters nor U+2028/U+2029, and is already NFC.
func ValidatePath(p string) error {
	if p == "" {
		return invalid("invalid_path", "path is required")
	}
	if !strings.HasPrefix(p, "/") {
		return invalid("invalid_path", "path %q must begin with /", p)
	}
	if len(p) > MaxPathBytes {
		return invalid("invalid_path", "path is %d bytes; the limit is %d", len(p), MaxPathBytes)
	}
	if err := validatePathChars(p); err != nil {
		return err
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) > MaxPathSegments {
		return invalid("invalid_path", "path %q has %d segments; the limit is %d", p, len(segs), MaxPathSegments)
	}
	for _, s := range segs {
		switch s {
		case "":
			return invalid("invalid_path", "path %q has an empty segment", p)
		case ".", "..":
			return invalid("invalid_path", "path %q has a %q segment", p, s)
		}
	}
	return nil
}

// ValidatePathPrefix checks a path_prefix filter: like a path, but it must
// end in "/" (and "/" alone means the whole store).
func ValidatePathPrefix(p string) error {
	if p == "/" {
		return nil
	}
	if !strings.HasSuffix(p, "/") {
		return invalid("invalid_path_prefix", "path_prefix %q must end with /", p)
	}
	if err := ValidatePath(strings.TrimSuffix(p, "/")); err != nil {
		return invalid("invalid_path_prefix", "path_prefix %q: %s", p, err.(*Error).Message)
	}
	return nil
}

func validatePathChars(p string) error {
	if !utf8.ValidString(p) {
		return invalid("invalid_path", "path is not valid UTF-8")
	}
	for _, r := range p {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return invalid("invalid_path", "path %q contains the control or format character U+%04X", p, r)
		}
	}
	if !norm.NFC.IsNormalString(p) {
		return invalid("invalid_path", "path %q is not in Unicode normalization form C (NFC)", p)
	}
	return nil
}

// ValidateContent checks memory content: valid UTF-8, at most 102,400 bytes.
func ValidateContent(c string) error {
	if len(c) > MaxContentBytes {
		return &Error{Kind: ErrTooLarge, Code: "content_too_large",
			Message: fmt.Sprintf("content is %d bytes; the limit is %d", len(c), MaxContentBytes)}
	}
	if !utf8.ValidString(c) {
		return invalid("invalid_content", "content is not valid UTF-8")
	}
	return nil
}

// ValidateStoreName checks a store name: 1 to 255 characters, no control characters.
func ValidateStoreName(n string) error {
	if n == "" {
		return invalid("invalid_name", "name is required and must not be empty")
	}
	if !utf8.ValidString(n) {
		return invalid("invalid_name", "name is not valid UTF-8")
	}
	if c := utf8.RuneCountInString(n); c > MaxStoreNameChars {
		return invalid("invalid_name", "name is %d characters; the limit is %d", c, MaxStoreNameChars)
	}
	for _, r := range n {
		if unicode.Is(unicode.Cc, r) {
			return invalid("invalid_name", "name contains the control character U+%04X", r)
		}
	}
	return nil
}

// ValidateDescription checks a store description: at most 1,024 characters.
func ValidateDescription(d string) error {
	if !utf8.ValidString(d) {
		return invalid("invalid_description", "description is not valid UTF-8")
	}
	if c := utf8.RuneCountInString(d); c > MaxDescriptionChars {
		return invalid("invalid_description", "description is %d characters; the limit is %d", c, MaxDescriptionChars)
	}
	return nil
}

// ValidateMetadata checks a complete metadata map: at most 16 pairs, keys
// 1 to 64 characters, values at most 512 characters.
func ValidateMetadata(m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return invalid("invalid_metadata", "metadata has %d pairs; the limit is %d", len(m), MaxMetadataPairs)
	}
	for k, v := range m {
		if k == "" {
			return invalid("invalid_metadata", "metadata keys must not be empty")
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid("invalid_metadata", "metadata is not valid UTF-8")
		}
		if c := utf8.RuneCountInString(k); c > MaxMetadataKeyChars {
			return invalid("invalid_metadata", "metadata key %q is %d characters; the limit is %d", k, c, MaxMetadataKeyChars)
		}
		if c := utf8.RuneCountInString(v); c > MaxMetadataValChars {
			return invalid("invalid_metadata", "metadata value of %q is %d characters; the limit is %d", k, c, MaxMetadataValChars)
		}
	}
	return nil
}

// ValidateSHA256 checks a content_sha256 precondition value: 64 lowercase hex digits.
func ValidateSHA256(s string) error {
	if len(s) != 64 {
		return invalid("invalid_sha256", "content_sha256 must be 64 lowercase hex digits")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return invalid("invalid_sha256", "content_sha256 must be 64 lowercase hex digits")
		}
	}
	return nil
}
