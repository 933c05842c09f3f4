package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

func init() {
	measures = append(measures, measure{id: "F2", run: runF("F2", benchF2)})
}

// benchF2: open + read + close of small files, warm: every file is read
// once before the timed passes (each sample is one or more full passes).
// Goal ≥ 0.5× tmpfs.
func benchF2(ctx context.Context, cfg config) ([]row, error) {
	s := seed{dir: "r", n: cfg.n}
	var rows []row
	err := withTargets([]seed{s}, func(ts map[string]*target) error {
		buf := make([]byte, 2*fileBytes)
		pass := func(t *target) error {
			for i := 0; i < s.n; i++ {
				n, err := readFile(filepath.Join(t.dir, s.dir, s.name(i)), buf)
				if err != nil {
					return err
				}
				if n != fileBytes {
					return fmt.Errorf("%s: read %d bytes, want %d", s.name(i), n, fileBytes)
				}
			}
			return nil
		}
		r, ops, err := warmPasses(cfg.reps, ts, s.n, pass)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("read %s files of 2 KiB, warm (open + read + close)", thousands(float64(s.n)))
		rows = append(fRows("F2", what, "files/s", r, fTmpfs, 0.5), opRows("F2", what, ops)...)
		return nil
	})
	return rows, err
}

// withTargets sets up every target holding seeds, runs fn, and tears them
// down (also on failure).
func withTargets(seeds []seed, fn func(map[string]*target) error) (err error) {
	ts := map[string]*target{}
	defer func() {
		for _, t := range ts {
			if cerr := t.close(); cerr != nil && err == nil {
				err = fmt.Errorf("%s: tear down: %w", t.name, cerr)
			}
		}
	}()
	for _, name := range fTargets {
		t, err := newTarget(name, seeds...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ts[name] = t
	}
	return fn(ts)
}

// minSample is the shortest timed sample: a pass that takes a few
// milliseconds (2,000 warm stats) is repeated until the sample lasts this
// long, so one scheduler hiccup on a shared machine can't decide it.
const minSample = 100 * time.Millisecond

// warmPasses runs pass once on every target untimed (warming the caches),
// then reps timed rounds side by side; a round's sample repeats pass until
// it lasts minSample. units is the work of one pass (files, entries).
func warmPasses(reps int, ts map[string]*target, units int, pass func(*target) error) (rates, map[string]string, error) {
	for _, name := range fTargets {
		if err := pass(ts[name]); err != nil {
			return nil, nil, fmt.Errorf("%s: warm-up: %w", name, err)
		}
	}
	ops := map[string]string{}
	r, err := sideBySide(reps, func(rep int, name string) (float64, error) {
		t := ts[name]
		before := t.ops.snapshot()
		passes := 0
		start := time.Now()
		for passes == 0 || time.Since(start) < minSample {
			if stopping.Load() {
				return 0, errInterrupted
			}
			if err := pass(t); err != nil {
				return 0, err
			}
			passes++
		}
		elapsed := time.Since(start)
		if rep == 0 && t.ops != nil {
			ops[name] = opsPer(before, t.ops.snapshot(), passes*units)
		}
		return float64(passes*units) / elapsed.Seconds(), nil
	})
	return r, ops, err
}
