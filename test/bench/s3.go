package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/memfs/memfs/worker"
)

var s3large int

func init() {
	measures = append(measures, measure{id: "S3", run: runS("S3", func(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
		return benchReady(ctx, cfg, env, "S3", worker.ModeFUSE, 0.2)
	})})
	flag.IntVar(&s3large, "s3large", 10000, "S3: memories in the larger store of the second row (0: no such row)")
}

// benchReady is S3 (FUSE mode) and DM1 (directory mode; sdir.go): id,
// mode and the goal's ratio tell them apart.
//
// S3: time to mount a 2,000-memory store until `ls -l` of its root
// returns. memfs: worker.MountStore (fresh state directory and mount
// point; the client is made before the clock starts) then `ls -l`.
// Official: SessionMemoryStores.Download into a fresh folder under /tmp,
// then `ls -l` of the folder. Each repetition runs both, in an order that
// alternates; the median is reported. The store is read-only here: each
// mount is closed (memfs: Close, clean; official: Cleanup(true)) before
// the next. The main rows use the store shape of S1 and S2 at
// -smemories (2,000) and -s3large (10,000) memories; a context row uses a
// store with every memory in one directory. Goal ≤ 0.2× the official
// worker's Download: memfs mounts from the listing and fetches
// the content behind it, so `ls -l` waits for the listing only. DM1 is
// the same in directory mode, where MountStore returns only once every
// file is written into the folder (so the clock covers every memory's
// content, as the official Download's does); its goal is ≤ 0.5×.
func benchReady(ctx context.Context, cfg config, env *sEnv, id, mode string, goalRatio float64) ([]row, error) {
	layouts := []sLayout{{sopts.memories, sopts.dirs}}
	if s3large > 0 {
		layouts = append(layouts, sLayout{s3large, sopts.dirs})
	}
	firstContextRow := len(layouts)
	if sopts.dirs > 1 {
		layouts = append(layouts, sLayout{sopts.memories, 1})
	}
	var rows []row
	for li, layout := range layouts {
		storeID, err := env.seedStore(ctx, fmt.Sprintf("%s %d", strings.ToLower(id), li), layout)
		if err != nil {
			return nil, err
		}
		memLabel, offLabel := "memfs-bench-"+strings.ToLower(id), "official-"+strings.ToLower(id)
		var memT, offT, memMount []float64
		var memReq, offReq map[string]int
		runMemfs := func() error {
			before := env.counter.snapshot(memLabel)
			var took time.Duration
			start := time.Now()
			m, err := env.mountMemfsMode(ctx, storeID, memLabel, mode, 0, 0, 0, &took)
			if err != nil {
				return err
			}
			lerr := lsL(m.dir)
			total := time.Since(start)
			if err := errors.Join(lerr, m.close()); err != nil {
				return err
			}
			memT, memMount = append(memT, total.Seconds()), append(memMount, took.Seconds())
			memReq, _ = diffCounts(before, env.counter.snapshot(memLabel))
			return nil
		}
		runOfficial := func() error {
			before := env.counter.snapshot(offLabel)
			o, err := env.newOfficial(offLabel, 0)
			if err != nil {
				return err
			}
			start := time.Now()
			derr := o.download(ctx, storeID)
			if derr == nil {
				derr = lsL(o.dir)
			}
			total := time.Since(start)
			after := env.counter.snapshot(offLabel) // before Cleanup's own requests
			if err := errors.Join(derr, o.close()); err != nil {
				return err
			}
			offT = append(offT, total.Seconds())
			offReq, _ = diffCounts(before, after)
			return nil
		}
		for rep := 0; rep < cfg.reps; rep++ {
			order := []func() error{runMemfs, runOfficial}
			if rep%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, fn := range order {
				if stopping.Load() {
					return nil, errInterrupted
				}
				if err := fn(); err != nil {
					return nil, err
				}
			}
		}
		mm, om := median(memT), median(offT)
		what := fmt.Sprintf("mount until `ls -l` of the root returns, %s", layout)
		if mode == worker.ModeDirectory {
			what = fmt.Sprintf("directory mode: MountStore (every file written) until `ls -l` of the root returns, %s", layout)
		}
		goal := goalAtMost(mm/om, goalRatio, "official")
		if li >= firstContextRow {
			what += " — context"
			goal = "—"
		}
		rows = append(rows,
			row{id, what, "memfs " + secRange(memT), "official Download " + secRange(offT), ratioUp(mm / om), goal},
			row{id, what + " — requests per mount; memfs MountStore alone " + secs(median(memMount)), "memfs: " + countsText(memReq), "official: " + countsText(offReq), "—", "—"},
		)
	}
	return rows, nil
}

// lsL runs `ls -l dir`, output discarded.
func lsL(dir string) error {
	cmd := exec.Command("ls", "-l", dir)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ls -l %s: %w", dir, err)
	}
	return nil
}

// secRange is "median s (min–max)".
func secRange(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%s (%.3f–%.3f)", secs(median(s)), s[0], s[len(s)-1])
}
