package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func init() {
	measures = append(measures, measure{id: "F3", run: runF("F3", benchF3)})
}

// benchF3: lstat of small files, warm; and ls -l of a large directory,
// warm, as os.ReadDir + lstat of every entry (what ls -l asks the file
// system, without exec and formatting noise), plus the real `ls -l` as
// context. Goal ≥ 1.0× loopback.
func benchF3(ctx context.Context, cfg config) ([]row, error) {
	var rows []row
	s := seed{dir: "s", n: cfg.n}
	err := withTargets([]seed{s}, func(ts map[string]*target) error {
		var st unix.Stat_t
		pass := func(t *target) error {
			for i := 0; i < s.n; i++ {
				if err := unix.Lstat(filepath.Join(t.dir, s.dir, s.name(i)), &st); err != nil {
					return err
				}
				if st.Size != fileBytes {
					return fmt.Errorf("%s: size %d", s.name(i), st.Size)
				}
			}
			return nil
		}
		r, ops, err := warmPasses(cfg.reps, ts, s.n, pass)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("lstat %s files, warm", thousands(float64(s.n)))
		rows = append(rows, fRows("F3", what, "stats/s", r, fLoopback, 1.0)...)
		rows = append(rows, opRows("F3", what, ops)...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}

	d := seed{dir: "ls", n: fopts.dirEntries}
	err = withTargets([]seed{d}, func(ts map[string]*target) error {
		var st unix.Stat_t
		readdirStat := func(t *target) error {
			dir := filepath.Join(t.dir, d.dir)
			ents, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := unix.Lstat(filepath.Join(dir, e.Name()), &st); err != nil {
					return err
				}
			}
			if len(ents) != d.n {
				return fmt.Errorf("%d entries, want %d", len(ents), d.n)
			}
			return nil
		}
		r, ops, err := warmPasses(cfg.reps, ts, d.n, readdirStat)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("ls -l of a %s-entry directory, warm (ReadDir + lstat each)", thousands(float64(d.n)))
		rows = append(rows, fRows("F3", what, "entries/s", r, fLoopback, 1.0)...)
		rows = append(rows, opRows("F3", what, ops)...)

		lsL := func(t *target) error {
			cmd := exec.Command("ls", "-l", "--color=never", filepath.Join(t.dir, d.dir))
			cmd.Env = append(os.Environ(), "LC_ALL=C")
			cmd.Stdout = io.Discard
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("ls -l: %v: %.200s", err, stderr.String())
			}
			return nil
		}
		r, ops, err = warmPasses(cfg.reps, ts, d.n, lsL)
		if err != nil {
			return err
		}
		what = fmt.Sprintf("`ls -l` (exec'd) of a %s-entry directory, warm", thousands(float64(d.n)))
		lr := fRows("F3", what, "entries/s", r, fLoopback, 1.0)
		lr[0].goal = "context (goal row is ReadDir + lstat): " + lr[0].goal
		rows = append(rows, lr...)
		rows = append(rows, opRows("F3", what, ops)...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ls -l: %w", err)
	}
	return rows, nil
}
