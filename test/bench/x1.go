package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func init() {
	measures = append(measures, measure{id: "X1", run: benchX1})
	flag.StringVar(&x1opts.sizes, "x1sizes", "1000,10000,100000", "X1: store sizes to measure at, the first the reference")
	flag.IntVar(&x1opts.ops, "x1ops", 1000, "X1: operations of each kind per repetition")
	flag.BoolVar(&x1opts.mounts, "x1mounts", true, "X1: mount the store at each size (needs root and /dev/fuse)")
}

var x1opts struct {
	sizes  string
	ops    int
	mounts bool
}

// X1 is the store service at scale (docs/operating.md, "memfs serve",
// Scale). For each backend
// (SQLite on /tmp; PostgreSQL in scratch databases of
// MEMFS_BENCH_POSTGRES_URL, which make bench runs durable: fsync on) and
// each size of -x1sizes, a database of its own holds one store grown
// through the API to that size, cfg.concurrency clients creating memories
// of about 1 KB in 100 folders. Then:
//
//   - cfg.reps repetitions of -x1ops creates (new paths across the
//     folders), updates of memories picked at random from the whole store,
//     renames of others to new paths, gets of others, and deletes of the
//     memories the repetition created, so the store is back at its size:
//     operations per second, the median of the repetitions. Each
//     repetition runs every size in turn, in an order rotated every
//     repetition, so that a machine busier for a while slows every size
//     alike, not the one measured then;
//   - in each repetition too, a full listing (basic view, 100 a page,
//     following next_page): its seconds (the median) and the median time
//     of all its pages; and the first page of 10 of a folder
//     (path_prefix, depth 1), 40 times (full at every size: a folder
//     holds a hundredth of the store);
//   - with -x1mounts, `memfs mount` of the store in a process of its own:
//     seconds until `ls -l` of the root answers, until every memory's
//     content is fetched (its "memory contents fetched" line), its VmRSS
//     then, and the seconds of `ls -lR` and `grep -r` over the mount.
//
// Every row is also given as a ratio to the first size's row. Goals
// (docs/operating.md, "Tests and benchmarks"): every write at the largest size ≥ 0.8× its rate at the
// first; a listing page ≤ 1.25× its time at the first (constant, within
// noise); a full listing linear: its time per memory ≤ 1.25× the first's;
// a mount of 100,000 memories answers `ls -l` in under 10 s.
func benchX1(ctx context.Context, cfg config) ([]row, error) {
	sizes, err := x1Sizes(x1opts.sizes)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", sTempPfx+"x1-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var bin string
	noMounts := "-x1mounts=false"
	if x1opts.mounts {
		if noMounts = x1CannotMount(); noMounts != "" {
			fmt.Fprintf(os.Stderr, "bench: X1: no mounts: %s\n", noMounts)
		} else if bin, err = q1Binary(dir); err != nil {
			return nil, err
		}
	}
	backends := []x1Database{{"SQLite", func(size int) (string, func(), error) {
		return fmt.Sprintf("%s/x1-%d.db", dir, size), func() {}, nil
	}}}
	if cfg.pgURL != "" {
		backends = append(backends, x1Database{"PostgreSQL", func(int) (string, func(), error) { return scratchPostgres(ctx, cfg.pgURL) }})
	}
	var rows []row
	for _, b := range backends {
		r, err := x1Backend(ctx, cfg, b, sizes, bin, dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		rows = append(rows, r...)
	}
	if cfg.pgURL == "" {
		rows = append(rows, row{"X1", "PostgreSQL", "skipped: set MEMFS_BENCH_POSTGRES_URL", "", "", ""})
	}
	if bin == "" {
		rows = append(rows, row{"X1", "mounts", "skipped: " + noMounts, "", "", ""})
	}
	return rows, nil
}

func x1Sizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return nil, fmt.Errorf("-x1sizes %q: want growing positive sizes, like 1000,10000,100000", s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// x1Database is a backend X1 measures: dsn gives a fresh database for
// the store of one size, and a function that drops it.
type x1Database struct {
	name string
	dsn  func(size int) (string, func(), error)
}

// x1Point is what X1 measured at one store size.
type x1Point struct {
	size int
	// rates are operations per second by kind (x1Kinds), medians.
	rates map[string]float64
	// listSecs is the full listing's seconds; pageMs its pages' median
	// time; folderMs the median of a folder page.
	listSecs, pageMs, folderMs float64
	pages                      int
	mount                      *x1Mount
}

// x1Kinds are the operations timed at each size, in the order they run.
var x1Kinds = []string{"creates", "updates", "renames", "gets", "deletes"}

// x1Store is the store X1 measures at one size, in a database of its own.
type x1Store struct {
	api  *apiServer
	sid  string
	size int
	// ids are the memories seeded (never deleted; renamed and updated in
	// place).
	ids []string
	// paths counts the new paths handed out by renames and creates.
	paths atomic.Int64
}

// x1Content is a seeded memory's content: about 1 KB, one memory in 1,000
// holding "needle" for grep -r (as test/scale seeds it).
func x1Content(i int) string {
	const line = "memfs scale test line, some words to search through.\n"
	c := strings.Repeat(line, 1000/len(line))
	if i%1000 == 0 {
		c += "needle\n"
	}
	return c
}

// x1Backend grows a store of each size in a database of its own, measures
// them side by side, then mounts each, and reports.
func x1Backend(ctx context.Context, cfg config, b x1Database, sizes []int, bin, dir string) ([]row, error) {
	stores := make([]*x1Store, len(sizes))
	for i, size := range sizes {
		dsn, drop, err := b.dsn(size)
		if err != nil {
			return nil, err
		}
		defer drop()
		api, err := startAPIServer(ctx, dsn, cfg.concurrency)
		if err != nil {
			return nil, err
		}
		defer api.close()
		sid, err := api.createStore(ctx, fmt.Sprintf("x1 %d", size))
		if err != nil {
			return nil, err
		}
		stores[i] = &x1Store{api: api, sid: sid, size: size}
		if err := stores[i].grow(ctx, cfg.concurrency); err != nil {
			return nil, fmt.Errorf("grow to %d: %w", size, err)
		}
		fmt.Fprintf(os.Stderr, "bench: X1 %s: store of %d memories\n", b.name, size)
	}
	samples := make([]x1Samples, len(stores))
	for i := range samples {
		samples[i].rates = map[string][]float64{}
	}
	for rep := 0; rep < cfg.reps; rep++ {
		for k := range stores {
			i := (k + rep) % len(stores)
			if err := stores[i].runRep(ctx, cfg, rep, &samples[i]); err != nil {
				return nil, fmt.Errorf("at %d: %w", stores[i].size, err)
			}
		}
	}
	points := make([]x1Point, len(stores))
	for i, st := range stores {
		p, sm := &points[i], samples[i]
		p.size, p.rates = st.size, map[string]float64{}
		for k, rs := range sm.rates {
			p.rates[k] = median(rs)
		}
		p.listSecs, p.pageMs, p.folderMs, p.pages = median(sm.list), median(sm.pages), median(sm.folder), sm.pageCount
		if bin != "" {
			var err error
			if p.mount, err = x1MountOnce(ctx, bin, st.api.base, st.sid, dir); err != nil {
				return nil, fmt.Errorf("mount at %d: %w", st.size, err)
			}
		}
	}
	return x1Rows(b.name, cfg, points), nil
}

// grow creates the store's memories.
func (st *x1Store) grow(ctx context.Context, clients int) error {
	st.ids = make([]string, st.size)
	_, err := inParallel(clients, st.size, func(i int) error {
		m, err := st.api.do(ctx, "POST", "/v1/memory_stores/"+st.sid+"/memories",
			map[string]any{"path": fmt.Sprintf("/f%03d/m%06d.md", i%100, i), "content": x1Content(i)})
		if err == nil {
			st.ids[i] = m["id"].(string)
		}
		return err
	})
	return err
}

// x1Samples collects one store's measurements over the repetitions.
type x1Samples struct {
	rates map[string][]float64 // operations per second, by kind
	// list are full listings' seconds; pages and folder pages' times in
	// ms; pageCount the pages of a full listing.
	list, pages, folder []float64
	pageCount           int
}

// runRep runs one repetition of each kind of operation, then the listings.
func (st *x1Store) runRep(ctx context.Context, cfg config, rep int, sm *x1Samples) error {
	n := x1opts.ops
	mem := "/v1/memory_stores/" + st.sid + "/memories"
	rng := rand.New(rand.NewPCG(uint64(st.size), uint64(rep)))
	pick := rng.Perm(len(st.ids)) // updates, renames and gets each take their own stretch
	at := func(kind, i int) string { return st.ids[pick[(kind*n+i)%len(pick)]] }
	created := make([]string, n)
	ops := map[string]func(i int) error{
		"creates": func(i int) error {
			m, err := st.api.do(ctx, "POST", mem, map[string]any{"path": st.newPath(i), "content": x1Content(i + 1)})
			if err == nil {
				created[i] = m["id"].(string)
			}
			return err
		},
		"updates": func(i int) error {
			_, err := st.api.do(ctx, "POST", mem+"/"+url.PathEscape(at(0, i)),
				map[string]any{"content": fmt.Sprintf("%supdate %d.%d\n", x1Content(i+1), rep, i)})
			return err
		},
		"renames": func(i int) error {
			_, err := st.api.do(ctx, "POST", mem+"/"+url.PathEscape(at(1, i)), map[string]any{"path": st.newPath(i)})
			return err
		},
		"gets": func(i int) error {
			_, err := st.api.do(ctx, "GET", mem+"/"+url.PathEscape(at(2, i)), nil)
			return err
		},
		"deletes": func(i int) error {
			_, err := st.api.do(ctx, "DELETE", mem+"/"+url.PathEscape(created[i]), nil)
			return err
		},
	}
	for _, kind := range x1Kinds {
		if stopping.Load() {
			return errInterrupted
		}
		r, err := inParallel(cfg.concurrency, n, ops[kind])
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		sm.rates[kind] = append(sm.rates[kind], r)
	}
	total, pages, err := st.listAll(ctx)
	if err != nil {
		return err
	}
	sm.list, sm.pages, sm.pageCount = append(sm.list, total), append(sm.pages, pages...), len(pages)
	for i := range 40 {
		start := time.Now()
		if _, err := st.api.do(ctx, "GET", fmt.Sprintf("%s?path_prefix=/f%03d/&depth=1&limit=10", mem, (rep*40+i)%100), nil); err != nil {
			return err
		}
		sm.folder = append(sm.folder, time.Since(start).Seconds()*1000)
	}
	return nil
}

// newPath is a path no memory has had yet, in one of the 100 folders.
func (st *x1Store) newPath(i int) string {
	return fmt.Sprintf("/f%03d/n%07d.md", i%100, st.paths.Add(1))
}

// listAll lists the whole store, 100 memories a page, checks that it saw
// all of them, and returns its seconds and each page's ms.
func (st *x1Store) listAll(ctx context.Context) (total float64, pageMs []float64, err error) {
	var times []float64
	seen, page := 0, ""
	start := time.Now()
	for {
		q := "?limit=100"
		if page != "" {
			q += "&page=" + url.QueryEscape(page)
		}
		t := time.Now()
		out, err := st.api.do(ctx, "GET", "/v1/memory_stores/"+st.sid+"/memories"+q, nil)
		if err != nil {
			return 0, nil, err
		}
		times = append(times, time.Since(t).Seconds()*1000)
		seen += len(out["data"].([]any))
		next, _ := out["next_page"].(string)
		if next == "" {
			break
		}
		page = next
	}
	total = time.Since(start).Seconds()
	if seen != st.size {
		return 0, nil, fmt.Errorf("full listing: %d memories, want %d", seen, st.size)
	}
	return total, times, nil
}

// x1Rows reports each point, with its ratio to the first.
func x1Rows(backend string, cfg config, points []x1Point) []row {
	var rows []row
	ref := points[0]
	last := len(points) - 1
	for pi, p := range points {
		at := fmt.Sprintf("%s, store of %s", backend, thousands(float64(p.size)))
		for _, k := range x1Kinds {
			goal := "reported"
			if k != "gets" && pi == last && pi > 0 {
				goal = x1Goal(p.rates[k]/ref.rates[k] >= 0.8, "≥ 0.8× first size")
			}
			rows = append(rows, row{"X1", fmt.Sprintf("%s: %s/s (%d clients, %d a repetition)", at, k, cfg.concurrency, x1opts.ops),
				thousands(p.rates[k]), thousands(ref.rates[k]), ratioText(p.rates[k] / ref.rates[k]), goal})
		}
		pageGoal, listGoal := "reported", "reported"
		if pi > 0 {
			pageGoal = x1Goal(p.pageMs/ref.pageMs <= 1.25, "≤ 1.25× first size")
			listGoal = x1Goal(p.listSecs/float64(p.size)/(ref.listSecs/float64(ref.size)) <= 1.25, "≤ 1.25× first size, per memory")
		}
		rows = append(rows,
			row{"X1", at + ": a listing page (100, basic), median", fmt.Sprintf("%.2f ms", p.pageMs), fmt.Sprintf("%.2f ms", ref.pageMs), ratioUp(p.pageMs / ref.pageMs), pageGoal},
			row{"X1", at + ": a folder's first page (10, depth 1), median", fmt.Sprintf("%.2f ms", p.folderMs), fmt.Sprintf("%.2f ms", ref.folderMs), ratioUp(p.folderMs / ref.folderMs), "reported"},
			row{"X1", fmt.Sprintf("%s: full listing, %d pages; ratio per memory", at, p.pages), secs(p.listSecs), secs(ref.listSecs), ratioUp(p.listSecs / float64(p.size) / (ref.listSecs / float64(ref.size))), listGoal})
		if m, rm := p.mount, ref.mount; m != nil && rm != nil {
			mountGoal := "reported"
			if p.size >= 100000 {
				mountGoal = x1Goal(m.lsSecs < 10, "< 10 s")
			}
			rows = append(rows,
				row{"X1", at + ": `memfs mount` until `ls -l` of the root answers", secs(m.lsSecs), secs(rm.lsSecs), ratioUp(m.lsSecs / rm.lsSecs), mountGoal},
				row{"X1", at + ": `memfs mount` until all content is fetched; VmRSS then", fmt.Sprintf("%s; %.0f MiB", secs(m.fetchSecs), m.rssMiB), fmt.Sprintf("%s; %.0f MiB", secs(rm.fetchSecs), rm.rssMiB), ratioUp(m.fetchSecs/rm.fetchSecs) + "; " + ratioUp(m.rssMiB/rm.rssMiB), "reported"},
				row{"X1", at + ": `ls -lR`; `grep -r needle` over the mount", fmt.Sprintf("%s; %s", secs(m.lsRSecs), secs(m.grepSecs)), fmt.Sprintf("%s; %s", secs(rm.lsRSecs), secs(rm.grepSecs)), ratioUp(m.lsRSecs/rm.lsRSecs) + "; " + ratioUp(m.grepSecs/rm.grepSecs), "reported"})
		}
	}
	return rows
}

// x1Goal is "goal: met|**missed**".
func x1Goal(met bool, goal string) string {
	if met {
		return goal + ": met"
	}
	return goal + ": **missed**"
}
