package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// callTimeout bounds a call expected to succeed or to fail at once: long
// enough for a loaded machine, so that only a hang reaches it.
const callTimeout = 30 * time.Second

// TestFaultProxy runs every mode between the Go client and a real memfs
// serve process, one proxy per subtest, and checks on the server (not
// through the proxy) what reached it.
func TestFaultProxy(t *testing.T) {
	srv := StartServe(t, ServeOptions{})
	// Checks on the server open a connection each: a pooled one would be
	// a goroutine the leak checks of the subtests find.
	direct, tr := newTestClient(t, srv.URL, srv.AdminKey)
	tr.DisableKeepAlives = true

	t.Run("pass", func(t *testing.T) {
		noLeaks(t)
		p := NewFaultProxy(t, srv.Addr) // the host:port form
		cl, tr := newTestClient(t, p.URL(), srv.AdminKey)
		st := mustCreateStore(t, cl, "pass")
		if got, err := direct.GetStore(ctx(t), st.ID); err != nil || got.Name != "pass" {
			t.Fatalf("the store created through the proxy, read from the server: %+v, %v", got, err)
		}
		// A body of many reads passes intact both ways.
		content := strings.Repeat("0123456789abcdef", 6<<10)
		m, err := cl.CreateMemory(ctx(t), st.ID, "/big", content)
		if err != nil {
			t.Fatalf("create a 96 KiB memory through the proxy: %v", err)
		}
		back, err := direct.GetMemory(ctx(t), st.ID, m.ID)
		if err != nil || back.Content == nil || *back.Content != content {
			t.Fatalf("the 96 KiB memory read from the server differs (%v)", err)
		}
		if back, err = cl.GetMemory(ctx(t), st.ID, m.ID); err != nil || back.Content == nil || *back.Content != content {
			t.Fatalf("the 96 KiB memory read through the proxy differs (%v)", err)
		}
		if p.Conns() < 1 || p.Open() < 1 {
			t.Fatalf("after requests on a keep-alive client: Conns %d, Open %d, want both >= 1", p.Conns(), p.Open())
		}
		// The client closes its connections: the proxy closes its side.
		tr.CloseIdleConnections()
		waitFor(t, "no connection open once the client closed its own", func() bool { return p.Open() == 0 })
		before := p.Conns()
		mustCreateStore(t, cl, "pass again")
		if got := p.Conns(); got != before+1 {
			t.Fatalf("a request with an empty pool: Conns %d -> %d, want one more", before, got)
		}
	})

	t.Run("cut", func(t *testing.T) {
		noLeaks(t)
		p := NewFaultProxy(t, srv.URL)
		cl, tr := newTestClient(t, p.URL(), srv.AdminKey)
		mustCreateStore(t, cl, "cut: before")
		open := p.Open()
		idle := dial(t, p.Addr())
		waitFor(t, "the raw connection to be open", func() bool { return p.Open() == open+1 })

		p.Cut()
		if n := p.Open(); n != 0 {
			t.Errorf("Open() right after Cut: %d, want 0", n)
		}
		_, err := readWithin(idle, callTimeout)
		wantReset(t, "reading a connection open at the cut", err)

		// A new connection is accepted and reset: the request fails at
		// once (a hang would end in a timeout error instead).
		tr.CloseIdleConnections()
		before := p.Conns()
		start := time.Now()
		_, err = cl.CreateStore(ctx(t), store.CreateStoreInput{Name: "cut: during"})
		wantReset(t, "a request during the cut", err)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("a request during the cut: %v, want store.ErrUnavailable", err)
		}
		t.Logf("a request during the cut failed in %v: %v", time.Since(start).Round(time.Millisecond), err)
		if got := p.Conns(); got != before+1 {
			t.Errorf("a request during the cut: Conns %d -> %d, want one more (the port must stay open)", before, got)
		}
		if n := p.Open(); n != 0 {
			t.Errorf("Open() during the cut: %d, want 0", n)
		}

		p.Pass()
		mustCreateStore(t, cl, "cut: after")
		names := storeNames(t, direct)
		if !names["cut: after"] || names["cut: during"] {
			t.Errorf("stores on the server: after the cut %v (want true), during the cut %v (want false)", names["cut: after"], names["cut: during"])
		}
	})

	t.Run("blackhole", func(t *testing.T) {
		noLeaks(t)
		p := NewFaultProxy(t, srv.URL)
		cl, _ := newTestClient(t, p.URL(), srv.AdminKey)
		// A connection open before the blackhole, shown to forward.
		old := dial(t, p.Addr())
		if resp, err := rawCreateStore(old, srv.AdminKey, "blackhole: before", callTimeout); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a raw request before the blackhole: %v, %v", resp, err)
		}

		p.Blackhole()
		if n := p.Open(); n != 1 {
			t.Errorf("Open() right after Blackhole: %d, want 1 (the connection is held, not closed)", n)
		}
		// The open connection stops forwarding: no answer.
		_, err := rawCreateStore(old, srv.AdminKey, "blackhole: open connection", 500*time.Millisecond)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a request on a connection open at the blackhole: %v, want no answer within 500ms", err)
		}
		// A new connection is accepted, and hangs until the client's
		// own timeout.
		before := p.Conns()
		start := time.Now() // before the deadline is set: took can't come out a hair short of it
		c, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err = cl.CreateStore(c, store.CreateStoreInput{Name: "blackhole: new connection"})
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || took < 500*time.Millisecond {
			t.Errorf("a request with a 500ms timeout during the blackhole: %v after %v, want its timeout", err, took)
		}
		if p.Conns() <= before {
			t.Errorf("a request during the blackhole: Conns %d -> %d, want it accepted", before, p.Conns())
		}

		// Leaving the blackhole resets what it held: the old connection
		// ends, and gets nothing it swallowed late.
		p.Pass()
		if n := p.Open(); n != 0 {
			t.Errorf("Open() right after leaving the blackhole: %d, want 0", n)
		}
		resp, err := readWithin(old, callTimeout)
		if resp != nil {
			t.Errorf("the connection open at the blackhole got an answer after it: %s", resp.Status)
		}
		wantReset(t, "reading the connection open at the blackhole after it", err)

		mustCreateStore(t, cl, "blackhole: after")
		names := storeNames(t, direct)
		for name, want := range map[string]bool{"blackhole: before": true, "blackhole: open connection": false,
			"blackhole: new connection": false, "blackhole: after": true} {
			if names[name] != want {
				t.Errorf("store %q on the server: %v, want %v", name, names[name], want)
			}
		}
	})

	t.Run("drop responses", func(t *testing.T) {
		noLeaks(t)
		p := NewFaultProxy(t, srv.URL)
		cl, _ := newTestClient(t, p.URL(), srv.AdminKey)
		p.DropResponses(1)
		_, err := cl.CreateStore(ctx(t), store.CreateStoreInput{Name: "drop: acted on"})
		wantReset(t, "the request whose response is dropped", err)
		if !storeNames(t, direct)["drop: acted on"] {
			t.Error("the request whose response was dropped did not reach the server")
		}
		mustCreateStore(t, cl, "drop: next")
		if n := p.Conns(); n != 2 {
			t.Errorf("Conns() = %d, want 2: the dropped connection and a fresh one", n)
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		outer := t
		var addr string
		var conns []net.Conn
		t.Run("proxy", func(t *testing.T) {
			noLeaks(t)
			p := NewFaultProxy(t, srv.URL)
			addr = p.Addr()
			// Dialed for the outer test, so that they outlive the proxy.
			passing := dial(outer, addr)
			if resp, err := rawCreateStore(passing, srv.AdminKey, "cleanup", callTimeout); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("a raw request: %v, %v", resp, err)
			}
			p.Blackhole()
			held := dial(outer, addr)
			waitFor(t, "both connections open", func() bool { return p.Open() == 2 })
			conns = []net.Conn{passing, held}
		})
		for i, c := range conns {
			_, err := readWithin(c, callTimeout)
			wantReset(t, fmt.Sprintf("connection %d after the proxy's test ended", i), err)
		}
		if c, err := net.DialTimeout("tcp", addr, callTimeout); !errors.Is(err, syscall.ECONNREFUSED) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial the proxy after its test ended: %v, want connection refused", err)
		}
	})

	t.Run("modes switched under load", func(t *testing.T) {
		noLeaks(t)
		p := NewFaultProxy(t, srv.URL)
		cl, _ := newTestClient(t, p.URL(), srv.AdminKey)
		load, stop := context.WithCancel(t.Context())
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for load.Err() == nil {
					c, cancel := context.WithTimeout(load, 200*time.Millisecond)
					if _, err := cl.ListStores(c, store.ListStoresOptions{Limit: 1}); err == nil {
						ok.Add(1)
					}
					cancel()
				}
			})
		}
		// Each mode lasts until the clients have met it.
		newConn := func() func() bool {
			n := p.Conns()
			return func() bool { return p.Conns() > n }
		}
		for range 3 {
			p.Cut()
			waitFor(t, "a connection during a cut", newConn())
			p.Blackhole()
			waitFor(t, "a connection during a blackhole", newConn())
			p.DropResponses(1)
			waitFor(t, "a connection while dropping responses", newConn())
			p.Pass()
			n := ok.Load()
			waitFor(t, "a request to succeed after Pass", func() bool { return ok.Load() > n })
		}
		stop()
		wg.Wait()
		mustCreateStore(t, cl, "after the switching")
	})
}

