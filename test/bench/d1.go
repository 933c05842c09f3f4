package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

func init() {
	measures = append(measures, measure{id: "D1", run: benchD1})
}

// benchD1 measures creates/s and gets/s over HTTP on loopback, SQLite and
// PostgreSQL, each in a fresh database behind a real HTTP listener.
func benchD1(ctx context.Context, cfg config) ([]row, error) {
	var rows []row
	backends := []struct{ name, dsn string }{}
	dir, err := os.MkdirTemp("", "memfs-bench-d1-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	backends = append(backends, struct{ name, dsn string }{"SQLite", dir + "/bench.db"})
	var dropPG func()
	if cfg.pgURL != "" {
		u, drop, err := scratchPostgres(ctx, cfg.pgURL)
		if err != nil {
			return nil, err
		}
		dropPG = drop
		backends = append(backends, struct{ name, dsn string }{"PostgreSQL", u})
	}
	for _, b := range backends {
		creates, gets, err := d1Backend(ctx, cfg, b.dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		// Both backends share the goal (issue 12, D1): ≥ 1,000 creates/s.
		goal, ref := "≥ 1,000/s", "1,000/s"
		ratio := fmt.Sprintf("%.2f× goal", creates/1000)
		rows = append(rows,
			row{"D1", fmt.Sprintf("%s creates/s (HTTP, %d clients%s)", b.name, cfg.concurrency, prefilled(cfg)), fmt.Sprintf("%.0f", creates), ref, ratio, goal},
			row{"D1", fmt.Sprintf("%s gets/s (HTTP, %d clients)", b.name, cfg.concurrency), fmt.Sprintf("%.0f", gets), "—", "—", "reported"})
	}
	if dropPG != nil {
		dropPG()
	} else {
		rows = append(rows, row{"D1", "PostgreSQL", "skipped: set MEMFS_BENCH_POSTGRES_URL", "", "", ""})
	}
	return rows, nil
}

func d1Backend(ctx context.Context, cfg config, dsn string) (creates, gets float64, err error) {
	db, err := sqlstore.Open(ctx, dsn, sqlstore.Options{MaxMemoriesPerStore: 1 << 30})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	key := "sk-memfs-bench-key-0123456789abcdef"
	if _, err := server.EnsureAdminKey(ctx, db, key, ""); err != nil {
		return 0, 0, err
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv, err := server.New(server.Options{Backend: db, Log: log})
	if err != nil {
		return 0, 0, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln) //nolint:errcheck
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.concurrency * 2}}
	do := func(method, path string, body any) (map[string]any, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, rd)
		req.Header.Set("x-api-key", key)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, out)
		}
		return out, nil
	}
	content := string(bytes.Repeat([]byte("memfs benchmark line\n"), 100)) // ~2 KiB
	var createRates, getRates []float64
	for rep := 0; rep < cfg.reps; rep++ {
		st, err := do("POST", "/v1/memory_stores", map[string]any{"name": fmt.Sprintf("bench %d", rep)})
		if err != nil {
			return 0, 0, err
		}
		sid := st["id"].(string)
		if cfg.prefill > 0 {
			if err := prefill(ctx, db.Dialect(), dsn, sid, cfg.prefill); err != nil {
				return 0, 0, fmt.Errorf("prefill: %w", err)
			}
		}
		ids := make([]string, cfg.n)
		var next atomic.Int64
		var firstErr atomic.Value
		run := func(op func(i int) error) float64 {
			next.Store(0)
			var wg sync.WaitGroup
			start := time.Now()
			for w := 0; w < cfg.concurrency; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= cfg.n {
							return
						}
						if err := op(i); err != nil {
							firstErr.CompareAndSwap(nil, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			return float64(cfg.n) / time.Since(start).Seconds()
		}
		createRates = append(createRates, run(func(i int) error {
			m, err := do("POST", "/v1/memory_stores/"+sid+"/memories", map[string]any{"path": fmt.Sprintf("/notes/n%05d.md", i), "content": content})
			if err == nil {
				ids[i] = m["id"].(string)
			}
			return err
		}))
		getRates = append(getRates, run(func(i int) error {
			_, err := do("GET", "/v1/memory_stores/"+sid+"/memories/"+url.PathEscape(ids[i]), nil)
			return err
		}))
		if e := firstErr.Load(); e != nil {
			return 0, 0, e.(error)
		}
	}
	return median(createRates), median(getRates), nil
}

// scratchPostgres creates a fresh database next to the one at base and
// returns its URL and a function that drops it.
func scratchPostgres(ctx context.Context, base string) (string, func(), error) {
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck
	name := "memfs_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		admin.Close()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		admin.ExecContext(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)") //nolint:errcheck
		admin.Close()
	}, nil
}

func prefilled(cfg config) string {
	if cfg.prefill == 0 {
		return ""
	}
	return fmt.Sprintf(", store holding %d", cfg.prefill)
}

// prefill writes n memories into store sid in one statement, beside the
// service (a create through it would take minutes where creates slow down
// with the store's size, which is what the measure is for). Only the rows
// a create's checks read are written: memories and the store's count.
func prefill(ctx context.Context, dialect, dsn, sid string, n int) error {
	driver, stmts := "sqlite", []string{
		fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
			INSERT INTO memories (id, store_id, path, content, sha, size, version_id, created_at, updated_at)
			SELECT '%s_pre_' || i, '%s', printf('/pre/d%%03d/p%%06d.md', i %% 100, i), 'x', '', 1, 'ver_pre', 0, 0 FROM c`, n, sid, sid),
	}
	if dialect == "postgres" {
		driver, stmts = "pgx", []string{
			fmt.Sprintf(`INSERT INTO memories (id, store_id, path, content, sha, size, version_id, created_at, updated_at)
				SELECT '%s_pre_' || i, '%s', '/pre/d' || lpad((i %% 100)::text, 3, '0') || '/p' || lpad(i::text, 6, '0') || '.md', 'x'::bytea, '', 1, 'ver_pre', 0, 0
				FROM generate_series(1, %d) i`, sid, sid, n),
		}
	} else {
		dsn = "file:" + dsn + "?_pragma=busy_timeout(10000)"
	}
	stmts = append(stmts, fmt.Sprintf(`UPDATE memory_stores SET memory_count = memory_count + %d WHERE id = '%s'`, n, sid))
	if dialect == "postgres" {
		stmts = append(stmts, `ANALYZE memories`) // as autovacuum would after so many rows
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
