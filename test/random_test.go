package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/test/harness"
	"github.com/memfs/memfs/worker"
)

// TestRandomMountModel applies long random sequences of file operations
// both to a real FUSE mount of a store (mounted in this process with
// worker.MountStore, backed by a real `memfs serve` over SQLite, through a
// fault proxy) and to an in-memory model of what the mount must hold.
// After every step the mount must equal the model exactly (paths,
// directories, bytes) and every failing operation must fail with the
// errno the model predicts; every few steps the test drives the flusher
// until it has nothing more to do and checks the sync invariant of
// docs/sync.md: every file is in the store, or pending with a
// reason memfs status shows, or (the store won) in the conflict log, and
// every memory of the store is a file of the mount or has a pending
// change of its own.
//
// Between those checks it also:
//   - has another client edit, create, rename and delete memories, and
//     race the mount's own unsynced edits on purpose (the merge rules:
//     the store wins and the local version goes to the conflict log, a
//     local delete gives way to a remote edit, a local edit re-creates a
//     memory deleted in the store);
//   - takes the store away (the proxy cuts every connection) for a few
//     steps: nothing is lost, status says the store is unreachable;
//   - fills the state dir's disk (a small tmpfs) for a few steps: closes
//     fail with ENOSPC but keep their content, renames, unlinks and
//     truncates are refused whole, and once the disk frees everything is
//     journaled and uploaded by itself;
//   - writes content that is not UTF-8 now and then (closes fail with
//     EILSEQ; the files stay pending with that reason until made valid),
//     and swaps and rotates files and folders through temporary names.
//
// A sequence has three phases: the random steps on a fresh mount, ending
// with every file made valid, a full sync and a clean close; a remount
// with a fresh state dir, which must show exactly the store; and more
// steps closed cleanly with no sync first, then a remount on the same
// state dir, which must show the model (the journal is replayed) and sync
// the store to it.
//
// Each sequence is seeded. A fixed list of seeds runs every time, plus one
// time-based seed; MEMFS_RANDOM_SEED=N runs only seed N (and
// MEMFS_RANDOM_STEPS=N changes the length), to reproduce a failure.
// MEMFS_RANDOM_SWAPS=0 leaves swaps and rotations out.
func TestRandomMountModel(t *testing.T) {
	mtRequireFUSE(t)
	seeds, steps := randomSeeds(t)
	srv := harness.StartServe(t, harness.ServeOptions{})
	var storeIDs []string
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			storeIDs = append(storeIDs, runRandomSequence(t, srv, seed, steps))
		})
	}
	// No mount of these stores may outlive the test; detach any left behind.
	mounts, err := fs.Mounts()
	if err != nil {
		t.Fatalf("read /proc/self/mountinfo: %v", err)
	}
	for _, mi := range mounts {
		if mi.FSType == "fuse."+fs.FSType && slices.Contains(storeIDs, mi.Source) {
			t.Errorf("%s (store %s) is still mounted after the test; detaching it", mi.Dir, mi.Source)
			_ = unix.Unmount(mi.Dir, unix.MNT_DETACH)
		}
	}
}

// randomDefaultSeeds always run; they are the regression list. With the
// generator as it is, 1 fails if truncate(2) by path is not journaled, 3 if
// a create may adopt the memory of a file moved away ("mv a b; cp b a"), or
// if a replay can't put a file where the store still has a directory of
// moved memories, and 71 if a replay can't move a file onto the path of
// the directory that held it. Changing the generator changes what a seed
// does: check them again.
var randomDefaultSeeds = []uint64{1, 3, 71}

// randomDefaultSteps is the length of one sequence.
const randomDefaultSteps = 500

// randomSeeds returns the seeds to run and the steps per sequence.
func randomSeeds(t *testing.T) ([]uint64, int) {
	steps := randomDefaultSteps
	if testing.Short() {
		steps = 150
	}
	if s := os.Getenv("MEMFS_RANDOM_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("MEMFS_RANDOM_STEPS=%q: want a positive number", s)
		}
		steps = n
	}
	if s := os.Getenv("MEMFS_RANDOM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MEMFS_RANDOM_SEED=%q: want a number", s)
		}
		t.Logf("seed %d from MEMFS_RANDOM_SEED, %d steps", seed, steps)
		return []uint64{seed}, steps
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seeds %v plus time-based seed %d, %d steps each (reproduce one with MEMFS_RANDOM_SEED=<seed>)", randomDefaultSeeds, seed, steps)
	return append(slices.Clone(randomDefaultSeeds), seed), steps
}

