package main

// The sync measures (S1–S3, and DM1–DM2 in directory mode: sdir.go)
// compare memfs's mounts with the official worker's memory sync
// (lib/environments.SessionMemoryStores of
// github.com/anthropics/anthropic-sdk-go/v2), both against one in-process
// `memfs serve` (store/server over store/sqlstore SQLite on /tmp) behind a
// real loopback HTTP listener.
//
//   - memfs: worker.MountStore, in-process, each mount with its own state
//     directory, mount point and store client (store/client, default
//     retries), mount options as cmd/memfs sets them.
//   - official: NewSessionMemoryStores on anthropic.NewClient with
//     option.WithBaseURL and option.WithAPIKey(admin key) (sent as
//     Authorization: Bearer), the SDK's default retries, its folder under
//     /tmp (the worker's workdir is on disk too); driven as its worker does:
//     Download, SyncIfDue after every simulated tool call, Cleanup(true).
//
// Every request reaching the server is counted per client by a middleware
// (the client is told apart by an X-Bench-Client header for the SDK and
// by User-Agent for memfs's client).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// sopts are the S measures' own flags (main parses them).
var sopts struct {
	memories    int
	dirs        int
	s1Edits     int
	s1Pairs     int
	s1Locked    bool
	s1Interval  time.Duration
	s1Tick      time.Duration
	s2Interval  time.Duration
	s2Intervals int
	s2Tick      time.Duration
	quiet       time.Duration // memfs's quiet period in S1 and S2
}

func init() {
	flag.IntVar(&sopts.memories, "smemories", 2000, "S1–S3: memories in the store (2 KiB each)")
	flag.IntVar(&sopts.dirs, "sdirs", 20, "S1–S3: top-level directories the memories are spread over (S3 also runs a single-directory store)")
	flag.IntVar(&sopts.s1Edits, "s1edits", 50, "S1: edits propagated A → B per system (memfs and the official worker run concurrently)")
	flag.IntVar(&sopts.s1Pairs, "s1pairs", 2, "S1: official session pairs sharing the edits (each on its own store), to bound the run time")
	flag.BoolVar(&sopts.s1Locked, "s1locked", true, "S1: also run the context pair of official sessions started together, without pauses")
	flag.DurationVar(&sopts.s1Interval, "s1interval", syncqueue.MinInterval, "S1: sync interval of both systems (5 s is both minimums)")
	flag.DurationVar(&sopts.s1Tick, "s1tick", 250*time.Millisecond, "S1: the official sessions' simulated tool call period (SyncIfDue after each)")
	flag.DurationVar(&sopts.s2Interval, "s2interval", environments.DefaultMemorySyncInterval, "S2: sync interval of both systems (15 s is both defaults)")
	flag.IntVar(&sopts.s2Intervals, "s2intervals", 4, "S2: idle intervals counted")
	flag.DurationVar(&sopts.quiet, "squiet", syncqueue.DefaultQuiet, "S1, S2: memfs's --memory-sync-quiet (its default; 0 turns it off: interval-only passes)")
	flag.DurationVar(&sopts.s2Tick, "s2tick", time.Second, "S2: the official session's simulated tool call period (SyncIfDue after each)")
}

// sTempPfx starts the names of this run's temporary directories and
// mount points. It holds the process id so that the check for mounts left
// behind sees this run's only, not those of a bench another engineer runs
// on the same machine at the same time. (The M1 child uses its parent's.)
var sTempPfx = fmt.Sprintf("memfs-bench-s-%d-", os.Getpid())

// sEnv is one in-process memfs serve with its request counter.
type sEnv struct {
	dir     string
	folders string // where the folders of mounts and official sessions go (sdisk.go)
	base    string
	key     string
	counter *reqCounter
	admin   *client.Client
	db      *sqlstore.DB
	log     logrus.FieldLogger
	undo    cleanups
}

