package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

func init() {
	measures = append(measures, measure{id: "S2", run: runS("S2", benchS2)})
}

// benchS2: requests reaching the store service per idle interval, with a
// 2,000-memory store mounted. memfs: one mount, untouched, with its
// default quiet period (idle, it starts no pass). Official: one
// session after its Download, the agent busy with a tool call every second
// (SyncIfDue after each), nothing edited. Both hold the same store at the
// same interval (15 s by default, both defaults) at the same time; the
// server counts each one's requests over the same window of several
// intervals, which starts once both are set up. Goal ≤ 0.1× the official
// worker's.
func benchS2(ctx context.Context, cfg config, env *sEnv) (_ []row, retErr error) {
	interval, k := sopts.s2Interval, sopts.s2Intervals
	if k < 1 {
		return nil, errors.New("-s2intervals must be at least 1")
	}
	var undo cleanups
	defer func() {
		if cerr := undo.run(); cerr != nil && retErr == nil {
			retErr = cerr
		}
	}()
	layout := sLayout{sopts.memories, sopts.dirs}
	storeID, err := env.seedStore(ctx, "s2", layout)
	if err != nil {
		return nil, err
	}
	const memLabel, offLabel = "memfs-bench-s2", "official-s2"
	m, err := env.mountMemfsQuiet(ctx, storeID, memLabel, interval, sopts.quiet, nil)
	if err != nil {
		return nil, err
	}
	undo.add(m.close)
	o, err := env.newOfficial(offLabel, interval)
	if err != nil {
		return nil, err
	}
	undo.add(o.close)
	if err := o.download(ctx, storeID); err != nil {
		return nil, err
	}
	lctx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	l := newToolLoop(o, sopts.s2Tick, func() int { return env.counter.total(offLabel) })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.run(lctx) }()
	undo.add(func() error { stopLoop(); wg.Wait(); return nil })

	memBefore, offBefore := env.counter.snapshot(memLabel), env.counter.snapshot(offLabel)
	window := time.Duration(k) * interval
	if err := sleepOrStop(ctx, window); err != nil {
		return nil, err
	}
	memD, memN := diffCounts(memBefore, env.counter.snapshot(memLabel))
	offD, offN := diffCounts(offBefore, env.counter.snapshot(offLabel))
	stopLoop()
	wg.Wait()
	if offN == 0 {
		return nil, errors.New("the official session sent no request in the window: its sync never ran")
	}

	per := func(n int) float64 { return float64(n) / float64(k) }
	ratio := per(memN) / per(offN)
	what := fmt.Sprintf("store requests per idle interval, %s mounted, %s interval both (memfs quiet %s), counted over %d intervals (%s)", layout, interval, quietText(sopts.quiet), k, window)
	return []row{
		{"S2", what, fmt.Sprintf("memfs %.2f (%d in the window)", per(memN), memN),
			fmt.Sprintf("official %.2f (%d in the window, %d syncs)", per(offN), offN, offD[firstPageKind]),
			ratioUp(ratio), goalAtMost(ratio, 0.1, "official")},
		{"S2", "— requests in the window, by kind", "memfs: " + countsText(memD), "official: " + countsText(offD), "—", "—"},
	}, nil
}

// firstPageKind is the first page of a basic listing: one per official sync.
const firstPageKind = "GET /v1/memory_stores/{store}/memories?view=basic&limit=100 (first page)"
