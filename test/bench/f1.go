package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

func init() {
	measures = append(measures, measure{id: "F1", run: runF("F1", benchF1)})
}

// benchF1: create + write 2 KiB + close, one thread, into a fresh target
// every repetition. Goal ≥ 1.0× loopback.
func benchF1(ctx context.Context, cfg config) ([]row, error) {
	ops := map[string]string{}
	r, err := sideBySide(cfg.reps, func(rep int, name string) (float64, error) {
		return writeRun(name, 1, cfg.n, rep == 0, ops)
	})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("create + write 2 KiB + close, %s files, 1 thread", thousands(float64(cfg.n)))
	return append(fRows("F1", what, "files/s", r, fLoopback, 1.0), opRows("F1", what, ops)...), nil
}

// writeRun sets up a fresh target and times writers goroutines, each
// creating perWriter files of 2 KiB in its own directory (made before the
// clock starts). It returns files/s. With check, it verifies afterwards
// (untimed) that every file is there with its size.
func writeRun(name string, writers, perWriter int, check bool, ops map[string]string) (_ float64, err error) {
	t, err := newTarget(name)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := t.close(); cerr != nil && err == nil {
			err = fmt.Errorf("tear down: %w", cerr)
		}
	}()
	dirs := make([]string, writers)
	for w := range dirs {
		dirs[w] = filepath.Join(t.dir, fmt.Sprintf("w%d", w))
		if err := os.Mkdir(dirs[w], 0o755); err != nil {
			return 0, err
		}
	}
	before := t.ops.snapshot()
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if stopping.Load() {
					errs[w] = errInterrupted
					return
				}
				if err := writeFile(filepath.Join(dirs[w], fmt.Sprintf("f%05d.md", i)), fContent); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	if t.ops != nil {
		ops[name] = opsPer(before, t.ops.snapshot(), writers*perWriter)
	}
	if check {
		if t.journaled != nil {
			if got := t.journaled(); got != writers*perWriter {
				return 0, fmt.Errorf("%d files pending in the journal, want %d", got, writers*perWriter)
			}
		}
		for _, d := range dirs {
			ents, err := os.ReadDir(d)
			if err != nil {
				return 0, err
			}
			if len(ents) != perWriter {
				return 0, fmt.Errorf("%s holds %d files, want %d", d, len(ents), perWriter)
			}
			fi, err := os.Lstat(filepath.Join(d, ents[len(ents)-1].Name()))
			if err != nil {
				return 0, err
			}
			if fi.Size() != fileBytes {
				return 0, fmt.Errorf("%s: size %d, want %d", fi.Name(), fi.Size(), fileBytes)
			}
		}
	}
	return float64(writers*perWriter) / elapsed.Seconds(), nil
}
