package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memfs/memfs/store"
)

func init() {
	measures = append(measures, measure{id: "Q1", run: benchQ1})
}

// Q1's shape (docs/operating.md, "memfs serve", Work queue across
// processes): serve processes on one PostgreSQL
// database, workers long-polling one environment spread over them, and
// sessions created through all of them.
const (
	q1Serves   = 4
	q1Workers  = 50
	q1Sessions = 1000
	q1Rate     = 50 // sessions/s in the paced runs
	// q1FastRate paces the run that saturated a 2-core machine when every
	// enqueue woke every blocked poll (the thundering herd): an enqueue
	// must cost a few poll queries, not one per worker.
	q1FastRate = 200
)

// benchQ1 measures work-queue claim latency, from a session create's
// request to the work/poll answer that claims its item, with q1Serves
// memfs serve processes (built from this checkout) on one scratch
// database, so a wake-up across them goes through PostgreSQL's NOTIFY,
// and q1Workers workers polling with block_ms=999.
// Four runs: paced creates (q1Rate/s) through one serve with every worker
// on the others (only a cross-process wake-up, or a block running out,
// answers them), paced creates spread over all serves with workers on all
// of them, at q1Rate/s and at q1FastRate/s, and a burst of q1Sessions
// (the queue drained as fast as the workers can claim).
func benchQ1(ctx context.Context, cfg config) ([]row, error) {
	if cfg.pgURL == "" {
		return []row{{"Q1", "PostgreSQL", "skipped: set MEMFS_BENCH_POSTGRES_URL", "", "", ""}}, nil
	}
	dir, err := os.MkdirTemp("", "memfs-bench-q1-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := q1Binary(dir)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, run := range []struct {
		name  string
		rate  int
		cross bool
	}{
		{fmt.Sprintf("paced %d/s through 1 serve, workers on the other %d", q1Rate, q1Serves-1), q1Rate, true},
		{fmt.Sprintf("paced %d/s, serves and workers mixed", q1Rate), q1Rate, false},
		{fmt.Sprintf("paced %d/s, serves and workers mixed", q1FastRate), q1FastRate, false},
		{"burst, serves and workers mixed", 0, false},
	} {
		dsn, drop, err := scratchPostgres(ctx, cfg.pgURL)
		if err != nil {
			return nil, err
		}
		lat, err := q1Run(ctx, bin, dsn, run.rate, run.cross)
		drop()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.name, err)
		}
		p50, p99, top := percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
		what := fmt.Sprintf("claim latency, session create → claim, %d serves, %d workers, %d sessions (%s): p50 / p99 / max", q1Serves, q1Workers, q1Sessions, run.name)
		rows = append(rows, row{"Q1", what,
			fmt.Sprintf("%s / %s / %s", ms(p50), ms(p99), ms(top)), "100 ms", fmt.Sprintf("%.2f× goal (p99)", p99/100), goalAtMost(p99/100, 1, "100 ms")})
	}
	return rows, nil
}

func ms(x float64) string { return fmt.Sprintf("%.1f ms", x) }

// q1Serve is one memfs serve process.
type q1Serve struct {
	cmd  *exec.Cmd
	dir  string
	base string
}

// q1Start starts bin serve on dsn with the admin key and waits until it
// listens (on a free loopback port).
func q1Start(ctx context.Context, bin, dsn, key string) (*q1Serve, error) {
	dir, err := os.MkdirTemp("", "memfs-bench-q1-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--admin-key", key, "--log-level", "warn", "--db", dsn)
	cmd.Stderr = os.Stderr
	// Die with the bench, should it be killed before close.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &q1Serve{cmd: cmd, dir: dir}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "memfs serve: listening on http://"); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			s.close()
			return nil, fmt.Errorf("memfs serve exited before listening")
		}
		s.base = "http://" + a
		return s, nil
	case <-time.After(60 * time.Second):
		s.close()
		return nil, fmt.Errorf("memfs serve did not listen within 60 s")
	case <-ctx.Done():
		s.close()
		return nil, ctx.Err()
	}
}

// close stops the process (SIGTERM, then SIGKILL after 10 s) and removes
// its data directory.
func (s *q1Serve) close() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}

// q1Binary builds memfs from this checkout into dir.
func q1Binary(dir string) (string, error) {
	bin := filepath.Join(dir, "memfs")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/memfs").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/memfs (run the bench from the module root): %v\n%s", err, out)
	}
	return bin, nil
}

