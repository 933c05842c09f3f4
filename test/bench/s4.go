package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memfs/memfs/syncqueue"
)

func init() {
	measures = append(measures, measure{id: "S4", run: runS("S4", benchS4)})
	measures = append(measures, measure{id: "M1", run: runS("M1", benchM1)})
}

// benchS4: the final sync at session end with 500 pending edits. A store
// of sopts.memories memories is mounted with a 1-hour interval (so nothing
// is uploaded before the end), 500 of its files are rewritten on the mount
// (closed: journaled), then the mount is closed cleanly and the final sync
// timed. The goal is the 30 s bound with every edit in the store, which is
// checked by reading the store back.
func benchS4(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
	layout := sLayout{sopts.memories, sopts.dirs}
	const edits = 500
	var took []float64
	for rep := 0; rep < max(1, cfg.reps/2); rep++ {
		storeID, err := env.seedStore(ctx, fmt.Sprintf("s4 %d", rep), layout)
		if err != nil {
			return nil, err
		}
		m, err := env.mountMemfs(ctx, storeID, "memfs-bench-s4", time.Hour, nil)
		if err != nil {
			return nil, err
		}
		want := map[string]string{}
		for i := 0; i < edits; i++ {
			p := layout.path(i * (layout.n / edits))
			content := fmt.Sprintf("edit %d of the final-sync benchmark\n%s", i, strings.Repeat("x", 2000))
			if err := os.WriteFile(filepath.Join(m.dir, p), []byte(content), 0o644); err != nil {
				m.close()
				return nil, err
			}
			want[p] = content
		}
		start := time.Now()
		res := m.m.Engine().Finish(ctx, true)
		d := time.Since(start)
		if err := m.close(); err != nil {
			return nil, err
		}
		if res.Uploaded != edits || res.Left != 0 {
			return nil, fmt.Errorf("final sync uploaded %d of %d, %d left", res.Uploaded, edits, res.Left)
		}
		if d > syncqueue.FinalSyncTimeout {
			return nil, fmt.Errorf("final sync took %s, over the %s bound", d, syncqueue.FinalSyncTimeout)
		}
		for p, content := range want {
			got, err := env.admin.MemoryByPath(ctx, storeID, p)
			if err != nil {
				return nil, fmt.Errorf("read back %s: %w", p, err)
			}
			mem, err := env.admin.GetMemory(ctx, storeID, got.ID)
			if err != nil || mem.Content == nil || *mem.Content != content {
				return nil, fmt.Errorf("the store does not hold the edit of %s", p)
			}
		}
		took = append(took, d.Seconds())
	}
	med := median(took)
	return []row{{"S4", fmt.Sprintf("final sync of %d pending edits (store of %d), every edit read back", edits, layout.n),
		secs(med), "30 s bound", fmt.Sprintf("%.3f× bound", med/syncqueue.FinalSyncTimeout.Seconds()), "within the bound: met"}}, nil
}

// benchM1: the resident memory of a worker process with 8 stores of
// sopts.memories memories mounted, idle, and its CPU over the idle window.
// The mounts run in a child process of their own (m1ChildMain), as a
// worker would, so the figure is theirs alone: the server and the seeding
// stay in this process.
func benchM1(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
	layout := sLayout{sopts.memories, sopts.dirs}
	var ids []string
	for i := 0; i < 8; i++ {
		storeID, err := env.seedStore(ctx, fmt.Sprintf("m1 %d", i), layout)
		if err != nil {
			return nil, err
		}
		ids = append(ids, storeID)
	}
	idle := 30 * time.Second
	rss, _, cpu, err := m1Measure(ctx, env, ids, idle)
	if err != nil {
		return nil, err
	}
	return []row{
		{"M1", fmt.Sprintf("resident memory of a worker (its own process) with 8 stores × %d memories mounted, idle", layout.n), fmt.Sprintf("%.0f MiB", rss), "100 MiB", fmt.Sprintf("%.2f× goal", rss/100), "≤ 100 MiB"},
		{"M1", fmt.Sprintf("its CPU over %s idle", idle), fmt.Sprintf("%.2f%%", 100*cpu.Seconds()/idle.Seconds()), "—", "—", "≈ 0"},
	}, nil
}