// Tunables of a sequence.
const (
	rndMaxContent   = store.MaxContentBytes // 102,400: larger is EFBIG
	rndSyncEvery    = 25                    // steps between store checks
	rndMaxPasses    = 12                    // flusher passes allowed to drain the journal
	rndMaxFiles     = 30                    // above this, creates overwrite
	rndMaxDirs      = 7                     // above this, mkdir hits existing names
	rndMaxDepth     = 5                     // deepest directory a rename may produce
	rndTailSteps    = 80                    // steps after the remount, closed without a sync
	rndOpTimeout    = 60 * time.Second      // bound on every call to the store
	rndMarkerPrefix = "version 1\n"
)

// rndNames are the only names ever used: few, so that operations collide
// (same name as file and directory, case variants, overwrites) often.
var rndNames = []string{"a", "b", "c", "d", "A", "n.md", "N.md", "x_1", "y-2", "z.txt"}

// rndPalette gives different files identical content now and then: empty
// files and copies are common in real trees and exercise content-based
// shortcuts in the sync engine.
var rndPalette = []string{"", "", "hello\n", "same content in many files\n"}

// rnd is one running sequence.
type rnd struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	ctx     context.Context
	cl      *client.Client      // straight to memfs serve: the test's checks and the other writer
	ecl     *client.Client      // the engine's, through the proxy
	tr      *http.Transport     // the clients': idle connections are closed at the end
	proxy   *harness.FaultProxy // between the engine and memfs serve
	storeID string
	logs    *harness.LockedBuffer
	log     logrus.FieldLogger

	base     string       // temp dir holding mount points
	disk     string       // a small tmpfs holding the state dirs: filled on cue
	stateDir string       // of the last mount
	fds      map[int]bool // descriptors open on the mount
	mnt      *worker.Mounted
	root     string
	closed   bool
	m        rndModel
	ops      []string // every step, for the failure report
	stats    map[string]int
	passes   map[int]int // flusher passes needed to drain -> times
	swaps    bool        // swaps and rotations (MEMFS_RANDOM_SWAPS=0 leaves them out)

	full        bool                     // the state dir's disk is full now
	unjournaled map[string]bool          // files closed while it was full (their content is not journaled yet)
	conflicts   map[string][]rndConflict // state dir -> local versions the store won, in order
	remoteN     int                      // names of the other writer's new files
}

// rndConflict is a local version the model expects in the conflict log.
type rndConflict struct {
	path    string
	content []byte
}

// runRandomSequence runs one seeded sequence on a new store and returns
// the store's id.
func runRandomSequence(t *testing.T, srv *harness.Serve, seed uint64, steps int) string {
	r := newRnd(t, srv, seed)
	// The fault proxy's goroutines live until the test's cleanup.
	leaks := goleak.IgnoreCurrent()
	start := time.Now()

	// Phase 1: the random sequence on a fresh mount, checked against the
	// store every rndSyncEvery steps, with the other writer and the
	// faults in between; at the end every file is made valid and the
	// store must hold exactly the model.
	r.mount("state1", "mnt1")
	for i := 1; i <= steps; i++ {
		r.step(i)
		if i%rndSyncEvery == 0 {
			r.syncAndCheckStore(fmt.Sprintf("after step %d", i), false)
			r.remoteRound(i)
			i = r.faultEpisode(i)
		}
	}
	r.heal(steps)
	r.syncAndCheckStore("at the end", true)
	r.close(true)

	// Phase 2: a fresh state dir must show exactly what the store holds
	// (empty directories were local only and are gone).
	r.m.dirs = rndImpliedDirs(r.m.files)
	r.mount("state2", "mnt2")
	r.checkMount("after the remount")
	r.close(true)

	// Phase 3: more steps, then a clean close with no sync first: the
	// final sync of Close uploads what it can, and what it can't (a
	// path conflict needing a second pass, deletes over the per-pass cap)
	// stays in the journal; a remount on the same state dir replays it,
	// so the mount must show the model and a sync must bring the store
	// there too.
	r.mount("state3", "mnt3")
	for i := steps + 1; i <= steps+rndTailSteps; i++ {
		r.step(i)
	}
	r.close(true)
	r.m.dirs = rndImpliedDirs(r.m.files)
	r.mount("state3", "mnt4")
	r.checkMount("after the remount on the same state dir")
	r.syncAndCheckStore("after the replay", false)
	r.heal(steps + rndTailSteps)
	r.syncAndCheckStore("after the replay, every file valid", true)
	r.close(true)

	r.tr.CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
	t.Logf("seed %d: %d steps in %v; %d files, %d dirs at the end; flusher passes to drain: %v",
		seed, len(r.ops), time.Since(start).Round(time.Millisecond), len(r.m.files), len(r.m.dirs), r.passes)
	t.Logf("outcomes: %s", r.statsLine())
	return r.storeID
}

