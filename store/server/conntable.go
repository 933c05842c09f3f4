package server

import (
	"container/list"
	"errors"
	"fmt"
)

// ReservedFDs is what DefaultConnLimits keeps of RLIMIT_NOFILE for
// everything but client connections: the database (SQLite: up to 8
// connections with their database, -wal and -shm files; PostgreSQL: up
// to 32 connections and the LISTEN one), the metrics endpoint and its
// scrapers, logs, and the standard descriptors.
const ReservedFDs = 256

// maxDefaultPerAddress caps DefaultConnLimits' MaxPerAddress: one remote
// address gets at most this many connections that have not authenticated.
const maxDefaultPerAddress = 1024

// ConnLimits bound the client connections memfs serve keeps open, so that
// clients that connect and idle (or never finish a request) can't take
// the descriptors the database and authenticated clients need.
//
// A connection is unauthenticated until a request on it authenticates
// (any key or token the store accepts); after that it counts only
// against MaxOpen. When a new connection would go over a bound, the
// oldest connection that is not serving a request is closed to make room
// (see connTable.add); a connection serving a request, a long poll or an
// event stream included, is never closed for it.
type ConnLimits struct {
	// MaxOpen is the most client connections open at once.
	MaxOpen int
	// MaxUnauthenticated is the most of them on which no request has
	// authenticated yet; the other MaxOpen-MaxUnauthenticated are kept for
	// authenticated clients (workers, mounts, the CLI).
	MaxUnauthenticated int
	// MaxPerAddress is the most unauthenticated connections from one
	// remote IP address.
	MaxPerAddress int
}

// DefaultConnLimits derives the limits from nofile, the process's
// RLIMIT_NOFILE: MaxOpen is nofile-ReservedFDs; a quarter of it is kept for
// authenticated clients (MaxUnauthenticated is the other three quarters);
// MaxPerAddress is an eighth of MaxUnauthenticated, at most 1,024. A
// limit that leaves fewer than 64 connections is an error.
func DefaultConnLimits(nofile uint64) (ConnLimits, error) {
	if nofile < ReservedFDs+64 {
		return ConnLimits{}, fmt.Errorf("the open-file limit (RLIMIT_NOFILE) is %d: memfs serve needs at least %d (%d for the database and itself, 64 for clients); raise it (ulimit -n, systemd LimitNOFILE=)",
			nofile, ReservedFDs+64, ReservedFDs)
	}
	return ConnLimitsOf(int(min(nofile-ReservedFDs, 1<<30))), nil
}

// ConnLimitsOf splits maxOpen connections as DefaultConnLimits does: a
// quarter kept for authenticated clients, an eighth of the rest (at most
// 1,024) per address.
func ConnLimitsOf(maxOpen int) ConnLimits {
	unauth := max(1, maxOpen-maxOpen/4)
	return ConnLimits{MaxOpen: maxOpen, MaxUnauthenticated: unauth, MaxPerAddress: max(1, min(unauth/8, maxDefaultPerAddress))}
}

// Validate checks that the limits are usable together.
func (l ConnLimits) Validate() error {
	switch {
	case l.MaxOpen < 1:
		return errors.New("server: ConnLimits.MaxOpen must be at least 1")
	case l.MaxUnauthenticated < 1 || l.MaxUnauthenticated > l.MaxOpen:
		return fmt.Errorf("server: ConnLimits.MaxUnauthenticated must be 1 to MaxOpen (%d), not %d", l.MaxOpen, l.MaxUnauthenticated)
	case l.MaxPerAddress < 1 || l.MaxPerAddress > l.MaxUnauthenticated:
		return fmt.Errorf("server: ConnLimits.MaxPerAddress must be 1 to MaxUnauthenticated (%d), not %d", l.MaxUnauthenticated, l.MaxPerAddress)
	}
	return nil
}

// connID names a connection in a connTable, in accept order.
type connID uint64

// connEntry is what the table knows of one connection.
type connEntry struct {
	addr   string
	authed bool
	busy   int           // requests in a handler now
	elem   *list.Element // in unauth[addr] or authed, accept order
}