func newSEnv(ctx context.Context) (_ *sEnv, err error) {
	cleanupOnSignal()
	e := &sEnv{key: "sk-memfs-bench-key-0123456789abcdef", counter: newReqCounter()}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.dir, err = os.MkdirTemp("", sTempPfx)
	if err != nil {
		return nil, err
	}
	e.undo.add(func() error { return os.RemoveAll(e.dir) })
	if e.folders, err = freshDisk(&e.undo); err != nil {
		return nil, err
	}
	db, err := sqlstore.Open(ctx, filepath.Join(e.dir, "bench.db"), sqlstore.Options{MaxMemoriesPerStore: 1 << 30})
	if err != nil {
		return nil, err
	}
	e.undo.add(db.Close)
	e.db = db
	if _, err := server.EnsureAdminKey(ctx, db, e.key, ""); err != nil {
		return nil, err
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	e.log = log
	srv, err := server.New(server.Options{Backend: db, Log: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: e.counter.wrap(srv)}
	go hs.Serve(ln)
	e.undo.add(func() error {
		srv.BeginShutdown()
		return hs.Close()
	})
	e.base = "http://" + ln.Addr().String()
	e.admin, err = client.New(client.Options{BaseURL: e.base, APIKey: e.key, UserAgent: "memfs-bench-seed"})
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (e *sEnv) close() error { return e.undo.run() }

// sContent is memory i's content: 2 KiB of UTF-8, distinct per memory.
func sContent(path string) string {
	head := "# " + path + "\n"
	return head + string(fContent[len(head):])
}

// sLayout names the memories of a store: dirs top-level directories
// (dirs = 1: all in /notes).
type sLayout struct{ n, dirs int }

func (l sLayout) path(i int) string {
	if l.dirs <= 1 {
		return fmt.Sprintf("/notes/note-%04d.md", i)
	}
	return fmt.Sprintf("/topic-%02d/note-%04d.md", i%l.dirs, i)
}

func (l sLayout) String() string {
	if l.dirs <= 1 {
		return fmt.Sprintf("%s memories in 1 directory", thousands(float64(l.n)))
	}
	return fmt.Sprintf("%s memories in %d directories", thousands(float64(l.n)), l.dirs)
}

// seedStore creates a store holding layout's memories, 16 creates at a time.
func (e *sEnv) seedStore(ctx context.Context, name string, l sLayout) (string, error) {
	return e.seedStoreWith(ctx, name, l, sContent)
}

// seedStoreWith is seedStore with each memory's content given by content.
func (e *sEnv) seedStoreWith(ctx context.Context, name string, l sLayout, content func(path string) string) (string, error) {
	st, err := e.admin.CreateStore(ctx, store.CreateStoreInput{Name: name})
	if err != nil {
		return "", err
	}
	idx := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				p := l.path(i)
				if _, err := e.admin.CreateMemory(ctx, st.ID, p, content(p)); err != nil {
					errs <- fmt.Errorf("seed %s: %w", p, err)
					for range idx {
					}
					return
				}
			}
		}()
	}
	for i := 0; i < l.n; i++ {
		idx <- i
	}
	close(idx)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return "", err
	}
	return st.ID, nil
}

// memfsMount is one memfs mount of a store, in-process.
type memfsMount struct {
	m    *worker.Mounted
	dir  string
	undo cleanups
}

// mountMemfs mounts storeID with its own state directory and client
// (User-Agent label). With took, it is set to how long MountStore took.
// Only the interval's passes run (no quiet trigger): S4 keeps its edits
// pending until the final sync.
func (e *sEnv) mountMemfs(ctx context.Context, storeID, label string, interval time.Duration, took *time.Duration) (*memfsMount, error) {
	return e.mountMemfsQuiet(ctx, storeID, label, interval, 0, took)
}

// mountMemfsQuiet is mountMemfs with a quiet period (0: off).
func (e *sEnv) mountMemfsQuiet(ctx context.Context, storeID, label string, interval, quiet time.Duration, took *time.Duration) (*memfsMount, error) {
	return e.mountMemfsMode(ctx, storeID, label, worker.ModeFUSE, interval, quiet, 0, took)
}

// mountMemfsMode is mountMemfsQuiet in a mount mode: worker.ModeFUSE, or
// worker.ModeDirectory (the store written into the mount path as plain
// files; MountStore returns once every file is written). A directory is
// rescanned every rescan (0: every interval, as memfs mount
// --mount-mode directory does).
func (e *sEnv) mountMemfsMode(ctx context.Context, storeID, label, mode string, interval, quiet, rescan time.Duration, took *time.Duration) (*memfsMount, error) {
	return e.mountMemfsWith(ctx, storeID, label, mode, interval, quiet, rescan, took, nil)
}

