package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/memfs/memfs/store"
)

// decodeBody reads a JSON object body into v. An empty body decodes as {}.
// The body must be valid UTF-8 and escape no lone UTF-16 surrogate:
// encoding/json silently turns either into U+FFFD, and the server would
// store other text than the client sent.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &store.Error{Kind: store.ErrTooLarge, Code: "request_too_large",
				Message: "request body is over the limit of " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return store.Errorf(store.ErrInvalid, "the request body did not arrive within the server's read timeout")
		}
		return store.Errorf(store.ErrInvalid, "reading the request body: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	if !utf8.Valid(b) {
		return store.Errorf(store.ErrInvalid, "request body is not valid UTF-8")
	}
	if loneSurrogate(b) {
		return store.Errorf(store.ErrInvalid, "request body escapes a lone UTF-16 surrogate (\\uD800-\\uDFFF not in a pair), which is not valid UTF-8 text")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return store.Errorf(store.ErrInvalid, "request body is not valid JSON for this endpoint: %v", err)
	}
	return nil
}

// loneSurrogate reports whether the JSON text b has a \u escape of a
// UTF-16 surrogate that is not half of a high-low pair. Backslashes occur
// only inside JSON strings, so b is scanned without parsing it; malformed
// escapes are left to json.Unmarshal.
func loneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b[i+1:])
		if !ok {
			continue
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo, ok := hex4(b[i+3:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
					continue
				}
			}
			return true
		}
	}
	return false
}

// hex4 parses the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(n), err == nil
}

// query reads and checks query parameters; the first error sticks.
type query struct {
	r   *http.Request
	err error
}

func (q *query) fail(format string, args ...any) {
	if q.err == nil {
		q.err = store.Errorf(store.ErrInvalid, format, args...)
	}
}

func (q *query) str(name string) string { return q.r.URL.Query().Get(name) }

// intIn parses an optional integer within [lo, hi]; def when absent.
func (q *query) intIn(name string, def, lo, hi int64) int64 {
	s := q.str(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		q.fail("%s must be an integer from %d to %d, not %q", name, lo, hi, s)
		return def
	}
	return n
}

func (q *query) boolean(name string) bool {
	s := q.str(name)
	if s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.fail("%s must be true or false, not %q", name, s)
	}
	return b
}

func (q *query) time(name string) *time.Time {
	s := q.str(name)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		q.fail("%s must be an RFC 3339 timestamp, not %q", name, s)
		return nil
	}
	return &t
}

// view parses view (basic or full) with the endpoint's default; it
// returns whether content is included.
func (q *query) view(def string) bool {
	v := q.str("view")
	if v == "" {
		v = def
	}
	if v != store.ViewBasic && v != store.ViewFull {
		q.fail("view must be basic or full, not %q", v)
	}
	return v == store.ViewFull
}

// limit parses limit (1-100, default 20).
func (q *query) limit() int {
	return int(q.intIn("limit", store.DefaultListLimit, 1, store.MaxListLimit))
}

func (q *query) enum(name string, allowed ...string) string {
	s := q.str(name)
	if s == "" {
		return ""
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	q.fail("%s must be one of %v, not %q", name, allowed, s)
	return ""
}
