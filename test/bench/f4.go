package main

import (
	"context"
	"fmt"
)

func init() {
	measures = append(measures, measure{id: "F4", run: runF("F4", benchF4)})
}

// benchF4: parallel writers (8), each creating files (1,000) of 2 KiB in
// its own directory, into a fresh target every repetition. Goal ≥ 1.0×
// loopback.
func benchF4(ctx context.Context, cfg config) ([]row, error) {
	ops := map[string]string{}
	r, err := sideBySide(cfg.reps, func(rep int, name string) (float64, error) {
		return writeRun(name, fopts.writers, fopts.perWriter, rep == 0, ops)
	})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%d parallel writers × %s files (create + write 2 KiB + close)", fopts.writers, thousands(float64(fopts.perWriter)))
	return append(fRows("F4", what, "files/s", r, fLoopback, 1.0), opRows("F4", what, ops)...), nil
}
