package harness

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// link is one client connection of a FaultProxy and, once dialed, its
// connection to the server.
type link struct {
	client net.Conn
	// forward is false once the link is blackholed; it never turns true
	// again (leaving the blackhole resets the link).
	forward atomic.Bool
	// dropResponse resets the link when the server starts to answer. Set
	// before the link's goroutines start.
	dropResponse bool

	mu     sync.Mutex
	server net.Conn // nil until dialed; GUARDED_BY(mu)
	closed bool     // GUARDED_BY(mu)
}

// setServer attaches the server connection, unless the link was closed
// while it was being dialed.
func (l *link) setServer(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.server = c
	return true
}

// close ends both sides once: reset when hard, else closed with a FIN.
func (l *link) close(hard bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	end := net.Conn.Close
	if hard {
		end = resetConn
	}
	end(l.client)
	if l.server != nil {
		end(l.server)
	}
}

// run serves one link until both directions ended or the link is closed.
func (p *FaultProxy) run(l *link) {
	defer p.forget(l, false) // both directions ended: a plain close
	if !l.forward.Load() {
		// Accepted in a blackhole: there is no server side, only a
		// client to keep waiting.
		io.Copy(io.Discard, l.client)
		p.forget(l, true)
		return
	}
	var d net.Dialer
	d.Timeout = dialTimeout
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// The server is down: its client sees a reset, as from a cut.
		p.forget(l, true)
		return
	}
	if !l.setServer(server) {
		resetConn(server)
		return
	}
	var up sync.WaitGroup
	up.Go(func() { p.upstream(l, server) })
	p.downstream(l, server)
	up.Wait()
}

// copyBufSize is the most one Read takes before the bytes are forwarded.
const copyBufSize = 32 << 10

// upstream copies what the client sends to the server, dropping it while
// the link is blackholed. A client that half-closes is passed on as such.
func (p *FaultProxy) upstream(l *link, server net.Conn) {
	buf := make([]byte, copyBufSize)
	for {
		n, err := l.client.Read(buf)
		if n > 0 && l.forward.Load() {
			if _, werr := server.Write(buf[:n]); werr != nil {
				p.forget(l, true)
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && l.forward.Load() {
				closeWrite(server)
				return
			}
			// The client is gone, or the link was closed: nothing
			// left to forward either way.
			p.forget(l, true)
			return
		}
	}
}

// downstream copies what the server answers to the client, dropping it
// while the link is blackholed, and resets the link at the first byte it
// would forward if the response is to be dropped.
func (p *FaultProxy) downstream(l *link, server net.Conn) {
	buf := make([]byte, copyBufSize)
	for {
		n, err := server.Read(buf)
		if n > 0 && l.forward.Load() {
			if l.dropResponse {
				p.forget(l, true)
				return
			}
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				p.forget(l, true)
				return
			}
		}
		if err != nil {
			switch {
			case !l.forward.Load():
				// A blackhole hides that the server closed: the
				// client keeps waiting until the link is reset.
			case errors.Is(err, io.EOF):
				closeWrite(l.client)
			default:
				p.forget(l, true)
			}
			return
		}
	}
}

// resetConn closes c with a reset (RST) rather than a FIN, so that its
// peer sees "connection reset by peer" instead of an end of stream.
func resetConn(c net.Conn) error {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	return c.Close()
}

// closeWrite passes a half-close on: the peer reads the end of the stream
// and may still send.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}