// mountMemfsWith is mountMemfsMode with the engine's store made by wrap
// from the mount's client (nil: the client itself), inside the time took
// measures: memfs mount --at's history.AsOf (H1).
func (e *sEnv) mountMemfsWith(ctx context.Context, storeID, label, mode string, interval, quiet, rescan time.Duration, took *time.Duration,
	wrap func(*client.Client) (syncqueue.Store, error)) (_ *memfsMount, err error) {
	mm := &memfsMount{}
	defer func() {
		if err != nil {
			mm.close()
		}
	}()
	tmp, err := os.MkdirTemp(e.folders, sTempPfx+"memfs-")
	if err != nil {
		return nil, err
	}
	mm.undo.add(func() error { return os.RemoveAll(tmp) })
	cl, err := client.New(client.Options{BaseURL: e.base, APIKey: e.key, UserAgent: label})
	if err != nil {
		return nil, err
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	log.SetOutput(os.Stderr)
	mm.dir = filepath.Join(tmp, "mnt")
	start := time.Now()
	var st syncqueue.Store = cl
	readOnly := false
	if wrap != nil {
		if st, err = wrap(cl); err != nil {
			return nil, err
		}
		readOnly = true
	}
	mm.m, err = worker.MountStore(ctx, worker.MountOptions{
		Engine: syncqueue.EngineOptions{
			StoreID: storeID, Store: st, ReadOnly: readOnly, StateDir: filepath.Join(tmp, "state"), Interval: interval, Quiet: quiet,
			Owner: fs.Ownership{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
		},
		Mountpoint: mm.dir,
		Mode:       mode,
		Rescan:     rescan,
		FS:         fs.MountOptions{AllowOther: os.Geteuid() == 0},
		Log:        log.WithField("bench", label),
	})
	if took != nil {
		*took = time.Since(start)
	}
	if err != nil {
		return nil, err
	}
	mm.undo.add(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		return mm.m.Close(ctx, true)
	})
	return mm, nil
}

func (mm *memfsMount) close() error { return mm.undo.run() }

// officialSession is one official SessionMemoryStores with its folder.
type officialSession struct {
	s    *environments.SessionMemoryStores
	dir  string // the store's folder (the resource's mount_path)
	undo cleanups
}

// newOfficial makes a SessionMemoryStores whose store folder will be a
// fresh path under /tmp; Download is the caller's (S3 times it).
func (e *sEnv) newOfficial(label string, interval time.Duration) (_ *officialSession, err error) {
	o := &officialSession{}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	tmp, err := os.MkdirTemp(e.folders, sTempPfx+"official-")
	if err != nil {
		return nil, err
	}
	o.undo.add(func() error { return os.RemoveAll(tmp) })
	o.dir = filepath.Join(tmp, "memory", "bench") // must not exist: Download creates it
	c := anthropic.NewClient(option.WithBaseURL(e.base), option.WithAPIKey(e.key),
		option.WithHeader("X-Bench-Client", label))
	o.s, err = environments.NewSessionMemoryStores(c, environments.SessionMemoryStoresOptions{
		Workdir:      tmp,
		SyncInterval: interval,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("bench", label),
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// download runs Download with a session naming the store at o.dir; on
// success Cleanup(true) joins the teardown.
func (o *officialSession) download(ctx context.Context, storeID string) error {
	sess, err := benchSession(storeID, o.dir)
	if err != nil {
		return err
	}
	o.undo.add(func() error { o.s.Cleanup(true); return nil }) // as the worker: registered before Download
	return o.s.Download(ctx, sess)
}

func (o *officialSession) close() error { return o.undo.run() }

// benchSession is the session the worker would have fetched: one
// read_write memory_store resource mounted at dir.
func benchSession(storeID, dir string) (*anthropic.BetaManagedAgentsSession, error) {
	now := time.Now().UTC().Format(time.RFC3339)
	raw := map[string]any{
		"id": "sesn_bench", "type": "session", "agent": nil, "archived_at": nil, "budget": nil,
		"created_at": now, "updated_at": now, "environment_id": "env_bench", "metadata": map[string]any{},
		"outcome_evaluations": []any{}, "stats": map[string]any{"active_seconds": 0, "duration_seconds": 0},
		"status": "running", "title": nil, "usage": map[string]any{}, "vault_ids": []any{}, "deployment_id": nil,
		"resources": []any{map[string]any{
			"type": "memory_store", "id": "sesrsc_bench", "memory_store_id": storeID, "access": "read_write",
			"name": "bench", "description": "", "instructions": nil, "mount_path": dir,
			"created_at": now, "updated_at": now,
		}},
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var s anthropic.BetaManagedAgentsSession
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if len(s.Resources) != 1 || s.Resources[0].AsMemoryStore().MountPath != dir {
		return nil, errors.New("the bench session did not decode its memory_store resource")
	}
	return &s, nil
}

// reqCounter counts the requests reaching the server, per client and kind.
type reqCounter struct {
	mu        sync.Mutex
	counts    map[string]map[string]int // client -> kind -> requests
	totals    map[string]int            // client -> requests
	lastWrite map[string]time.Time      // client -> arrival of its latest POST or DELETE of a memory
}

func newReqCounter() *reqCounter {
	return &reqCounter{counts: map[string]map[string]int{}, totals: map[string]int{}, lastWrite: map[string]time.Time{}}
}

// total is how many requests who has sent.
func (c *reqCounter) total(who string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.totals[who]
}

// lastWriteAt is when who's latest memory write reached the server.
func (c *reqCounter) lastWriteAt(who string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastWrite[who]
}

func (c *reqCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := r.Header.Get("X-Bench-Client")
		if who == "" {
			who = r.Header.Get("User-Agent")
		}
		kind := requestKind(r)
		now := time.Now()
		c.mu.Lock()
		c.totals[who]++
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/memories") {
			c.lastWrite[who] = now
		}
		m := c.counts[who]
		if m == nil {
			m = map[string]int{}
			c.counts[who] = m
		}
		m[kind]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// snapshot returns a copy of one client's counts.
func (c *reqCounter) snapshot(who string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts[who] {
		out[k] = v
	}
	return out
}

// requestKind is "METHOD route", ids elided, with the view of a listing
// and whether a change-feed read waits.
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// v1 memory_stores {id} [memories [{id}] | changes | ...]
	if len(parts) >= 3 && parts[1] == "memory_stores" {
		parts[2] = "{store}"
	}
	if len(parts) >= 5 && parts[3] == "memories" {
		parts[4] = "{memory}"
	}
	k := r.Method + " /" + strings.Join(parts, "/")
	q := r.URL.Query()
	switch {
	case len(parts) == 4 && parts[3] == "memories" && r.Method == http.MethodGet:
		view := q.Get("view")
		if view == "" {
			view = "basic"
		}
		k += "?view=" + view + "&limit=" + q.Get("limit")
		if q.Get("page") == "" {
			k += " (first page)"
		} else {
			k += " (next page)"
		}
	case len(parts) == 4 && parts[3] == "changes":
		if q.Get("wait_ms") != "" {
			k += " (long poll " + q.Get("wait_ms") + " ms)"
		} else {
			k += " (no wait)"
		}
	}
	return k
}

// diffCounts is after − before, and its total.
func diffCounts(before, after map[string]int) (map[string]int, int) {
	d := map[string]int{}
	total := 0
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
			total += n
		}
	}
	return d, total
}

// countsText formats counts as "kind ×n; …", most frequent first.
func countsText(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var xs []kv
	for k, v := range m {
		xs = append(xs, kv{k, v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("`%s` ×%d", x.k, x.v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// runS wraps an S measure: it runs it on an in-process server of its own
// (closed afterwards), and afterwards nothing of ours may stay mounted.
func runS(id string, fn func(ctx context.Context, cfg config, env *sEnv) ([]row, error)) func(ctx context.Context, cfg config) ([]row, error) {
	return func(ctx context.Context, cfg config) (rows []row, err error) {
		defer func() {
			if lerr := sCheckNoLeftovers(); lerr != nil && err == nil {
				err = lerr
			}
			if stopping.Load() {
				fmt.Fprintf(os.Stderr, "bench: %s interrupted (%v); torn down\n", id, err)
				os.Exit(130)
			}
		}()
		env, err := newSEnv(ctx)
		if err != nil {
			return nil, err
		}
		defer func() {
			if cerr := env.close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		return fn(ctx, cfg, env)
	}
}

// sCheckNoLeftovers reports any memfs mount of ours still in /proc/self/mountinfo.
func sCheckNoLeftovers() error {
	mounts, err := fs.Mounts()
	if err != nil {
		return err
	}
	var left []string
	for _, m := range mounts {
		if strings.Contains(m.Dir, sTempPfx) {
			left = append(left, m.Dir+" ("+m.FSType+")")
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("mounts left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// percentile is the nearest-rank p-th percentile of xs (p in [0, 100];
// 0 gives the minimum).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// secs formats a duration in seconds as "1.234 s".
func secs(x float64) string { return fmt.Sprintf("%.3f s", x) }

// goalAtMost is "≤ g× ref: met|**missed**".
func goalAtMost(ratio, g float64, ref string) string {
	verdict := "**missed**"
	if ratio <= g {
		verdict = "met"
	}
	return fmt.Sprintf("≤ %.1f× %s: %s", g, ref, verdict)
}

// ratioUp prints a ratio rounded up to two decimals, so that 0.501 shows
// as 0.51× next to a ≤ 0.5× "missed", never as 0.50×.
func ratioUp(x float64) string { return fmt.Sprintf("%.2f×", math.Ceil(x*100)/100) }

// sleepOrStop sleeps d unless the run is interrupted or ctx ends.
func sleepOrStop(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case <-tick.C:
			if stopping.Load() {
				return errInterrupted
			}
		}
	}
}
