package server

import (
	"slices"
	"testing"
)

// TestConnTable: connTable's rules, one row each. Every row starts from
// a table with MaxOpen 6, MaxUnauthenticated 4, MaxPerAddress 2, runs
// its steps, and checks what the last add evicted and admitted.
func TestConnTable(t *testing.T) {
	type step struct {
		add        string // a connection from this address
		auth, busy int    // or: authenticate / begin a request on the n-th admitted connection (1-based)
	}
	for _, c := range []struct {
		name    string
		steps   []step
		evicted []int // of the last add, as n-th admitted
		refused bool
	}{
		{name: "under every bound: admitted, nothing closed",
			steps: []step{{add: "a"}, {add: "b"}}},
		{name: "per address: the address's oldest idle goes",
			steps: []step{{add: "a"}, {add: "b"}, {add: "a"}, {add: "a"}}, evicted: []int{1}},
		{name: "per address: a busy one stays, the next oldest goes",
			steps: []step{{add: "a"}, {add: "a"}, {busy: 1}, {add: "a"}}, evicted: []int{2}},
		{name: "per address: all busy, refused",
			steps: []step{{add: "a"}, {add: "a"}, {busy: 1}, {busy: 2}, {add: "a"}}, refused: true},
		{name: "per address: authenticated ones do not count",
			steps: []step{{add: "a"}, {add: "a"}, {auth: 1}, {add: "a"}}},
		{name: "unauthenticated bound: the fullest address gives its oldest idle",
			steps: []step{{add: "a"}, {add: "b"}, {add: "b"}, {add: "c"}, {add: "d"}}, evicted: []int{2}},
		{name: "unauthenticated bound: ties go to the oldest",
			steps: []step{{add: "b"}, {add: "a"}, {add: "a"}, {add: "b"}, {add: "c"}}, evicted: []int{1}},
		{name: "unauthenticated bound: a fullest address all busy gives way to the next",
			steps: []step{{add: "a"}, {add: "b"}, {add: "b"}, {busy: 2}, {busy: 3}, {add: "c"}, {add: "d"}}, evicted: []int{1}},
		{name: "unauthenticated bound: every one busy, refused",
			steps: []step{{add: "a"}, {add: "b"}, {add: "c"}, {add: "d"}, {busy: 1}, {busy: 2}, {busy: 3}, {busy: 4}, {add: "e"}}, refused: true},
		{name: "authenticated clients keep their reserve: a new one evicts an unauthenticated one, not them",
			steps: []step{{add: "a"}, {add: "b"}, {auth: 1}, {auth: 2}, {add: "c"}, {add: "d"}, {add: "e"}, {add: "f"}, {add: "g"}}, evicted: []int{3}},
		{name: "all open: an idle unauthenticated one goes before an authenticated one",
			steps: []step{{add: "a"}, {add: "b"}, {add: "c"}, {auth: 1}, {auth: 2}, {auth: 3}, {add: "d"}, {add: "e"}, {add: "f"}, {add: "g"}}, evicted: []int{4}},
		{name: "all open and all authenticated: the oldest idle authenticated one goes",
			steps: []step{{add: "a"}, {add: "b"}, {add: "c"}, {add: "d"}, {auth: 1}, {auth: 2}, {auth: 3}, {auth: 4}, {add: "e"}, {add: "f"}, {auth: 5}, {auth: 6}, {busy: 1}, {add: "g"}}, evicted: []int{2}},
		{name: "all open, all authenticated and busy: refused",
			steps: []step{{add: "a"}, {auth: 1}, {add: "b"}, {auth: 2}, {add: "c"}, {auth: 3},
				{add: "d"}, {auth: 4}, {add: "e"}, {auth: 5}, {add: "f"}, {auth: 6},
				{busy: 1}, {busy: 2}, {busy: 3}, {busy: 4}, {busy: 5}, {busy: 6}, {add: "g"}}, refused: true},
	} {
		tb := newConnTable(ConnLimits{MaxOpen: 6, MaxUnauthenticated: 4, MaxPerAddress: 2})
		var ids []connID
		var evicted []connID
		var ok bool
		for _, s := range c.steps {
			switch {
			case s.add != "":
				var id connID
				id, evicted, ok = tb.add(s.add)
				if ok {
					ids = append(ids, id)
				}
			case s.auth > 0:
				tb.authenticate(ids[s.auth-1])
			case s.busy > 0:
				tb.begin(ids[s.busy-1])
			}
		}
		var want []connID
		for _, n := range c.evicted {
			want = append(want, ids[n-1])
		}
		if ok == c.refused || !slices.Equal(evicted, want) {
			t.Errorf("%s: evicted %v, admitted %v; want evicted %v, admitted %v", c.name, evicted, ok, want, !c.refused)
		}
		if len(tb.conns) > tb.lim.MaxOpen || tb.nUnauth > tb.lim.MaxUnauthenticated {
			t.Errorf("%s: %d open, %d unauthenticated: over the limits", c.name, len(tb.conns), tb.nUnauth)
		}
	}
}

// TestConnTableEndAndDrop: a request's end makes its connection evictable
// again, and a dropped connection frees its places.
func TestConnTableEndAndDrop(t *testing.T) {
	tb := newConnTable(ConnLimits{MaxOpen: 2, MaxUnauthenticated: 1, MaxPerAddress: 1})
	a, _, _ := tb.add("a")
	tb.begin(a)
	if _, ev, ok := tb.add("b"); ok || len(ev) != 0 {
		t.Fatalf("with the only unauthenticated place busy: admitted %v, evicted %v; want refused", ok, ev)
	}
	tb.end(a)
	b, ev, ok := tb.add("b")
	if !ok || !slices.Equal(ev, []connID{a}) {
		t.Fatalf("after the request ended: admitted %v, evicted %v; want %v evicted", ok, ev, a)
	}
	tb.drop(b)
	if len(tb.conns) != 0 || tb.nUnauth != 0 || len(tb.unauth) != 0 {
		t.Fatalf("after dropping all: %d open, %d unauthenticated, %d addresses", len(tb.conns), tb.nUnauth, len(tb.unauth))
	}
}

// TestDefaultConnLimits: derived from RLIMIT_NOFILE with ReservedFDs kept
// for the database and a quarter for authenticated clients; too low a
// limit is an error that says how to raise it.
func TestDefaultConnLimits(t *testing.T) {
	l, err := DefaultConnLimits(1024)
	if err != nil || l != (ConnLimits{MaxOpen: 768, MaxUnauthenticated: 576, MaxPerAddress: 72}) {
		t.Errorf("DefaultConnLimits(1024) = %+v, %v", l, err)
	}
	if l, err := DefaultConnLimits(1 << 20); err != nil || l.MaxPerAddress != 1024 || l.Validate() != nil {
		t.Errorf("DefaultConnLimits(1<<20) = %+v, %v", l, err)
	}
	if _, err := DefaultConnLimits(300); err == nil {
		t.Errorf("DefaultConnLimits(300): no error")
	}
}

// TestAddrKey: the per-address bound counts an IPv4 address, or an IPv6
// /64, as one address.
func TestAddrKey(t *testing.T) {
	for remote, want := range map[string]string{
		"127.0.0.2:4567":             "127.0.0.2",
		"[::ffff:10.0.0.1]:80":       "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":      "2001:db8:1:3::/64",
		"[fe80::1%eth0]:22":          "fe80::/64",
		"not an address":             "not an address",
	} {
		if got := addrKey(remote); got != want {
			t.Errorf("addrKey(%q) = %q, want %q", remote, got, want)
		}
	}
}