// TestFaultProxyServerDown: a connection the server refuses is reset, as
// a cut one would be, and leaves nothing open.
func TestFaultProxyServerDown(t *testing.T) {
	noLeaks(t)
	down := boundPort(t)
	p := NewFaultProxy(t, "http://"+down+"/v1")
	// The reset may come before connect returns.
	c, err := net.DialTimeout("tcp", p.Addr(), callTimeout)
	if err == nil {
		defer c.Close()
		_, err = readWithin(c, callTimeout)
	}
	wantReset(t, "a connection to a server that is down", err)
	waitFor(t, "nothing open", func() bool { return p.Open() == 0 })
	if p.Conns() != 1 {
		t.Errorf("Conns() = %d, want 1", p.Conns())
	}
}

// boundPort returns a loopback address whose port is bound but not
// listening until the test ends: connecting to it is refused, and no other
// socket (the proxy's own listener above all) can take the port meanwhile,
// as it could a port a closed listener freed.
func boundPort(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
}

func TestProxyTarget(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"http://127.0.0.1:8080", "127.0.0.1:8080"},
		{"http://127.0.0.1:8080/v1/", "127.0.0.1:8080"},
		{"http://localhost", "localhost:80"},
		{"https://localhost", "localhost:443"},
		{"http://[::1]:9", "[::1]:9"},
		{"127.0.0.1", ""},
		{"ftp://127.0.0.1:21", ""},
		{"http://:80", ""},
	} {
		got, err := proxyTarget(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("proxyTarget(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// noLeaks checks, after every other cleanup of t has run, that no
// goroutine started during t is left.
func noLeaks(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
}

// newTestClient returns a client that tries each call once (a retry would
// hide the fault) and its transport, whose idle connections are closed at
// cleanup.
func newTestClient(t *testing.T, baseURL, key string) (*client.Client, *http.Transport) {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cl, err := client.New(client.Options{BaseURL: baseURL, APIKey: key, HTTPClient: &http.Client{Transport: tr},
		RetryMax: -1, Timeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return cl, tr
}

// ctx bounds one call that must not hang.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return c
}

func mustCreateStore(t *testing.T, cl *client.Client, name string) *store.Store {
	t.Helper()
	st, err := cl.CreateStore(ctx(t), store.CreateStoreInput{Name: name})
	if err != nil {
		t.Fatalf("create store %q: %v", name, err)
	}
	return st
}

// storeNames lists the names of the server's stores.
func storeNames(t *testing.T, cl *client.Client) map[string]bool {
	t.Helper()
	all, err := cl.AllStores(ctx(t), store.ListStoresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, st := range all {
		names[st.Name] = true
	}
	return names
}

// dial opens a raw connection, closed at cleanup.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawCreateStore sends a create-store request on c and reads the answer
// within timeout.
func rawCreateStore(c net.Conn, key, name string, timeout time.Duration) (*http.Response, error) {
	body := fmt.Sprintf(`{"name":%q}`, name)
	req := "POST /v1/memory_stores HTTP/1.1\r\nHost: memfs\r\n" + RawAPIHeaders("/v1/memory_stores", key) +
		"content-type: application/json\r\ncontent-length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	return readWithin(c, timeout)
}

// readWithin reads one whole HTTP response from c, or the error that
// stopped it, within timeout.
func readWithin(c net.Conn, timeout time.Duration) (*http.Response, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, err
	}
	return resp, nil
}

// wantReset fails t unless err is "connection reset by peer".
func wantReset(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%s: %v, want connection reset by peer", what, err)
	}
}

// waitFor polls cond until it holds, failing t after callTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", callTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
