// Command scale seeds a store through the Memory Stores API for the scale
// measurements (run.sh; docs/operating.md, "Owners, modes and limits"): N memories of about 1 KB spread over
// folders, created by concurrent clients as real users' creates would be.
// It prints the new store's id. It writes through HTTP, not rows, so the
// store is exactly what the API would have made (the feed, the counts).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memfs/memfs/store"
)

func main() {
	api := flag.String("api-url", "http://127.0.0.1:8080", "the memfs serve to seed")
	keyFile := flag.String("api-key-file", "", "admin key file")
	n := flag.Int("n", 10000, "memories to create")
	folders := flag.Int("folders", 100, "folders to spread them over")
	clients := flag.Int("c", 16, "concurrent clients")
	flag.Parse()
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		fail(err)
	}
	s := &seeder{base: strings.TrimRight(*api, "/"), key: strings.TrimSpace(string(key)),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients * 2}, Timeout: time.Minute}}
	st, err := s.post("/v1/memory_stores", map[string]any{"name": fmt.Sprintf("scale %d", *n)})
	if err != nil {
		fail(err)
	}
	sid := st["id"].(string)
	// ~1 KB: a marker grep can find in one memory of every thousand.
	line := "memfs scale test line, some words to search through.\n"
	body := strings.Repeat(line, 1000/len(line))
	start := time.Now()
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for firstErr.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= *n {
					return
				}
				c := body
				if i%1000 == 0 {
					c += "needle\n"
				}
				p := fmt.Sprintf("/f%03d/m%06d.md", i%*folders, i)
				if _, err := s.post("/v1/memory_stores/"+sid+"/memories", map[string]any{"path": p, "content": c}); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		fail(e.(error))
	}
	fmt.Fprintf(os.Stderr, "created %d memories in %.1f s (%.0f/s)\n", *n, time.Since(start).Seconds(), float64(*n)/time.Since(start).Seconds())
	fmt.Println(sid)
}

type seeder struct {
	base, key string
	hc        *http.Client
}

func (s *seeder) post(path string, body any) (map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.base+path, bytes.NewReader(b))
	store.SetProtocol(req.Header, path, s.key)
	req.Header.Set("content-type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scale:", err)
	os.Exit(1)
}