// newRnd creates a store for one sequence, and a cleanup that closes what
// a failed sequence left open and logs the engine's lines and journal.
func newRnd(t *testing.T, srv *harness.Serve, seed uint64) *rnd {
	ctx := t.Context()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: tr}
	cl, err := client.New(client.Options{BaseURL: srv.URL, APIKey: srv.AdminKey, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	proxy := harness.NewFaultProxy(t, srv.URL)
	// The engine's client gives up fast while the store is away, so a
	// pass during an outage fails in milliseconds, not after retries.
	ecl, err := client.New(client.Options{BaseURL: proxy.URL(), APIKey: srv.AdminKey, HTTPClient: hc,
		RetryMax: 1, RetryWaitMin: 5 * time.Millisecond, RetryWaitMax: 20 * time.Millisecond, Timeout: rndOpTimeout})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, rndOpTimeout)
	st, err := cl.CreateStore(sctx, store.CreateStoreInput{Name: fmt.Sprintf("random seed %d", seed)})
	scancel()
	if err != nil {
		t.Fatalf("create store: %v", err)
	}
	logs := &harness.LockedBuffer{}
	lg := logrus.New()
	lg.SetOutput(logs)
	lg.SetLevel(logrus.InfoLevel)
	r := &rnd{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x6d656d6673)), ctx: ctx, cl: cl, ecl: ecl, tr: tr, proxy: proxy, storeID: st.ID,
		logs: logs, log: lg, m: rndModel{files: map[string][]byte{}, dirs: map[string]bool{}},
		stats: map[string]int{}, passes: map[int]int{}, fds: map[int]bool{}, base: t.TempDir(),
		disk: harness.SmallTmpfs(t, "48m"), swaps: os.Getenv("MEMFS_RANDOM_SWAPS") != "0",
		unjournaled: map[string]bool{}, conflicts: map[string][]rndConflict{}}
	for _, d := range []string{"state1", "state2", "state3"} {
		if err := os.Mkdir(filepath.Join(r.disk, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Every directory is made before the cleanup below is registered, so
	// the cleanup (unmount) runs before testing removes them.
	for _, d := range []string{"mnt"} {
		if err := os.Mkdir(filepath.Join(r.base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for fd := range r.fds {
			syscall.Close(fd) // a check failed with fd open
		}
		// A failed sequence still unmounts (without deletes).
		if r.mnt != nil && !r.closed {
			cctx, ccancel := context.WithTimeout(context.Background(), rndOpTimeout)
			defer ccancel()
			if err := r.mnt.Close(cctx, false); err != nil {
				t.Errorf("close the mount after a failure: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("engine log:\n%s", rndLastLines(logs.String(), 60))
			r.logJournal()
		}
	})
	return r
}

// mount mounts the store at base/mnt/name (which MountStore creates, and
// removes at Close), with the journal under base/stateDir.
func (r *rnd) mount(stateDir, name string) {
	r.t.Helper()
	dir := filepath.Join(r.base, "mnt", name)
	ctx, cancel := context.WithTimeout(r.ctx, rndOpTimeout)
	defer cancel()
	m, err := worker.MountStore(ctx, worker.MountOptions{
		Engine: syncqueue.EngineOptions{
			StoreID:  r.storeID,
			Store:    r.ecl,
			StateDir: filepath.Join(r.disk, stateDir),
			// Passes are driven by SyncNow; a timed pass at a random moment
			// would make a sequence depend on timing (the whole-store guard
			// restores files if it runs while the tree is empty).
			Interval:    time.Hour,
			DeleteDelay: time.Millisecond,
			Log:         r.log,
		},
		Mountpoint: dir,
		Log:        r.log,
	})
	if err != nil {
		r.t.Fatalf("mount %s: %v", name, err)
	}
	r.mnt, r.root, r.closed, r.stateDir = m, m.Dir(), false, filepath.Join(r.disk, stateDir)
	if mounted, err := fs.IsMounted(r.root); err != nil || !mounted {
		r.t.Fatalf("after MountStore: IsMounted(%s) = %v, %v; want true", r.root, mounted, err)
	}
}

// close ends the mount (clean: deletes included in the final sync) and
// checks that it is gone.
func (r *rnd) close(clean bool) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, rndOpTimeout)
	defer cancel()
	r.closed = true
	if err := r.mnt.Close(ctx, clean); err != nil {
		r.t.Fatalf("close the mount: %v", err)
	}
	if mounted, err := fs.IsMounted(r.root); err != nil || mounted {
		r.t.Fatalf("after Close: IsMounted(%s) = %v, %v; want false", r.root, mounted, err)
	}
	if _, err := os.Lstat(r.root); !errors.Is(err, os.ErrNotExist) {
		r.t.Fatalf("after Close: the mount directory %s it created is still there (%v)", r.root, err)
	}
}

// logJournal logs what the journal of the last mount still holds (after
// a failure; the mount is closed, so the journal is free).
func (r *rnd) logJournal() {
	if r.stateDir == "" {
		return
	}
	auth, err := syncqueue.JournalAuth(r.stateDir, r.storeID)
	if err != nil {
		r.t.Logf("the journal's key: %v", err)
		return
	}
	auth.AnySession = true
	j, err := journal.Open(syncqueue.JournalDir(r.stateDir, r.storeID), journal.Options{Log: r.log, Auth: auth})
	if err != nil {
		r.t.Logf("open the journal: %v", err)
		return
	}
	defer j.Close(context.Background())
	for _, p := range j.Pending() {
		r.t.Logf("pending in the journal: file %s origin %q path %s deleted=%v lsn %d, %d bytes",
			p.FileID, p.Origin, p.Path, p.Deleted, p.LSN, len(p.Content))
	}
}

// fail reports a failure with the seed and the steps that led to it.
func (r *rnd) fail(format string, args ...any) {
	r.t.Helper()
	const tail = 40
	from := max(0, len(r.ops)-tail)
	var b strings.Builder
	for i := from; i < len(r.ops); i++ {
		b.WriteString("  " + r.ops[i] + "\n")
	}
	r.t.Fatalf("seed %d (reproduce: MEMFS_RANDOM_SEED=%d go test -run Random -v ./test/): %s\nlast %d of %d steps:\n%s",
		r.seed, r.seed, fmt.Sprintf(format, args...), len(r.ops)-from, len(r.ops), b.String())
}

func (r *rnd) abs(p string) string { return filepath.Join(r.root, p) }

func rndErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.Errno(0xffff) // not an errno: never what the model predicts
}

func rndErrnoName(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

// expect compares one syscall's outcome with the model's prediction.
func (r *rnd) expect(desc string, want syscall.Errno, err error) {
	r.t.Helper()
	if got := rndErrno(err); got != want {
		r.fail("%s: got %s (%v), the model predicts %s", desc, rndErrnoName(got), err, rndErrnoName(want))
	}
}

// record logs the step and counts its outcome.
func (r *rnd) record(i int, op, desc string, want syscall.Errno) {
	r.ops = append(r.ops, fmt.Sprintf("%d: %s -> %s", i, desc, rndErrnoName(want)))
	r.stats[op+" "+rndErrnoName(want)]++
}

func (r *rnd) statsLine() string {
	keys := make([]string, 0, len(r.stats))
	for k := range r.stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, r.stats[k])
	}
	return strings.TrimSpace(b.String())
}
