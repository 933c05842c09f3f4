package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// ConnGuard keeps memfs serve's client connections within ConnLimits: its
// listener admits each accepted connection by connTable's rules and
// closes the connections those rules evict; the Server tells it, through
// the request's context (ConnContext), when a request begins and ends
// and when one authenticates.
//
// Use: g := NewConnGuard(limits, log); serve http.Server{ConnContext:
// ConnContext, ...} on g.Listener(ln). A connection that does not come
// from a ConnGuard's listener is not tracked.
type ConnGuard struct {
	log logrus.FieldLogger

	mu      sync.Mutex
	table   *connTable              // GUARDED_BY(mu)
	conns   map[connID]*guardedConn // GUARDED_BY(mu)
	warned  time.Time               // GUARDED_BY(mu): the last warning
	shed    int                     // GUARDED_BY(mu): evicted since then
	refused int                     // GUARDED_BY(mu): refused since then
}

// connWarnEvery spaces the warnings that connections are being shed.
const connWarnEvery = time.Minute

// NewConnGuard returns a guard for lim (checked with Validate).
func NewConnGuard(lim ConnLimits, log logrus.FieldLogger) (*ConnGuard, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = logrus.StandardLogger()
	}
	return &ConnGuard{log: log, table: newConnTable(lim), conns: map[connID]*guardedConn{}}, nil
}

// Listener wraps ln: Accept returns only connections the limits admit,
// after closing the ones evicted for them, and drops (closes) the ones
// refused.
func (g *ConnGuard) Listener(ln net.Listener) net.Listener {
	return &guardedListener{Listener: ln, g: g}
}

type guardedListener struct {
	net.Listener
	g *ConnGuard
}

var _ net.Listener = (*guardedListener)(nil)

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

// admit applies the table's decision to c: it closes the evicted
// connections (outside the lock: Close takes it again) and c itself when
// refused (returning nil).
func (g *ConnGuard) admit(c net.Conn) *guardedConn {
	addr := addrKey(c.RemoteAddr().String())
	g.mu.Lock()
	id, evict, ok := g.table.add(addr)
	victims := make([]*guardedConn, 0, len(evict))
	for _, v := range evict {
		if vc := g.conns[v]; vc != nil {
			victims = append(victims, vc)
			delete(g.conns, v)
		}
	}
	var gc *guardedConn
	if ok {
		gc = &guardedConn{Conn: c, g: g, id: id}
		g.conns[id] = gc
	}
	g.shed += len(victims)
	if !ok {
		g.refused++
	}
	warn, shed, refused := false, g.shed, g.refused
	if (shed > 0 || refused > 0) && time.Since(g.warned) >= connWarnEvery {
		warn, g.warned, g.shed, g.refused = true, time.Now(), 0, 0
	}
	open, unauth := len(g.table.conns), g.table.nUnauth
	g.mu.Unlock()

	for _, v := range victims {
		v.Close() // evicted: nothing to tell its client
	}
	if !ok {
		c.Close()
	}
	if warn {
		g.log.WithFields(logrus.Fields{"open": open, "unauthenticated": unauth, "closed_idle": shed, "refused": refused,
			"max_open": g.table.lim.MaxOpen, "max_unauthenticated": g.table.lim.MaxUnauthenticated, "max_per_address": g.table.lim.MaxPerAddress}).
			Warn("at the connection limit: closing idle connections that have not authenticated (and refusing new ones when every connection is serving a request); see --max-connections")
	}
	return gc
}

// addrKey is the "address" of ConnLimits.MaxPerAddress for a remote
// host:port: the IPv4 address, or the /64 of an IPv6 one (a single host
// commonly holds a whole /64, so one address each would bound nothing).
func addrKey(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	ip := ap.Addr().Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64) // an IPv6 address always has a /64
	return p.String()
}

// guardedConn is an admitted connection; closing it frees its place.
type guardedConn struct {
	net.Conn
	g  *ConnGuard
	id connID

	closeOnce sync.Once
	closeErr  error
}

var _ net.Conn = (*guardedConn)(nil)

func (c *guardedConn) Close() error {
	c.closeOnce.Do(func() {
		c.g.mu.Lock()
		c.g.table.drop(c.id)
		delete(c.g.conns, c.id)
		c.g.mu.Unlock()
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}

func (c *guardedConn) update(f func(*connTable, connID)) {
	if c == nil {
		return
	}
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	f(c.g.table, c.id)
}

type connCtxKey struct{}

// ConnContext is the http.Server ConnContext hook that lets the Server
// reach the ConnGuard of a connection from its requests. Over TLS the
// server hands it the *tls.Conn on top of the guarded one.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, connCtxKey{}, gc)
	}
	return ctx
}

// connOf is the guarded connection a request came on (nil: none; its
// methods then do nothing).
func connOf(ctx context.Context) *guardedConn {
	gc, _ := ctx.Value(connCtxKey{}).(*guardedConn)
	return gc
}
