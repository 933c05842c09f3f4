package main

// Running the F measures side by side and reporting them.

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
)

// rates collects one measure's per-target rates over the repetitions.
type rates map[string][]float64

// sideBySide runs reps rounds; each round runs fn once per target, in an
// order rotated every round so no target always runs first or last on a
// noisy machine.
func sideBySide(reps int, fn func(rep int, target string) (float64, error)) (rates, error) {
	r := rates{}
	for rep := 0; rep < reps; rep++ {
		for i := range fTargets {
			if stopping.Load() {
				return nil, errInterrupted
			}
			name := fTargets[(i+rep)%len(fTargets)]
			v, err := fn(rep, name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			r[name] = append(r[name], v)
		}
	}
	return r, nil
}

// fRows reports memfs against ref (with the goal) and against every other
// target as context.
func fRows(id, what, unit string, r rates, ref string, goal float64) []row {
	mem := median(r[fMemfs])
	value := func(name string) string {
		xs := append([]float64(nil), r[name]...)
		sort.Float64s(xs)
		return fmt.Sprintf("%s %s %s (%s–%s)", name, thousands(median(xs)), unit, thousands(xs[0]), thousands(xs[len(xs)-1]))
	}
	ratio := mem / median(r[ref])
	verdict := "**missed**"
	if ratio >= goal {
		verdict = "met"
	}
	rows := []row{{id, what, value(fMemfs), value(ref), ratioText(ratio),
		fmt.Sprintf("≥ %.1f× %s: %s", goal, ref, verdict)}}
	for _, name := range fTargets {
		if name == fMemfs || name == ref {
			continue
		}
		rows = append(rows, row{id, what + " — context", value(fMemfs), value(name),
			ratioText(mem / median(r[name])), "—"})
	}
	return rows
}

// ratioText prints a ratio truncated (not rounded) to two decimals, so
// that 0.996 shows as 0.99× next to "missed", never as 1.00×.
func ratioText(x float64) string { return fmt.Sprintf("%.2f×", math.Floor(x*100)/100) }

// thousands formats x rounded, with thousands separators.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// opRows formats -fopcounts figures: FUSE requests per unit of work.
func opRows(id, what string, counts map[string]string) []row {
	var rows []row
	for _, name := range fTargets {
		if c, ok := counts[name]; ok {
			rows = append(rows, row{id, what + " — FUSE requests per file (debug run)", name, c, "—", "—"})
		}
	}
	return rows
}

// opCounter counts go-fuse debug lines "rx <unique>: <OPCODE> ...".
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
	buf []byte
}

var _ io.Writer = (*opCounter)(nil)

func newOpCounter() *opCounter { return &opCounter{ops: map[string]int{}} }

func (c *opCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			break
		}
		line := string(c.buf[:i])
		c.buf = c.buf[i+1:]
		if !strings.HasPrefix(line, "rx ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 3 {
			c.ops[f[2]]++
		}
	}
	return len(p), nil
}

func (c *opCounter) snapshot() map[string]int {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.ops))
	for k, v := range c.ops {
		out[k] = v
	}
	return out
}

// opsPer formats the requests between two snapshots per unit of work.
func opsPer(before, after map[string]int, units int) string {
	var names []string
	for k := range after {
		if after[k]-before[k] > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(after[k]-before[k])/float64(units)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
