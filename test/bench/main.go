// Command bench measures memfs against its references (docs/operating.md,
// "Tests and benchmarks") and
// prints a markdown table of each measure, its reference, the ratio and
// the goal. Every figure is the median of several repetitions, measured
// side by side in one run.
//
//	go run ./test/bench                 # every measure
//	go run ./test/bench -only D1        # one measure
//	go run ./test/bench -only D1 -prefill 30000   # creates into a store of 30,000
//	go run ./test/bench -only X1 -x1sizes 1000,10000 -x1mounts=false   # the store service at scale
//
// PostgreSQL measures use MEMFS_BENCH_POSTGRES_URL (or
// MEMFS_TEST_POSTGRES_URL): a database the benchmark may create scratch
// databases in. Without it they are reported as skipped.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// row is one line of the report.
type row struct {
	measure, what, value, reference, ratio, goal string
}

// measure runs one benchmark and returns its rows.
type measure struct {
	id  string
	run func(ctx context.Context, cfg config) ([]row, error)
}

type config struct {
	reps        int
	concurrency int
	n           int
	pgURL       string
	// prefill is how many memories D1 writes into each store (straight
	// into the database) before it measures: creates/s at that size.
	prefill int
}

var measures []measure

func main() {
	if os.Getenv(m1ChildEnv) != "" {
		os.Exit(m1ChildMain()) // the mount of M1's one-mount row, in a process of its own
	}
	only := flag.String("only", "", "comma-separated measure ids to run (default: all)")
	var cfg config
	flag.IntVar(&cfg.reps, "reps", 5, "repetitions per measure (the median is reported)")
	flag.IntVar(&cfg.concurrency, "concurrency", 16, "concurrent clients for the store service measures")
	flag.IntVar(&cfg.n, "n", 2000, "operations per repetition")
	flag.IntVar(&cfg.prefill, "prefill", 0, "D1: memories already in the store when the creates start")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (server, mounts and clients: all in this process) to `FILE`")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	cfg.pgURL = os.Getenv("MEMFS_BENCH_POSTGRES_URL")
	if cfg.pgURL == "" {
		cfg.pgURL = os.Getenv("MEMFS_TEST_POSTGRES_URL")
	}
	want := map[string]bool{}
	for _, id := range strings.Split(*only, ",") {
		if id != "" {
			want[strings.ToUpper(id)] = true
		}
	}
	ctx := context.Background()
	var rows []row
	failed := false
	for _, m := range measures {
		if len(want) > 0 && !want[m.id] {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: running %s ...\n", m.id)
		start := time.Now()
		r, err := m.run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s failed: %v\n", m.id, err)
			failed = true
			rows = append(rows, row{measure: m.id, what: "failed: " + err.Error()})
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", m.id, time.Since(start).Round(time.Millisecond))
		rows = append(rows, r...)
	}
	fmt.Println("| # | measure | value | reference | ratio | goal |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.measure, r.what, r.value, r.reference, r.ratio, r.goal)
	}
	if failed {
		pprof.StopCPUProfile() // os.Exit runs no deferred call
		os.Exit(1)
	}
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
