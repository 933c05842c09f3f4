package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

// benchKey is the admin key of the benchmarks' store services.
const benchKey = "sk-memfs-bench-key-0123456789abcdef"

// apiServer is an in-process store service on one database behind a real
// loopback HTTP listener, with a keep-alive client for it: what D1 and X1
// measure. Its memory cap is out of the way (the measures fill stores to
// sizes of their own).
type apiServer struct {
	db   *sqlstore.DB
	base string
	hc   *http.Client
	hs   *http.Server
}

// startAPIServer opens dsn and serves it; clients is how many requests
// the caller will have in flight at once.
func startAPIServer(ctx context.Context, dsn string, clients int) (*apiServer, error) {
	db, err := sqlstore.Open(ctx, dsn, sqlstore.Options{MaxMemoriesPerStore: 1 << 30})
	if err != nil {
		return nil, err
	}
	if _, err := server.EnsureAdminKey(ctx, db, benchKey, ""); err != nil {
		db.Close()
		return nil, err
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv, err := server.New(server.Options{Backend: db, Log: log})
	if err != nil {
		db.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &apiServer{db: db, base: "http://" + ln.Addr().String(), hs: &http.Server{Handler: srv},
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}, Timeout: 5 * time.Minute}}
	go s.hs.Serve(ln)
	return s, nil
}

func (s *apiServer) close() {
	s.hs.Close()
	s.db.Close()
}

// do sends one request with a JSON body (nil: none) and decodes the JSON
// answer; anything but 200 is an error.
func (s *apiServer) do(ctx context.Context, method, path string, body any) (map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	store.SetProtocol(req.Header, path, benchKey)
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s %s: %d, %w", method, path, resp.StatusCode, err)
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out, nil
}

// createStore creates a store named name and returns its id.
func (s *apiServer) createStore(ctx context.Context, name string) (string, error) {
	st, err := s.do(ctx, "POST", "/v1/memory_stores", map[string]any{"name": name})
	if err != nil {
		return "", err
	}
	return st["id"].(string), nil
}

// inParallel runs op(0) … op(n-1) on clients goroutines and returns the
// operations per second; the first error stops it.
func inParallel(clients, n int, op func(i int) error) (float64, error) {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for firstErr.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, e.(error)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