// connTable decides which connections stay open: it holds no connection
// and does no I/O, so its rules are tested as a table (conntable_test.go);
// ConnGuard carries its decisions out. Not safe for concurrent use.
//
// Rules, for a new connection from addr, in order, each closing (evicting)
// at most one connection that is not serving a request (busy), the
// oldest of those eligible:
//
//  1. addr has MaxPerAddress unauthenticated connections: evict one of
//     them.
//  2. MaxUnauthenticated are open: evict an unauthenticated connection of
//     the address that holds the most.
//  3. MaxOpen are open: evict as in 2, or else the oldest authenticated
//     connection that is idle.
//
// When a rule finds nothing to evict (every eligible connection is
// serving a request), the new connection is refused.
type connTable struct {
	lim     ConnLimits
	next    connID
	conns   map[connID]*connEntry
	unauth  map[string]*list.List // of connID, per address
	nUnauth int
	authed  *list.List // of connID
}

func newConnTable(lim ConnLimits) *connTable {
	return &connTable{lim: lim, conns: map[connID]*connEntry{}, unauth: map[string]*list.List{}, authed: list.New()}
}

// add admits a connection from addr. It returns the connections to close
// to make room, already dropped from the table (possibly some even when
// it refuses), and whether the new one is admitted, as id.
func (t *connTable) add(addr string) (id connID, evict []connID, ok bool) {
	if l := t.unauth[addr]; l != nil && l.Len() >= t.lim.MaxPerAddress {
		v, found := idleIn(t, l)
		if !found {
			return 0, evict, false
		}
		evict = append(evict, t.drop(v))
	}
	if t.nUnauth >= t.lim.MaxUnauthenticated {
		v, found := t.idleUnauthFromFullest()
		if !found {
			return 0, evict, false
		}
		evict = append(evict, t.drop(v))
	}
	if len(t.conns) >= t.lim.MaxOpen {
		v, found := t.idleUnauthFromFullest()
		if !found {
			v, found = idleIn(t, t.authed)
		}
		if !found {
			return 0, evict, false
		}
		evict = append(evict, t.drop(v))
	}
	t.next++
	id = t.next
	l := t.unauth[addr]
	if l == nil {
		l = list.New()
		t.unauth[addr] = l
	}
	t.conns[id] = &connEntry{addr: addr, elem: l.PushBack(id)}
	t.nUnauth++
	return id, evict, true
}

// idleIn is the oldest connection of l that is not serving a request.
func idleIn(t *connTable, l *list.List) (connID, bool) {
	for e := l.Front(); e != nil; e = e.Next() {
		if id := e.Value.(connID); t.conns[id].busy == 0 {
			return id, true
		}
	}
	return 0, false
}

// idleUnauthFromFullest is the oldest idle unauthenticated connection of
// the address that holds the most unauthenticated connections (of those
// with one idle; ties: the one whose candidate is oldest).
func (t *connTable) idleUnauthFromFullest() (connID, bool) {
	var best connID
	bestLen, found := 0, false
	for _, l := range t.unauth {
		if l.Len() < bestLen {
			continue
		}
		id, ok := idleIn(t, l)
		if !ok {
			continue
		}
		if !found || l.Len() > bestLen || id < best {
			best, bestLen, found = id, l.Len(), true
		}
	}
	return best, found
}

// drop forgets id (a connection being closed) and returns it.
func (t *connTable) drop(id connID) connID {
	e, ok := t.conns[id]
	if !ok {
		return id
	}
	delete(t.conns, id)
	if e.authed {
		t.authed.Remove(e.elem)
		return id
	}
	l := t.unauth[e.addr]
	l.Remove(e.elem)
	if l.Len() == 0 {
		delete(t.unauth, e.addr)
	}
	t.nUnauth--
	return id
}

// authenticate notes that a request on id authenticated: from now on it
// counts only against MaxOpen.
func (t *connTable) authenticate(id connID) {
	e, ok := t.conns[id]
	if !ok || e.authed {
		return
	}
	l := t.unauth[e.addr]
	l.Remove(e.elem)
	if l.Len() == 0 {
		delete(t.unauth, e.addr)
	}
	t.nUnauth--
	e.authed, e.elem = true, t.authed.PushBack(id)
}

// begin and end bracket a request served on id: a busy connection is
// never evicted.
func (t *connTable) begin(id connID) {
	if e, ok := t.conns[id]; ok {
		e.busy++
	}
}

func (t *connTable) end(id connID) {
	if e, ok := t.conns[id]; ok && e.busy > 0 {
		e.busy--
	}
}
