package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memfs/memfs/worker"
)

func init() {
	measures = append(measures, measure{id: "S1", run: runS("S1", func(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
		return benchPropagation(ctx, cfg, env, "S1", worker.ModeFUSE)
	})})
}

// benchPropagation is S1 (FUSE mode) and DM2 (directory mode; sdir.go):
// id and mode tell them apart.
//
// S1: propagation. Two sessions of one store at the same sync
// interval (5 s by default, both systems' minimum); an edit closed in
// session A is timed from its close until session B reads the new content
// (os.ReadFile of B's copy every 2 ms).
//
//   - memfs: two mounts of one store (two state directories, two mount
//     points, two clients).
//   - official: two SessionMemoryStores of one store, each running a
//     simulated tool call every 250 ms followed by SyncIfDue, as its
//     worker does; A's edit is written by one of A's tool calls. Two
//     sessions of a store run on different hosts and start at unrelated
//     times, so the phase of B's sync cycle relative to A's is random:
//     before each edit, B's next tool call lasts interval + U(0,
//     interval+tick) (a long model turn; B syncs when it ends), which
//     gives B a fresh uniform phase relative to A. The edits are shared
//     among -s1pairs pairs of sessions, each on its own store, to bound
//     the run time.
//   - context: one more official pair without those pauses. Its two
//     sessions start within a second of each other with the same cadence,
//     so B's phase relative to A's stays wherever the start left it (B
//     just after A is the official worker's best case, just before its
//     worst): one fixed phase, not a sample of them.
//
// Each edit waits a random U(0, interval+tick) before it is made, so edits
// fall at random phases of A's cycle. Everything runs at the same time,
// each pair on its own store of the same shape. memfs runs with its
// default quiet period (-squiet, 1 s): A uploads about a second after the
// close, not at its next tick. Goal: p99 ≤ 0.3× the official worker's.
// DM2 is the same with memfs's two sessions in directory mode: two
// folders, each rescanned every interval; A's edit is a plain write and
// close in A's folder, found by its inotify watch, and B's folder gets
// the new content by an atomic rename.
func benchPropagation(ctx context.Context, cfg config, env *sEnv, id, mode string) (_ []row, retErr error) {
	interval, tick, edits, pairs := sopts.s1Interval, sopts.s1Tick, sopts.s1Edits, sopts.s1Pairs
	if edits < 1 || pairs < 1 || pairs > edits {
		return nil, errors.New("-s1edits and -s1pairs must be at least 1, with no more pairs than edits")
	}
	var undo cleanups // the sessions (runS closes the server after them)
	defer func() {
		if cerr := undo.run(); cerr != nil && retErr == nil {
			retErr = cerr
		}
	}()
	layout := sLayout{sopts.memories, sopts.dirs}
	lctx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var loops sync.WaitGroup
	var sides []*s1Side

	// memfs: sessions A and B.
	lid := strings.ToLower(id)
	storeID, err := env.seedStore(ctx, lid+" memfs", layout)
	if err != nil {
		return nil, err
	}
	var mounts [2]*memfsMount
	memLabels := [2]string{"memfs-bench-" + lid + "-A", "memfs-bench-" + lid + "-B"}
	for i, label := range memLabels {
		m, err := env.mountMemfsMode(ctx, storeID, label, mode, interval, sopts.quiet, 0, nil)
		if err != nil {
			return nil, err
		}
		undo.add(m.close)
		mounts[i] = m
	}
	mA := mounts[0]
	sides = append(sides, &s1Side{system: "memfs", aLabel: memLabels[0], edits: edits, readDir: mounts[1].dir,
		write: func(rel string, data []byte) (time.Time, error) {
			if err := writeFile(filepath.Join(mA.dir, rel), data); err != nil {
				return time.Time{}, err
			}
			return time.Now(), nil
		}})

	// Official pairs: each session in its tool loop. The loops stop before
	// the sessions' Cleanup.
	officialPair := func(name, system string, n int, independent bool) error {
		storeID, err := env.seedStore(ctx, lid+" "+name, layout)
		if err != nil {
			return err
		}
		var tl [2]*toolLoop
		labels := [2]string{"official-" + lid + "-" + name + "-A", "official-" + lid + "-" + name + "-B"}
		for i, label := range labels {
			o, err := env.newOfficial(label, interval)
			if err != nil {
				return err
			}
			undo.add(o.close)
			if err := o.download(ctx, storeID); err != nil {
				return err
			}
			tl[i] = newToolLoop(o, tick, func() int { return env.counter.total(label) })
		}
		for _, l := range tl {
			loops.Add(1)
			go func() { defer loops.Done(); l.run(lctx) }()
		}
		side := &s1Side{system: system, aLabel: labels[0], edits: n, readDir: tl[1].o.dir, write: tl[0].edit}
		if independent {
			side.beforeEdit = func(ctx context.Context) error {
				return tl[1].pause(ctx, interval+rand.N(interval+tick))
			}
		}
		sides = append(sides, side)
		return nil
	}
	for p := 0; p < pairs; p++ {
		n := edits / pairs
		if p < edits%pairs {
			n++
		}
		if err := officialPair(fmt.Sprintf("p%d", p), "official", n, true); err != nil {
			return nil, err
		}
	}
	if sopts.s1Locked {
		if err := officialPair("locked", "official, fixed phase", edits, false); err != nil {
			return nil, err
		}
	}
	undo.add(func() error { stopLoops(); loops.Wait(); return nil })

	timeout := 3*interval + 20*time.Second
	errs := make([]error, len(sides))
	var wg sync.WaitGroup
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.run(ctx, env.counter, layout, interval+tick, timeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// Gather per system (the official pairs pool their edits).
	lat := map[string][]float64{}
	aWait := map[string][]float64{}
	for _, s := range sides {
		lat[s.system] = append(lat[s.system], s.lat...)
		aWait[s.system] = append(aWait[s.system], s.aWait...)
	}
	mem, off, locked := lat["memfs"], lat["official"], lat["official, fixed phase"]
	what := fmt.Sprintf("propagation A → B, %d edits each, %s sync interval both (memfs quiet %s), %s", edits, interval, quietText(sopts.quiet), layout)
	if mode == worker.ModeDirectory {
		what = fmt.Sprintf("directory mode: propagation A → B, %d edits each, %s sync interval both (memfs quiet %s, rescan every %s), %s", edits, interval, quietText(sopts.quiet), interval, layout)
	}
	p50m, p50o := percentile(mem, 50), percentile(off, 50)
	p99m, p99o := percentile(mem, 99), percentile(off, 99)
	spread := func(sys string) string {
		xs := lat[sys]
		// Where the time goes: until A's upload reaches the server, and from there until B reads it.
		var bSide []float64
		for i := range xs {
			bSide = append(bSide, xs[i]-aWait[sys][i])
		}
		return fmt.Sprintf("%s min %s, mean %s, max %s; close → A's upload at the server p50 %s, upload → B reads it p50 %s / max %s",
			sys, secs(percentile(xs, 0)), secs(mean(xs)), secs(percentile(xs, 100)),
			secs(percentile(aWait[sys], 50)), secs(percentile(bSide, 50)), secs(percentile(bSide, 100)))
	}
	rows := []row{
		{id, what + ": p50", "memfs " + secs(p50m), "official " + secs(p50o), ratioUp(p50m / p50o), "reported"},
		{id, what + ": p99 (nearest rank)", "memfs " + secs(p99m), "official " + secs(p99o), ratioUp(p99m / p99o), goalAtMost(p99m/p99o, 0.3, "official")},
		{id, "— spread", spread("memfs"), spread("official"), "—", "—"},
	}
	if locked != nil {
		p50l, p99l := percentile(locked, 50), percentile(locked, 99)
		rows = append(rows,
			row{id, "— context: one official pair started together, no pauses (one fixed relative phase of A's and B's syncs): p50 / p99", "memfs " + secs(p50m) + " / " + secs(p99m),
				"official, fixed phase " + secs(p50l) + " / " + secs(p99l), ratioUp(p50m/p50l) + " / " + ratioUp(p99m/p99l), "—"},
			row{id, "— spread, fixed-phase pair", "—", spread("official, fixed phase"), "—", "—"})
	}
	return rows, nil
}

// s1Side is one system's pair of sessions and the edits it propagates.
type s1Side struct {
	system  string
	aLabel  string // A's client, whose memory writes the server timestamps
	edits   int
	readDir string // B's copy of the store
	write   func(rel string, data []byte) (time.Time, error)
	// beforeEdit, when set, runs before each edit's random wait.
	beforeEdit func(ctx context.Context) error

	lat, aWait []float64 // seconds, per edit
}

// run makes the side's edits one after another: wait U(0, gap), write and
// close in A, poll B until it reads the new content.
func (s *s1Side) run(ctx context.Context, counter *reqCounter, layout sLayout, gap, timeout time.Duration) error {
	for k := 0; k < s.edits; k++ {
		if s.beforeEdit != nil {
			if err := s.beforeEdit(ctx); err != nil {
				return fmt.Errorf("%s (%s): edit %d: %w", s.system, s.aLabel, k, err)
			}
		}
		if err := sleepOrStop(ctx, rand.N(gap)); err != nil {
			return err
		}
		path := layout.path(k * 37 % layout.n) // distinct for k < n
		rel := strings.TrimPrefix(path, "/")
		want := []byte(fmt.Sprintf("edit %d by %s, session A, at %s\n%s", k, s.aLabel, time.Now().Format(time.RFC3339Nano), fContent[:1024]))
		t0, err := s.write(rel, want)
		if err != nil {
			return fmt.Errorf("%s (%s): edit %d: %w", s.system, s.aLabel, k, err)
		}
		d, err := pollFor(ctx, filepath.Join(s.readDir, rel), want, t0, timeout)
		if err != nil {
			return fmt.Errorf("%s (%s): edit %d: %w", s.system, s.aLabel, k, err)
		}
		up := counter.lastWriteAt(s.aLabel)
		if up.Before(t0) {
			return fmt.Errorf("%s (%s): edit %d reached B but no upload by A was seen", s.system, s.aLabel, k)
		}
		s.lat = append(s.lat, d.Seconds())
		s.aWait = append(s.aWait, up.Sub(t0).Seconds())
	}
	return nil
}

// quietText is a quiet period for a row: a duration, or off.
func quietText(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return d.String()
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// pollFor reads path every 2 ms until it holds want, and returns the time
// since t0.
func pollFor(ctx context.Context, path string, want []byte, t0 time.Time, timeout time.Duration) (time.Duration, error) {
	var last error
	for {
		got, err := os.ReadFile(path)
		now := time.Now()
		if err == nil && bytes.Equal(got, want) {
			return now.Sub(t0), nil
		}
		if err != nil {
			last = err
		}
		if now.Sub(t0) > timeout {
			return 0, fmt.Errorf("%s did not show the edit within %s (last read error: %v)", path, timeout, last)
		}
		if stopping.Load() {
			return 0, errInterrupted
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// toolLoop drives one official session as its worker does while the agent
// works: a tool call every tick, then SyncIfDue. An edit handed to it is
// written by the next tool call; a pause makes the next tool call longer.
type toolLoop struct {
	o        *officialSession
	tick     time.Duration
	requests func() int // requests this session has sent so far
	edits    chan loopEdit
	pauses   chan loopPause
}

type loopEdit struct {
	rel     string
	data    []byte
	written chan loopWritten
}

type loopWritten struct {
	at  time.Time
	err error
}

type loopPause struct {
	d      time.Duration
	synced chan struct{} // closed after the first sync that follows the pause
}

func newToolLoop(o *officialSession, tick time.Duration, requests func() int) *toolLoop {
	return &toolLoop{o: o, tick: tick, requests: requests, edits: make(chan loopEdit, 1), pauses: make(chan loopPause, 1)}
}

func (l *toolLoop) run(ctx context.Context) {
	var waiting chan struct{}
	for {
		d := l.tick // the tool call runs
		select {
		case p := <-l.pauses:
			d, waiting = p.d, p.synced
		default:
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		select {
		case e := <-l.edits:
			// The tool call wrote the file (the agent's edit); then the
			// worker syncs if due.
			err := os.WriteFile(filepath.Join(l.o.dir, e.rel), e.data, 0o644)
			e.written <- loopWritten{time.Now(), err}
		default:
		}
		before := l.requests()
		l.o.s.SyncIfDue(ctx)
		if waiting != nil && l.requests() > before {
			close(waiting)
			waiting = nil
		}
	}
}

// edit has the next tool call write data at rel, and returns when it was written.
func (l *toolLoop) edit(rel string, data []byte) (time.Time, error) {
	w := make(chan loopWritten, 1)
	l.edits <- loopEdit{rel: rel, data: data, written: w}
	r := <-w
	return r.at, r.err
}

// pause makes the next tool call last d and returns after the sync that
// follows it.
func (l *toolLoop) pause(ctx context.Context, d time.Duration) error {
	p := loopPause{d: d, synced: make(chan struct{})}
	l.pauses <- p
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d + 3*sopts.s1Interval + 20*time.Second)
	for {
		select {
		case <-p.synced:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("the paused session never synced again")
		case <-tick.C:
			if stopping.Load() {
				return errInterrupted
			}
		}
	}
}
