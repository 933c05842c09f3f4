package server

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
)

// TestConnContextTLS checks that a request on a TLS connection finds the
// guarded connection beneath it: without that, memfs serve --tls-cert-file
// would never tell the ConnGuard that a connection authenticated.
func TestConnContextTLS(t *testing.T) {
	lim, err := DefaultConnLimits(1024)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewConnGuard(lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := g.Listener(ln)
	defer gl.Close()
	dialed := make(chan net.Conn, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()
	c, err := gl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if cc := <-dialed; cc != nil {
		defer cc.Close()
	}
	gc, ok := c.(*guardedConn)
	if !ok {
		t.Fatalf("the guard's listener accepted a %T", c)
	}
	for _, conn := range []net.Conn{c, tls.Server(c, &tls.Config{})} {
		if got := connOf(ConnContext(context.Background(), conn)); got != gc {
			t.Errorf("ConnContext(%T): the request sees %v, want the guarded connection", conn, got)
		}
	}
}
