package main

// The directory-mode measures (worker.ModeDirectory, package dirmode: the
// store written into its mount path as plain files, watched with inotify
// and rescanned every interval). They run on the S measures' in-process
// server (sserver.go), each on its own.
//
//   - DM1: S3 in directory mode: MountStore (which returns once every file
//     is written) until `ls -l` of the root answers, 2,000 and 10,000
//     memories (-smemories, -s3large; and S3's single-directory context
//     row), against the official worker's Download of the same store.
//     Goal ≤ 0.5× the official's (benchReady, s3.go).
//   - DM2: S1 in directory mode: an edit closed in session A's folder
//     until session B's folder holds it, p50 and p99 over -s1edits edits,
//     against the same official session pairs as S1, run at the same
//     time. Goal p99 ≤ 0.3× the official worker's (benchPropagation,
//     s1.go). It takes as long as S1 (about 7 minutes by default; fewer
//     -s1edits and more -s1pairs shorten it).
//   - DM3: the CPU of one idle look (dirmode.Dir.Look: a full walk of the
//     folder and the compare against what it holds) of a folder of
//     -dm3memories (10,000) files, once the mount has settled (benchDM3).
//     Goal ≤ 50 ms.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/worker"
)

var dm3opts struct {
	memories int
	looks    int
}

func init() {
	measures = append(measures,
		measure{id: "DM1", run: runS("DM1", func(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
			return benchReady(ctx, cfg, env, "DM1", worker.ModeDirectory, 0.5)
		})},
		measure{id: "DM2", run: runS("DM2", func(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
			return benchPropagation(ctx, cfg, env, "DM2", worker.ModeDirectory)
		})},
		measure{id: "DM3", run: runS("DM3", benchDM3)},
	)
	flag.IntVar(&dm3opts.memories, "dm3memories", 10000, "DM3: memories in the store whose folder is looked at")
	flag.IntVar(&dm3opts.looks, "dm3looks", 9, "DM3: looks measured (the median is reported)")
}

// benchDM3: the CPU time of one idle look of a folder of 10,000 files. A
// store of -dm3memories memories (2 KiB each, in -sdirs directories) is
// mounted in directory mode with its own rescan pushed out of the way (an
// hour: no look of the loop's runs meanwhile) and left to settle (no look
// for 2 s: the loop's looks after the writes of the mount are over).
// Then, -dm3looks times, Folder().Look() runs on a goroutine locked to its
// thread, between two getrusage calls: RUSAGE_SELF (user + sys of the
// whole process: the look, the garbage collection it causes on other
// threads, and whatever else runs — the in-process server and the
// mount's engine, both idle) is the figure the goal is checked on;
// RUSAGE_THREAD (the look's own thread) and the wall time are shown with
// it, and the bytes a look allocates. Each look must find nothing to
// take: afterwards nothing may be pending. Goal ≤ 50 ms.
func benchDM3(ctx context.Context, cfg config, env *sEnv) (_ []row, retErr error) {
	if dm3opts.looks < 1 {
		return nil, errors.New("-dm3looks must be at least 1")
	}
	layout := sLayout{dm3opts.memories, sopts.dirs}
	storeID, err := env.seedStore(ctx, "dm3", layout)
	if err != nil {
		return nil, err
	}
	m, err := env.mountMemfsMode(ctx, storeID, "memfs-bench-dm3", worker.ModeDirectory, 0, 0, time.Hour, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := m.close(); cerr != nil && retErr == nil {
			retErr = cerr
		}
	}()
	folder := m.m.Folder()
	if folder == nil {
		return nil, errors.New("the mount is not a directory")
	}
	if n := folder.FileCount(); n != layout.n {
		return nil, fmt.Errorf("the folder holds %d of the store's %d files", n, layout.n)
	}
	// Settle: the loop looks after the events of the mount's own writes
	// until none comes.
	deadline := time.Now().Add(time.Minute)
	for last, since := folder.Stats().Looks, time.Now(); time.Since(since) < 2*time.Second; {
		if time.Now().After(deadline) {
			return nil, errors.New("the folder did not settle within a minute")
		}
		if err := sleepOrStop(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
		if n := folder.Stats().Looks; n != last {
			last, since = n, time.Now()
		}
	}
	looks0 := folder.Stats().Looks
	var self, thread, wall, alloc []float64
	for i := 0; i < dm3opts.looks; i++ {
		if stopping.Load() {
			return nil, errInterrupted
		}
		s, t, w, a := dm3Look(folder.Look)
		self, thread, wall, alloc = append(self, s), append(thread, t), append(wall, w), append(alloc, a)
	}
	if n := folder.Stats().Looks - looks0; n != dm3opts.looks {
		return nil, fmt.Errorf("%d looks were measured but the folder counts %d", dm3opts.looks, n)
	}
	st := m.m.Engine().Status()
	if st.PendingUploads+st.PendingDeletes > 0 {
		return nil, fmt.Errorf("the idle looks found changes: %d uploads and %d deletes pending", st.PendingUploads, st.PendingDeletes)
	}
	med := median(self)
	verdict := "**missed**"
	if med <= 50 {
		verdict = "met"
	}
	what := fmt.Sprintf("directory mode: CPU of one idle look (`Folder().Look()`: walk + compare) of a folder of %s, settled; %d looks; process user + sys (getrusage RUSAGE_SELF)",
		layout, dm3opts.looks)
	return []row{
		{"DM3", what, msRange(self), "50 ms bound", fmt.Sprintf("%.2f× bound", med/50), "≤ 50 ms: " + verdict},
		{"DM3", "— the look's own thread (RUSAGE_THREAD); wall time; allocated per look",
			"thread " + msRange(thread) + "; wall " + msRange(wall), fmt.Sprintf("%.1f MiB allocated", median(alloc)/(1<<20)), "—", "—"},
	}, nil
}

// dm3Look runs look on a thread of its own and returns the CPU time the
// process and that thread used meanwhile, the wall time (all in ms) and
// the bytes allocated.
func dm3Look(look func()) (self, thread, wall, alloc float64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		var s0, t0, s1, t1 unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &s0)
		unix.Getrusage(unix.RUSAGE_THREAD, &t0)
		start := time.Now()
		look()
		wall = float64(time.Since(start).Microseconds()) / 1000
		unix.Getrusage(unix.RUSAGE_THREAD, &t1)
		unix.Getrusage(unix.RUSAGE_SELF, &s1)
		runtime.ReadMemStats(&ms1)
		self, thread = cpuMs(s0, s1), cpuMs(t0, t1)
		alloc = float64(ms1.TotalAlloc - ms0.TotalAlloc)
	}()
	<-done
	return
}

// cpuMs is the user + system time between two getrusage answers, in ms.
func cpuMs(a, b unix.Rusage) float64 {
	us := func(tv unix.Timeval) int64 { return tv.Sec*1e6 + int64(tv.Usec) }
	return float64(us(b.Utime)-us(a.Utime)+us(b.Stime)-us(a.Stime)) / 1000
}

// msRange is "median ms (min–max)".
func msRange(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.1f ms (%.1f–%.1f)", median(s), s[0], s[len(s)-1])
}
