package harness

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FaultProxy is a TCP proxy between memfs clients (mount and worker
// processes, or clients in the test) and a memfs serve process. A test
// points the clients at p.URL() and switches the proxy between modes to
// make the network fail the ways a real one does:
//
//   - Pass forwards bytes both ways (the default).
//   - Cut resets every open connection and every new one, as when the
//     server's host goes away: clients fail at once with "connection reset
//     by peer".
//   - Blackhole accepts and reads but forwards and answers nothing, on new
//     connections and on those already open, as when packets are lost:
//     clients hang until their own timeouts.
//   - DropResponses forwards requests but resets the connection when the
//     answer starts: the request took effect and the client can't know it.
//
// The proxy never gives up its port: Cut resets the connections it accepts
// instead of closing the listener, so no other process can take the port
// before Pass, and clients keep one address for the whole test.
//
// Connections the proxy ends because of a fault are reset (SO_LINGER 0),
// never closed with a FIN: the client's error then names the fault the
// same way every time, and no client can take a cut stream for a response
// that ended.
//
// Every method is safe for concurrent use, and a mode takes effect before
// the call returns: no byte that a client or the server sends after
// Blackhole returns is forwarded. Bytes read before the switch may still
// be written, as packets already on the wire would be. Each mode change is
// logged to t, so switch modes only while the test runs.
//
// The listener, every connection and every goroutine are closed and waited
// for in t.Cleanup.
type FaultProxy struct {
	t      testing.TB
	target string // host:port of the server
	ln     net.Listener
	ctx    context.Context // canceled at cleanup: stops dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every link's goroutines
	conns  atomic.Int64   // connections accepted, in every mode

	// mu and link.mu are never held together.
	mu     sync.Mutex
	mode   faultMode          // GUARDED_BY(mu)
	drops  int                // responses left to drop, in modePass; GUARDED_BY(mu)
	links  map[*link]struct{} // client connections open; GUARDED_BY(mu)
	closed bool               // GUARDED_BY(mu)
}

// faultMode is what the proxy does with bytes and connections.
type faultMode int

const (
	modePass faultMode = iota
	modeCut
	modeBlackhole
)

func (m faultMode) String() string {
	switch m {
	case modePass:
		return "pass"
	case modeCut:
		return "cut"
	case modeBlackhole:
		return "blackhole"
	}
	return fmt.Sprintf("faultMode(%d)", int(m))
}

// dialTimeout bounds a connection to the server. The server is on
// loopback: a dial that takes this long means it is wedged, and the
// client then sees a reset as if it were down.
const dialTimeout = 10 * time.Second

// NewFaultProxy listens on a free loopback port and forwards to target,
// the server's "host:port" or its http:// or https:// URL (whose path is
// ignored: clients send their own). It starts in Pass mode. The server
// need not be up yet: a connection the server refuses is reset.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	hostport, err := proxyTarget(target)
	if err != nil {
		t.Fatalf("NewFaultProxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("NewFaultProxy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &FaultProxy{t: t, target: hostport, ln: ln, ctx: ctx, cancel: cancel, links: map[*link]struct{}{}}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.close)
	return p
}

// proxyTarget returns the host:port that target names.
func proxyTarget(target string) (string, error) {
	if !strings.Contains(target, "://") {
		if _, _, err := net.SplitHostPort(target); err != nil {
			return "", fmt.Errorf("target %q: want host:port or an http:// URL: %w", target, err)
		}
		return target, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("target %q: %w", target, err)
	}
	port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if port == "" || u.Hostname() == "" {
		return "", fmt.Errorf("target %q: want an http:// or https:// URL with a host", target)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// URL is "http://" + Addr(), for a client's base URL.
func (p *FaultProxy) URL() string { return "http://" + p.Addr() }

// Conns is how many connections the proxy accepted, in every mode
// (including those Cut reset at once).
func (p *FaultProxy) Conns() int { return int(p.conns.Load()) }

// Open is how many client connections the proxy holds open now, passing
// or blackholed.
func (p *FaultProxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Pass forwards bytes both ways on new connections. Connections held by a
// blackhole are reset, so that nothing they swallowed is delivered late
// and clients retry on fresh connections; connections that were passing
// go on.
func (p *FaultProxy) Pass() { p.setMode(modePass, 0) }

// Cut resets every open connection, both sides, and every connection
// accepted until the mode changes: clients fail at once with "connection
// reset by peer", and the server sees its clients vanish.
func (p *FaultProxy) Cut() { p.setMode(modeCut, 0) }

// Blackhole stops forwarding: on new connections and on those already
// open, what either side sends is read and dropped, so both wait for
// answers until their own timeouts. Leaving Blackhole for any mode resets
// every connection it held.
func (p *FaultProxy) Blackhole() { p.setMode(modeBlackhole, 0) }

// DropResponses is Pass, except that each of the next n connections
// accepted is reset, both sides, as soon as the server starts to answer on
// it: the server has acted on the first request, and its client sees a
// reset instead of the answer. Connections already open pass as before,
// so a client with pooled connections must close its idle ones first for
// its next request to be dropped. Any later mode change cancels the drops
// left.
func (p *FaultProxy) DropResponses(n int) { p.setMode(modePass, n) }

func (p *FaultProxy) setMode(m faultMode, drops int) {
	p.mu.Lock()
	p.mode, p.drops = m, drops
	var reset []*link
	for l := range p.links {
		switch {
		case m == modeCut:
			reset = append(reset, l)
		case m == modeBlackhole:
			l.forward.Store(false)
		case !l.forward.Load():
			reset = append(reset, l) // leaving a blackhole
		}
	}
	for _, l := range reset {
		delete(p.links, l)
	}
	open := len(p.links)
	p.mu.Unlock()
	for _, l := range reset {
		l.close(true)
	}
	desc := m.String()
	if drops > 0 {
		desc = fmt.Sprintf("pass, dropping the response on the next %d connection(s)", drops)
	}
	p.t.Logf("fault proxy %s -> %s: %s (%d connection(s) reset, %d open)", p.Addr(), p.target, desc, len(reset), open)
}

// acceptLoop admits connections until the listener is closed.
func (p *FaultProxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if !closed {
				// Clients would hang in the listen backlog: say why.
				p.t.Errorf("fault proxy %s: accept: %v", p.Addr(), err)
			}
			return
		}
		p.conns.Add(1)
		if l := p.admit(c); l != nil {
			p.wg.Go(func() { p.run(l) })
		} else {
			resetConn(c)
		}
	}
}

// admit records a new client connection in the current mode, or returns
// nil when it must be reset (Cut, or the proxy is closing).
func (p *FaultProxy) admit(c net.Conn) *link {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == modeCut {
		return nil
	}
	l := &link{client: c}
	l.forward.Store(p.mode == modePass)
	if p.mode == modePass && p.drops > 0 {
		l.dropResponse = true
		p.drops--
	}
	p.links[l] = struct{}{}
	return l
}

// forget removes l from the open links and closes it: reset (hard) for a
// fault, closed with a FIN when both sides ended.
func (p *FaultProxy) forget(l *link, hard bool) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close(hard)
}

// close is the cleanup: it refuses new connections, resets every open
// one, stops dials in flight and waits for every goroutine.
func (p *FaultProxy) close() {
	p.mu.Lock()
	p.closed = true
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for l := range links {
		l.close(true)
	}
	p.wg.Wait()
}
