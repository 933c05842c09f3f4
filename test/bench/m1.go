package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// M1's second row: the resident memory of ONE mount of a store of
// m1memories × m1size bytes (3,000 × 30 KB = 90 MB), against its content.
// The mount runs in a child process (this program run again with
// m1ChildEnv set) that holds nothing but the mount, so its VmRSS is the
// mount's own; the server and the seeding stay in this process. The child
// mounts the store as memfs mount does, waits until every memory's content
// is in memory, and says so on stdout; this process then waits m1idle and
// reads the child's VmRSS, and closes the child's stdin to have it unmount
// (cleanly) and exit. The goal is ≤ 1.2× content + 30 MiB.

var m1opts struct {
	memories int
	size     int
	idle     time.Duration
}

func init() {
	measures = append(measures, measure{id: "M1", run: runS("M1", benchM1Content)})
	flag.IntVar(&m1opts.memories, "m1memories", 3000, "M1: memories in the store of the one-mount row")
	flag.IntVar(&m1opts.size, "m1size", 30000, "M1: bytes per memory in the store of the one-mount row")
	flag.DurationVar(&m1opts.idle, "m1idle", 10*time.Second, "M1: idle time between the end of the load and reading the mount's resident memory")
}

// m1ChildEnv, when set, makes this program the mounting child of M1
// (m1ChildMain); its value is the store id.
const m1ChildEnv = "MEMFS_BENCH_M1_CHILD"

// m1Content is memory i's content: n bytes of UTF-8, distinct per memory.
func m1Content(path string, n int) string {
	var b strings.Builder
	b.WriteString("# " + path + "\n")
	line := "A line of a memory of the M1 benchmark, so that its content is text.\n"
	for b.Len() < n {
		b.WriteString(line)
	}
	return b.String()[:n]
}

func benchM1Content(ctx context.Context, cfg config, env *sEnv) ([]row, error) {
	layout := sLayout{m1opts.memories, 30}
	storeID, err := env.seedStoreWith(ctx, "m1 content", layout, func(p string) string { return m1Content(p, m1opts.size) })
	if err != nil {
		return nil, err
	}
	content := float64(m1opts.memories*m1opts.size) / (1 << 20)
	var rss, loaded []float64
	for rep := 0; rep < max(1, cfg.reps/2); rep++ {
		if stopping.Load() {
			return nil, errInterrupted
		}
		r, l, _, err := m1Measure(ctx, env, []string{storeID}, m1opts.idle)
		if err != nil {
			return nil, err
		}
		rss, loaded = append(rss, r), append(loaded, l)
	}
	med := median(rss)
	goal := 1.2*content + 30
	verdict := "**missed**"
	if med <= goal {
		verdict = "met"
	}
	return []row{{"M1", fmt.Sprintf("resident memory of one mount (its own process) of %s memories × %s bytes, idle %s after its content is loaded; at the end of the load %s",
		thousands(float64(m1opts.memories)), thousands(float64(m1opts.size)), m1opts.idle, mibRange(loaded)),
		mibRange(rss), fmt.Sprintf("content %.1f MiB", content), fmt.Sprintf("%.2f× content", med/content),
		fmt.Sprintf("≤ 1.2× content + 30 MiB = %.0f MiB: %s", goal, verdict)}}, nil
}

// m1Measure runs one child that mounts the given stores and returns its
// VmRSS in MiB after the idle window and at the moment its content was
// loaded, and the CPU time it used over the idle window.
func m1Measure(ctx context.Context, env *sEnv, storeIDs []string, idle time.Duration) (rss, atLoad float64, cpu time.Duration, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, 0, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), m1ChildEnv+"="+strings.Join(storeIDs, ","), "MEMFS_BENCH_M1_URL="+env.base, "MEMFS_BENCH_M1_KEY="+env.key)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		stdin.Close()
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("the M1 child: %w", werr)
		}
	}()
	line, rerr := bufio.NewReader(stdout).ReadString('\n')
	if rerr != nil || strings.TrimSpace(line) != "loaded" {
		return 0, 0, 0, fmt.Errorf("the M1 child did not load the stores: %q %v", line, rerr)
	}
	go io.Copy(io.Discard, stdout)
	pid := cmd.Process.Pid
	atLoad = residentMiBOf(pid)
	cpu0 := cpuOf(pid)
	if err := sleepOrStop(ctx, idle); err != nil {
		return 0, 0, 0, err
	}
	return residentMiBOf(pid), atLoad, cpuOf(pid) - cpu0, nil
}

// m1ChildMain is the child of M1: it mounts the stores named by m1ChildEnv
// (comma-separated ids) as memfs worker does, one engine and mount each,
// says "loaded" once every memory's content is in memory, and unmounts
// when its stdin closes.
func m1ChildMain() int {
	storeIDs := strings.Split(os.Getenv(m1ChildEnv), ",")
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "bench: M1 child: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", fmt.Sprintf("memfs-bench-s-%d-m1-", os.Getppid())) // the parent's sTempPfx
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	cl, err := client.New(client.Options{BaseURL: os.Getenv("MEMFS_BENCH_M1_URL"), APIKey: os.Getenv("MEMFS_BENCH_M1_KEY"), UserAgent: "memfs-bench-m1"})
	if err != nil {
		return fail(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	ctx := context.Background()
	var mounts []*worker.Mounted
	for i, id := range storeIDs {
		m, merr := worker.MountStore(ctx, worker.MountOptions{
			Engine: syncqueue.EngineOptions{
				StoreID: id, Store: cl, StateDir: filepath.Join(tmp, fmt.Sprintf("state-%d", i)),
				Owner: fs.Ownership{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
			},
			Mountpoint: filepath.Join(tmp, fmt.Sprintf("mnt-%d", i)),
			FS:         fs.MountOptions{AllowOther: os.Geteuid() == 0},
			Log:        log,
		})
		if merr != nil {
			err = merr
			break
		}
		mounts = append(mounts, m)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for err == nil && !allLoaded(mounts) {
		if time.Now().After(deadline) {
			err = errors.New("the content was not loaded within 5 minutes")
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the load's progress
	}
	if err == nil {
		runtime.GC()
		fmt.Println("loaded")
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
	}
	cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	for _, m := range mounts {
		if cerr := m.Close(cctx, true); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

func allLoaded(mounts []*worker.Mounted) bool {
	for _, m := range mounts {
		if !m1Loaded(m) {
			return false
		}
	}
	return true
}

// cpuOf reads the user + system CPU time process pid has used
// (/proc/pid/stat fields 14 and 15, in clock ticks of 1/100 s, the value
// of USER_HZ on Linux).
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// m1Loaded reports whether the mount holds every memory's content (it
// mounts from the listing and fetches the content behind it).
func m1Loaded(m *worker.Mounted) bool {
	c := m.Engine().Status().Content
	return c.Fetched == c.Total
}

// residentMiBOf reads VmRSS of process pid.
func residentMiBOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// mibRange is "median MiB (min–max)".
func mibRange(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.0f MiB (%.0f–%.0f)", median(s), s[0], s[len(s)-1])
}
