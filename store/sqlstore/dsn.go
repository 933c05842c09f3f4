package sqlstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnsupportedDSN is returned (wrapped) for a database address that is
// neither a SQLite file nor a PostgreSQL URL: an unknown scheme
// ("mysql://x") must not become a SQLite file named after it.
var ErrUnsupportedDSN = errors.New("not a SQLite file (a path, file:PATH or sqlite:PATH) or a PostgreSQL URL (postgres://… or postgresql://…)")

// Target is where a database address points: a PostgreSQL URL or a
// SQLite file.
type Target struct {
	// Postgres is set for a postgres:// or postgresql:// URL; DSN is the
	// URL, given to the driver as it is.
	Postgres bool
	DSN      string
	// Path is the SQLite file (Postgres unset): the address without its
	// file: or sqlite: prefix (and the "//" of file:///abs) and without a
	// ?query.
	Path string
}

// Name names the database without a secret, for messages and for files
// kept per database: postgres://HOST:PORT/DATABASE (no user, password or
// options), or the SQLite file's absolute path.
func (t Target) Name() string {
	if !t.Postgres {
		if abs, err := filepath.Abs(t.Path); err == nil {
			return abs
		}
		return filepath.Clean(t.Path)
	}
	if c, err := pgconn.ParseConfig(t.DSN); err == nil {
		return "postgres://" + net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) + "/" + c.Database
	}
	if u, err := url.Parse(t.DSN); err == nil {
		return "postgres://" + u.Host + u.Path
	}
	return "postgres://?"
}

// ParseTarget says what a database address (memfs serve --db) names:
//
//	postgres://…, postgresql://…    PostgreSQL
//	PATH                            a SQLite file (a name with a colon in its
//	                                first component needs ./ or file:)
//	file:PATH, sqlite:PATH          a SQLite file; file:///abs, sqlite:///abs too
//
// Anything else that starts with a scheme ("mysql://x", "postgres:x") is
// an error wrapping ErrUnsupportedDSN, as is a file: or sqlite: that names
// no file. It touches nothing.
func ParseTarget(dsn string) (Target, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return Target{Postgres: true, DSN: dsn}, nil
	}
	path := dsn
	if scheme, rest, ok := cutScheme(dsn); ok {
		if scheme != "file" && scheme != "sqlite" {
			return Target{}, fmt.Errorf("%q: %w", dsn, ErrUnsupportedDSN)
		}
		path = strings.TrimPrefix(rest, "//")
		if scheme == "file" && strings.HasPrefix(path, "localhost/") {
			path = strings.TrimPrefix(path, "localhost")
		}
	}
	path, _, _ = strings.Cut(path, "?")
	if path == "" {
		return Target{}, fmt.Errorf("%q names no file: %w", dsn, ErrUnsupportedDSN)
	}
	return Target{Path: path}, nil
}

// cutScheme splits "scheme:rest" where scheme is an RFC 3986 scheme
// (a letter, then letters, digits, "+", "-" or "."), lower-cased.
func cutScheme(s string) (scheme, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.ToLower(s[:i]), s[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}
