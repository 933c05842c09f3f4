package sqlstore

import (
	"strconv"
	"strings"
	"sync"
)

// dialect holds what differs between SQLite and PostgreSQL.
type dialect struct {
	name string
	// forUpdate is appended to the store-row lock query.
	forUpdate string
	// numbered rewrites ? placeholders as $1, $2, ... (PostgreSQL).
	numbered bool
	// notify is the statement run inside a write transaction to wake other
	// processes ("" when there are none to wake).
	notify     string
	migrations []string
	// bytea: content and description columns are BYTEA (PostgreSQL, see
	// postgresV2), so their values are passed as []byte.
	bytea bool

	mu    sync.Mutex
	cache map[string]string
}

// text converts a content or description value for its column: []byte
// for BYTEA, the string itself for TEXT. Either scans back into a string.
func (d *dialect) text(s string) any {
	if d.bytea {
		return []byte(s)
	}
	return s
}

// q returns the query with placeholders in this dialect's form. Queries
// are written with '?' and never contain a literal '?'.
func (d *dialect) q(query string) string {
	if !d.numbered {
		return query
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.cache[query]; ok {
		return s
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	if d.cache == nil {
		d.cache = map[string]string{}
	}
	d.cache[query] = b.String()
	return d.cache[query]
}
