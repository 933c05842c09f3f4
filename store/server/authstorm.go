package server

import (
	"net"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// overflowAddr is the one entry that stands for every address seen once
// the table is full, so an attacker spreading 401s over many addresses
// still gets a warning while memory stays bounded.
const overflowAddr = "(other addresses)"

// defaultMaxStormAddrs bounds the addresses remembered at once.
const defaultMaxStormAddrs = 10000

// authStorms warns when one remote address gets repeated 401s: a client
// with a wrong or revoked key retrying in a loop, or someone guessing
// keys. The access log shows each 401; this says that they pile up, once
// per window, so it stands out at warn level.
//
// Rule: the threshold-th 401 within one window from one address (the
// host of the peer address: behind a reverse proxy that is the proxy)
// warns, naming how many 401s it got since its last warning; then that
// address warns at most once a window. An address with no 401 and no
// warning for a window is forgotten (checked at most once a window, when a
// 401 arrives). At most maxAddrs addresses are remembered: beyond that,
// new addresses are counted together under overflowAddr.
type authStorms struct {
	threshold int
	window    time.Duration
	maxAddrs  int
	log       logrus.FieldLogger

	mu        sync.Mutex
	addrs     map[string]*authStorm // GUARDED_BY(mu)
	lastSweep time.Time             // GUARDED_BY(mu)
}

// authStorm is one address's recent 401s.
type authStorm struct {
	recent  []time.Time // the last threshold 401s, oldest first
	refused int         // 401s since the last warning
	warned  time.Time   // the last warning (zero: none)
}

// refused notes a 401 answered to remote (host:port) at now, and logs a
// warning when one is due.
func (a *authStorms) refused(remote string, now time.Time) {
	addr := remote
	if host, _, err := net.SplitHostPort(remote); err == nil {
		addr = host
	}
	addr, n, warn := a.note(addr, now)
	if warn {
		a.log.WithFields(logrus.Fields{"remote": addr, "refused": n, "window": a.window.String()}).
			Warnf("%d requests from %s were refused for a missing or wrong credential (401), %d within %s: "+
				"a client with a wrong or revoked key, or someone guessing keys", n, addr, a.threshold, a.window)
	}
}

// note records a 401 from addr at now; it returns the address it was
// counted under (addr, or overflowAddr), whether a warning is due, and the
// 401s to report in it.
func (a *authStorms) note(addr string, now time.Time) (counted string, refused int, warn bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.addrs == nil {
		a.addrs = map[string]*authStorm{}
	}
	a.sweep(now)
	e := a.addrs[addr]
	if e == nil {
		if len(a.addrs) >= a.maxAddrs {
			addr = overflowAddr
			e = a.addrs[addr]
		}
		if e == nil {
			e = &authStorm{recent: make([]time.Time, 0, a.threshold)}
			a.addrs[addr] = e
		}
	}
	e.refused++
	if len(e.recent) == a.threshold {
		e.recent = append(e.recent[:0], e.recent[1:]...)
	}
	e.recent = append(e.recent, now)
	if len(e.recent) < a.threshold || now.Sub(e.recent[0]) > a.window {
		return addr, 0, false
	}
	if !e.warned.IsZero() && now.Sub(e.warned) < a.window {
		return addr, 0, false
	}
	refused, e.refused, e.warned = e.refused, 0, now
	return addr, refused, true
}

// sweep forgets the addresses quiet for a window: no 401 and no warning.
// It runs at most once a window, so a 401 costs O(1) on average.
func (a *authStorms) sweep(now time.Time) {
	if now.Sub(a.lastSweep) < a.window {
		return
	}
	a.lastSweep = now
	for addr, e := range a.addrs {
		last := e.recent[len(e.recent)-1]
		if now.Sub(last) > a.window && now.Sub(e.warned) >= a.window {
			delete(a.addrs, addr)
		}
	}
}
