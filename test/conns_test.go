package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// floodConns is how many idle connections TestServeIdleFlood holds; the
// serve it floods has an open-file limit of floodNoFile, so before the
// connection limits the flood took every descriptor.
const (
	floodConns  = 5000
	floodNoFile = 1024
)

// raiseNoFile raises the test process's soft RLIMIT_NOFILE to its hard
// limit and fails when that can't hold need descriptors.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur < need {
		t.Fatalf("the test needs %d open files; the hard limit is %d (ulimit -Hn)", need, rl.Cur)
	}
}

// TestServeIdleFlood (docs/operating.md, "memfs serve", Connections): 5,000 unauthenticated
// connections from ten addresses, half of which sent one request and half
// nothing, all kept open, against a serve with 1,024 descriptors: a new
// client still gets each answer in under a second (the database too has
// its descriptors), an authenticated client's idle keep-alive connection
// is kept, and serve never runs out of descriptors.
func TestServeIdleFlood(t *testing.T) {
	raiseNoFile(t, floodConns+500)
	srv := harness.StartServe(t, harness.ServeOptions{NoFile: floodNoFile})
	if lim, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", srv.Pid())); !strings.Contains(string(lim), fmt.Sprintf("Max open files            %d", floodNoFile)) {
		t.Fatalf("serve does not run with the open-file limit %d:\n%s", floodNoFile, lim)
	}
	ctx := context.Background()

	// An authenticated client with a keep-alive connection, idle during the flood.
	kept := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	keptAPI := &serveAPI{url: srv.URL, key: srv.AdminKey, hc: kept}
	if _, err := keptAPI.call(ctx, "GET", "/v1/memory_stores", nil, nil); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var conns []net.Conn
	failed := 0
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				// The timeout bounds a dial that the kernel does not
				// answer because serve stopped accepting and its backlog
				// is full: a failure, whatever the machine's speed.
				d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%10))}}
				c, err := d.Dial("tcp", srv.Addr)
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					continue
				}
				if i%2 == 0 {
					// One request with no credential, then the connection
					// idles (its 401 waits unread in the socket).
					fmt.Fprintf(c, "GET /v1/memory_stores HTTP/1.1\r\nHost: memfs\r\n%s\r\n", harness.RawAPIHeaders("/v1/memory_stores", ""))
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	for i := range floodConns {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed > 0 {
		t.Errorf("%d of %d connections could not be made: serve stopped accepting", failed, floodConns)
	}

	// New clients, each on a new connection, with 5,000 held open.
	fresh := &serveAPI{url: srv.URL, key: srv.AdminKey, hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	var store struct{ ID string }
	for i := range 5 {
		start := time.Now()
		var err error
		switch i {
		case 0:
			_, err = fresh.call(ctx, "POST", "/v1/memory_stores", map[string]any{"name": "flood"}, &store)
		case 1:
			_, err = fresh.call(ctx, "POST", "/v1/memory_stores/"+store.ID+"/memories", map[string]any{"path": "/a.md", "content": "a\n"}, nil)
		default:
			_, err = fresh.call(ctx, "GET", "/v1/memory_stores/"+store.ID+"/memories", nil, nil)
		}
		if took := time.Since(start); err != nil || took >= time.Second {
			t.Fatalf("request %d of a new client during the flood: %v after %s; want an answer in under a second", i, err, took)
		}
	}

	// The authenticated client's idle connection was kept.
	reused := false
	trace := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	if _, err := keptAPI.call(trace, "GET", "/v1/memory_stores", nil, nil); err != nil {
		t.Errorf("the authenticated client after the flood: %v", err)
	} else if !reused {
		t.Errorf("the authenticated client's idle keep-alive connection was closed during the flood")
	}
	for _, bad := range []string{"too many open files", "unable to open database file"} {
		if strings.Contains(srv.Output(), bad) {
			t.Errorf("serve logged %q:\n%s", bad, srv.Output())
		}
	}
}
