package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
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
		// Both backends share the goal (D1, docs/operating.md, "Tests and
		// benchmarks"): ≥ 1,000 creates/s.
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
	api, err := startAPIServer(ctx, dsn, cfg.concurrency)
	if err != nil {
		return 0, 0, err
	}
	defer api.close()
	content := string(bytes.Repeat([]byte("memfs benchmark line\n"), 100)) // ~2 KiB
	var createRates, getRates []float64
	for rep := 0; rep < cfg.reps; rep++ {
		sid, err := api.createStore(ctx, fmt.Sprintf("bench %d", rep))
		if err != nil {
			return 0, 0, err
		}
		if cfg.prefill > 0 {
			if err := prefill(ctx, api.db.Dialect(), dsn, sid, cfg.prefill); err != nil {
				return 0, 0, fmt.Errorf("prefill: %w", err)
			}
		}
		ids := make([]string, cfg.n)
		c, err := inParallel(cfg.concurrency, cfg.n, func(i int) error {
			m, err := api.do(ctx, "POST", "/v1/memory_stores/"+sid+"/memories", map[string]any{"path": fmt.Sprintf("/notes/n%05d.md", i), "content": content})
			if err == nil {
				ids[i] = m["id"].(string)
			}
			return err
		})
		if err != nil {
			return 0, 0, err
		}
		g, err := inParallel(cfg.concurrency, cfg.n, func(i int) error {
			_, err := api.do(ctx, "GET", "/v1/memory_stores/"+sid+"/memories/"+url.PathEscape(ids[i]), nil)
			return err
		})
		if err != nil {
			return 0, 0, err
		}
		createRates, getRates = append(createRates, c), append(getRates, g)
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
	rand.Read(b[:])
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
		admin.ExecContext(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
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