// q1Run runs one Q1 measurement and returns the latencies in ms. rate 0
// creates every session at once (q1Serves creators, one per serve).
// cross creates every session through serve 0 and puts every worker on
// the others.
func q1Run(ctx context.Context, bin, dsn string, rate int, cross bool) ([]float64, error) {
	const key = "sk-memfs-bench-key-0123456789abcdef"
	var serves []*q1Serve
	defer func() {
		for _, s := range serves {
			s.close()
		}
	}()
	for range q1Serves {
		s, err := q1Start(ctx, bin, dsn, key)
		if err != nil {
			return nil, err
		}
		serves = append(serves, s)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: q1Workers + 8}}
	do := func(ctx context.Context, method, url, key, worker string, body, out any) error {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, rd)
		if err != nil {
			return err
		}
		store.SetProtocol(req.Header, req.URL.Path, key)
		if worker != "" {
			req.Header.Set("Anthropic-Worker-ID", worker)
		}
		if body != nil {
			req.Header.Set("content-type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
		}
		return json.Unmarshal(b, out)
	}
	var env struct {
		ID  string `json:"id"`
		Key string `json:"environment_key"`
	}
	if err := do(ctx, "POST", serves[0].base+"/v1/environments", key, "", map[string]any{"name": "q1"}, &env); err != nil {
		return nil, err
	}

	var mu sync.Mutex
	created := map[string]time.Time{} // session id → when its create was sent
	claimed := map[string]time.Time{} // session id → when its claim answered
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, q1Workers+q1Sessions)
	var workers sync.WaitGroup
	for w := range q1Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			// reclaim_older_than_ms: an hour, so no item is offered twice.
			url := fmt.Sprintf("%s/v1/environments/%s/work/poll?block_ms=999&reclaim_older_than_ms=3600000", serves[q1WorkerServe(w, cross)].base, env.ID)
			for wctx.Err() == nil {
				var item *struct {
					Data struct {
						ID string `json:"id"`
					} `json:"data"`
				}
				if err := do(wctx, "GET", url, env.Key, fmt.Sprintf("worker-%d", w), nil, &item); err != nil {
					if wctx.Err() == nil {
						errc <- err
						stop()
					}
					return
				}
				if item == nil {
					continue
				}
				now := time.Now()
				mu.Lock()
				claimed[item.Data.ID] = now
				if len(claimed) == q1Sessions {
					stop()
				}
				mu.Unlock()
			}
		}()
	}
	// Let every worker's first poll block before the creates start.
	time.Sleep(time.Second)

	create := func(i int) {
		var sess struct {
			ID string `json:"id"`
		}
		t0 := time.Now()
		via := i % q1Serves
		if cross {
			via = 0
		}
		if err := do(ctx, "POST", serves[via].base+"/v1/sessions", key, "", map[string]any{"environment_id": env.ID}, &sess); err != nil {
			errc <- err
			stop()
			return
		}
		mu.Lock()
		created[sess.ID] = t0
		mu.Unlock()
	}
	var creators sync.WaitGroup
	if rate > 0 {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for i := range q1Sessions {
			<-tick.C
			creators.Add(1)
			go func() { defer creators.Done(); create(i) }()
		}
		tick.Stop()
	} else {
		for c := range q1Serves {
			creators.Add(1)
			go func() {
				defer creators.Done()
				for i := c; i < q1Sessions; i += q1Serves {
					create(i)
				}
			}()
		}
	}
	creators.Wait()
	select {
	case <-wctx.Done():
	case <-time.After(2 * time.Minute):
		stop()
		workers.Wait()
		return nil, fmt.Errorf("%d of %d sessions claimed within 2 minutes", len(claimed), q1Sessions)
	}
	workers.Wait()
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	var lat []float64
	for id, t0 := range created {
		t1, ok := claimed[id]
		if !ok {
			return nil, fmt.Errorf("session %s was never claimed", id)
		}
		lat = append(lat, float64(t1.Sub(t0).Microseconds())/1000)
	}
	if len(lat) != q1Sessions {
		return nil, fmt.Errorf("%d latencies for %d sessions", len(lat), q1Sessions)
	}
	return lat, nil
}

// q1WorkerServe is the serve worker w polls.
func q1WorkerServe(w int, cross bool) int {
	if cross {
		return 1 + w%(q1Serves-1)
	}
	return w % q1Serves
}
