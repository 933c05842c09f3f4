package main

// The history measures (package history; memfs mount --at, memfs log),
// on the S measures' in-process server (sserver.go).
//
//   - H1: a mount of a store as it was (memfs mount --at: history.AsOf,
//     built from the versions listing) until `ls -l` of the root answers,
//     against a normal mount of the same store (S3's memfs side), a store
//     of -h1memories (10,000) memories holding -h1versions (5) versions
//     each (50,000: the creates, then rounds of an edit of each), at two
//     moments: after the last version (nothing changed since: the store
//     now is the store then), and after the middle round (every memory
//     changed since: the versions up to then are read). Goal ≤ 2×.
//   - H2: `memfs log` of one memory with -h2versions (1,000) versions: the
//     listing of its versions, newest first (history.Log, as the command
//     does), median of the repetitions. Goal < 1 s.
//
// The stores are seeded straight into the server's database (its Backend,
// in-process), 16 writers at a time: 50,000 versions over HTTP would take
// most of a minute and measure nothing of the history.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/memfs/memfs/history"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

var hopts struct {
	memories, versions, logVersions int
}

func init() {
	measures = append(measures,
		measure{id: "H1", run: runS("H1", benchH1)},
		measure{id: "H2", run: runS("H2", benchH2)},
	)
	flag.IntVar(&hopts.memories, "h1memories", 10000, "H1: memories in the store mounted as it was")
	flag.IntVar(&hopts.versions, "h1versions", 5, "H1: versions of each memory (the creation and edits)")
	flag.IntVar(&hopts.logVersions, "h2versions", 1000, "H2: versions of the memory whose log is listed")
}

// seedVersions writes layout's memories, then edits every one of them in
// rounds until each has versions versions, 16 writers at a time, into the
// database directly. cuts[r] is a moment just after round r (0: the
// creates) ended.
func (e *sEnv) seedVersions(ctx context.Context, name string, l sLayout, versions int) (string, []time.Time, error) {
	st, err := e.admin.CreateStore(ctx, store.CreateStoreInput{Name: name})
	if err != nil {
		return "", nil, err
	}
	actor := store.APIActor("bench")
	ids := make([]string, l.n)
	var cuts []time.Time
	for round := 0; round < versions; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		idx := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range idx {
					p := l.path(i)
					var err error
					if round == 0 {
						var m *store.Memory
						if m, err = e.db.CreateMemory(ctx, st.ID, store.CreateMemoryInput{Path: p, Content: sContent(p), Actor: actor}); err == nil {
							ids[i] = m.ID
						}
					} else {
						c := fmt.Sprintf("%s\nedit %d\n", sContent(p), round)
						_, err = e.db.UpdateMemory(ctx, st.ID, ids[i], store.UpdateMemoryInput{Content: &c, Actor: actor})
					}
					if err != nil {
						mu.Lock()
						first = errors.Join(first, fmt.Errorf("seed %s: %w", p, err))
						mu.Unlock()
					}
				}
			}()
		}
		for i := 0; i < l.n; i++ {
			idx <- i
		}
		close(idx)
		wg.Wait()
		if first != nil {
			return "", nil, first
		}
		time.Sleep(2 * time.Millisecond)
		cuts = append(cuts, time.Now())
		time.Sleep(2 * time.Millisecond)
	}
	return st.ID, cuts, nil
}

func benchH1(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
	layout := sLayout{hopts.memories, sopts.dirs}
	storeID, cuts, err := env.seedVersions(ctx, "h1", layout, hopts.versions)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, c := range []struct {
		at    time.Time
		what  string
		count int // memories in the store then
	}{
		{cuts[len(cuts)-1], "at a moment after the last version", layout.n},
		{cuts[len(cuts)/2], fmt.Sprintf("at a moment after edit round %d of %d (every memory changed since)", len(cuts)/2, len(cuts)-1), layout.n},
	} {
		r, err := benchAt(ctx, cfg, env, storeID, layout, c.at, c.count)
		if err != nil {
			return nil, err
		}
		r.what = fmt.Sprintf("memfs mount --at %s (%s) until `ls -l` of the root returns, %s × %d versions", c.what, r.what, layout, hopts.versions)
		rows = append(rows, r)
	}
	return rows, nil
}

// benchAt is one H1 row: --at at against a normal mount, cfg.reps each in
// alternating order.
func benchAt(ctx context.Context, cfg config, env *sEnv, storeID string, layout sLayout, at time.Time, want int) (row, error) {
	var nowT, atT []float64
	var versionsRead int
	mountOnce := func(past bool) error {
		var wrap func(*client.Client) (syncqueue.Store, error)
		var asOf *history.AsOf
		if past {
			wrap = func(cl *client.Client) (syncqueue.Store, error) {
				var err error
				asOf, err = history.NewAsOf(ctx, cl, storeID, at)
				return asOf, err
			}
		}
		start := time.Now()
		m, err := env.mountMemfsWith(ctx, storeID, "memfs-bench-h1", worker.ModeFUSE, 0, 0, 0, nil, wrap)
		if err != nil {
			return err
		}
		if asOf != nil {
			err = asOf.Verify(ctx) // as memfs mount --at does, before it says it is mounted
		}
		lerr := lsL(m.dir)
		took := time.Since(start).Seconds()
		if err := errors.Join(err, lerr, m.close()); err != nil {
			return err
		}
		if asOf != nil {
			if n := len(asOf.Snapshot().Entries); n != want {
				return fmt.Errorf("the store as it was holds %d memories, want %d", n, want)
			}
			versionsRead = asOf.Snapshot().Versions
		}
		if past {
			atT = append(atT, took)
		} else {
			nowT = append(nowT, took)
		}
		return nil
	}
	for rep := 0; rep < cfg.reps; rep++ {
		order := []bool{false, true}
		if rep%2 == 1 {
			order = []bool{true, false}
		}
		for _, past := range order {
			if stopping.Load() {
				return row{}, errInterrupted
			}
			if err := mountOnce(past); err != nil {
				return row{}, err
			}
		}
	}
	ratio := median(atT) / median(nowT)
	return row{"H1", fmt.Sprintf("history.AsOf: %s versions read", thousands(float64(versionsRead))),
		"--at " + secRange(atT), "normal mount " + secRange(nowT), ratioUp(ratio), goalAtMost(ratio, 2, "a normal mount")}, nil
}

func benchH2(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
	storeID, _, err := env.seedVersions(ctx, "h2", sLayout{1, 1}, hopts.logVersions)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(client.Options{BaseURL: env.base, APIKey: env.key, UserAgent: "memfs-bench-h2"})
	if err != nil {
		return nil, err
	}
	m, err := cl.MemoryByPath(ctx, storeID, sLayout{1, 1}.path(0))
	if err != nil {
		return nil, err
	}
	var ts []float64
	for rep := 0; rep < cfg.reps; rep++ {
		start := time.Now()
		vs, err := history.Log(ctx, cl, storeID, m.ID)
		if err != nil {
			return nil, err
		}
		ts = append(ts, time.Since(start).Seconds())
		if len(vs) != hopts.logVersions {
			return nil, fmt.Errorf("the log lists %d versions, want %d", len(vs), hopts.logVersions)
		}
	}
	med := median(ts)
	verdict := "**missed**"
	if med < 1 {
		verdict = "met"
	}
	return []row{{"H2", fmt.Sprintf("memfs log of a memory with %s versions (history.Log: its versions listing, %d a page)", thousands(float64(hopts.logVersions)), store.MaxListLimit),
		secRange(ts), "1 s bound", fmt.Sprintf("%.2f× bound", med), "< 1 s: " + verdict}}, nil
}
