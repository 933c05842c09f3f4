// Package metrics exports what the mounts and the worker of one process
// do as Prometheus metrics (docs/operating.md, "Metrics", lists them).
//
// It lives below worker because it implements worker.Metrics: the
// packages that do the work (fs, syncqueue, worker) define small observer
// interfaces and import no metrics library; this package alone turns
// their events into Prometheus series, and cmd/memfs registers it on the
// process's own registry. The store service's request metrics sit with
// the access log in store/server, which already knows each request's
// route.
//
// Events are counted as they happen (a FUSE request, a sync pass, a
// conflict); levels — pending changes, journal bytes, the last successful
// sync — are read from each engine's Status when /metrics is scraped
// (levels.go), so they are never stale and cost nothing between scrapes.
//
// Cardinality: every per-store series carries store_id, and a store's
// series exist only while it is mounted (a worker mounts each store once
// at a time): they are dropped when its mount ends. The other labels take
// fixed sets of values (FUSE ops, pass outcomes, the engine's reasons,
// the worker's endings).
//
// Cost on the FUSE path: a request's histogram and error counter are
// looked up once per store and op, then observed with atomic adds, no
// allocation (BenchmarkObserveOp).
package metrics

import (
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// Buckets of the FUSE latency histogram, in seconds: from a cached
// getattr (tens of microseconds) to a close that waits for the journal's
// fdatasync.
var fuseBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// Buckets of the sync pass histogram, in seconds: an idle pass takes
// microseconds; a pass is cut off at the final sync's 30 s.
var passBuckets = []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Metrics implements worker.Metrics. Lifecycle: New registers it; it
// lives as long as the process.
type Metrics struct {
	fuseSeconds *prometheus.HistogramVec // store_id, op
	fuseErrors  *prometheus.CounterVec   // store_id, op
	passSeconds *prometheus.HistogramVec // store_id
	passes      *prometheus.CounterVec   // store_id, outcome
	uploads     *prometheus.CounterVec   // store_id
	deletes     *prometheus.CounterVec   // store_id
	failures    *prometheus.CounterVec   // store_id, reason
	conflicts   *prometheus.CounterVec   // store_id
	remote      *prometheus.CounterVec   // store_id
	covers      *prometheus.GaugeVec     // store_id
	claimed     prometheus.Counter
	ended       *prometheus.CounterVec // ending
	heartbeats  prometheus.Counter

	mu     sync.Mutex
	stores map[string]*Store // mounted stores by id; GUARDED_BY(mu)
}

var _ worker.Metrics = (*Metrics)(nil)

// Options configure New.
type Options struct {
	// WorkItems also registers the work-item series (memfs_worker_*:
	// claims, endings, heartbeat failures), for the commands that run
	// work items (worker, session, up). Without it, as for memfs mount,
	// only the mounts' series are registered; the work-item methods still
	// count, into series nobody scrapes.
	WorkItems bool
}

// New builds the metrics and registers them on reg.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	store := []string{"store_id"}
	m := &Metrics{
		fuseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "memfs_fuse_operation_duration_seconds",
			Help: "FUSE requests answered by the mount, by kind (the _count is the number of requests).", Buckets: fuseBuckets},
			[]string{"store_id", "op"}),
		fuseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_fuse_operation_errors_total",
			Help: "FUSE requests answered with an error (ENOENT of a lookup included), by kind."}, []string{"store_id", "op"}),
		passSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "memfs_sync_pass_duration_seconds",
			Help: "How long each sync pass took.", Buckets: passBuckets}, store),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_sync_passes_total",
			Help: "Sync passes by outcome: synced (uploaded or deleted, nothing failed), idle (nothing to do), failed (something failed or conflicted)."},
			[]string{"store_id", "outcome"}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_sync_uploads_total",
			Help: "Changes uploaded to the store (creates, edits and moves)."}, store),
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_sync_deletes_total",
			Help: "Deletes sent to the store."}, store),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_sync_upload_failures_total",
			Help: "Changes a sync pass tried and left pending, by the reason they wait (once per change per pass)."},
			[]string{"store_id", "reason"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_sync_conflicts_total",
			Help: "Local versions kept in the conflict log because the store's version won."}, store),
		remote: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_sync_remote_changes_applied_total",
			Help: "Changes made elsewhere in the store and shown on the mount."}, store),
		covers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "memfs_mount_covers",
			Help: "Mounts over or inside the store's mount path (mount --bind over it, a mount on a directory in it): the agent may see files that are not the store's there. 0 normally."}, store),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "memfs_worker_work_items_claimed_total",
			Help: "Work items this worker claimed."}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_worker_work_items_ended_total",
			Help: "Work items that ended, by how: clean, shutdown, lease_lost, or failed (before the session ran, or its tool runner failed)."}, []string{"ending"}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{Name: "memfs_worker_heartbeat_failures_total",
			Help: "Work item heartbeats that failed."}),
		stores: map[string]*Store{},
	}
	cs := []prometheus.Collector{m.fuseSeconds, m.fuseErrors, m.passSeconds, m.passes, m.uploads, m.deletes,
		m.failures, m.conflicts, m.remote, m.covers, levels{m}}
	if opts.WorkItems {
		cs = append(cs, m.claimed, m.ended, m.heartbeats)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Known label values start at 0, so a rate over them is 0, not absent.
	for _, e := range []string{"clean", "shutdown", "lease_lost", "failed"} {
		m.ended.WithLabelValues(e)
	}
	return m, nil
}

// Claimed implements worker.Metrics.
func (m *Metrics) Claimed() { m.claimed.Inc() }

// HeartbeatFailed implements worker.Metrics.
func (m *Metrics) HeartbeatFailed() { m.heartbeats.Inc() }

// Ended implements worker.Metrics.
func (m *Metrics) Ended(e worker.Ending, err error) {
	m.ended.WithLabelValues(endingLabel(e, err)).Inc()
}

func endingLabel(e worker.Ending, err error) string {
	switch {
	case err != nil:
		return "failed"
	case e == worker.EndClean:
		return "clean"
	case e == worker.EndLeaseLost:
		return "lease_lost"
	}
	return "shutdown"
}

// Store implements worker.MountMetrics: the metrics of one mount of
// storeID, until Done.
func (m *Metrics) Store(storeID string) worker.StoreMetrics {
	s := &Store{m: m, id: storeID,
		passSeconds: m.passSeconds.WithLabelValues(storeID),
		uploads:     m.uploads.WithLabelValues(storeID),
		deletes:     m.deletes.WithLabelValues(storeID),
		conflicts:   m.conflicts.WithLabelValues(storeID),
		remote:      m.remote.WithLabelValues(storeID),
		failures:    map[string]prometheus.Counter{},
	}
	for _, o := range outcomes {
		s.passes[o] = m.passes.WithLabelValues(storeID, o.String())
	}
	m.covers.WithLabelValues(storeID).Set(0)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stores[storeID] = s
	return s
}

// mounted lists the stores mounted now.
func (m *Metrics) mounted() []*Store {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Store, 0, len(m.stores))
	for _, s := range m.stores {
		out = append(out, s)
	}
	return out
}

// Store is the metrics of one mounted store: it implements
// worker.StoreMetrics.
type Store struct {
	m  *Metrics
	id string

	// The store's series, looked up once; ops and failures as they first
	// occur, so that a mount shows only the kinds it served.
	passSeconds                         prometheus.Observer
	passes                              [numOutcomes]prometheus.Counter
	uploads, deletes, conflicts, remote prometheus.Counter
	ops                                 [fs.NumOps]atomic.Pointer[opSeries]

	mu       sync.Mutex
	done     bool                          // GUARDED_BY(mu)
	failures map[string]prometheus.Counter // by reason label; GUARDED_BY(mu)
	status   func() syncqueue.Status       // GUARDED_BY(mu); nil until Watch
	mode     string                        // GUARDED_BY(mu); "" until Shown
	folder   func() dirmode.Stats          // GUARDED_BY(mu); nil but for a directory
}

var _ worker.StoreMetrics = (*Store)(nil)

// opSeries are one op's series of one store.
type opSeries struct {
	seconds prometheus.Observer
	errors  prometheus.Counter
}

// ObserveOp implements fs.OpObserver.
func (s *Store) ObserveOp(op fs.Op, took time.Duration, errno syscall.Errno) {
	if op >= fs.NumOps {
		return
	}
	o := s.ops[op].Load()
	if o == nil {
		if o = s.opSeries(op); o == nil {
			return
		}
	}
	o.seconds.Observe(took.Seconds())
	if errno != 0 {
		o.errors.Inc()
	}
}

// opSeries looks op's series up the first time the store serves it.
func (s *Store) opSeries(op fs.Op) *opSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil // a request racing the end of the mount: its series are gone
	}
	if o := s.ops[op].Load(); o != nil {
		return o
	}
	o := &opSeries{seconds: s.m.fuseSeconds.WithLabelValues(s.id, op.String()), errors: s.m.fuseErrors.WithLabelValues(s.id, op.String())}
	s.ops[op].Store(o)
	return o
}

// PassDone implements syncqueue.Observer.
func (s *Store) PassDone(p syncqueue.PassInfo, waiting map[string]int) {
	s.passSeconds.Observe(p.Duration.Seconds())
	s.passes[outcomeOf(p)].Inc()
	s.uploads.Add(float64(p.Result.Uploaded))
	s.deletes.Add(float64(p.Result.Deleted))
	if len(waiting) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	for reason, n := range waiting {
		l := reasonLabel(reason)
		c, ok := s.failures[l]
		if !ok {
			c = s.m.failures.WithLabelValues(s.id, l)
			s.failures[l] = c
		}
		c.Add(float64(n))
	}
}

// RemoteApplied implements syncqueue.Observer.
func (s *Store) RemoteApplied() { s.remote.Inc() }

// ConflictKept implements syncqueue.Observer.
func (s *Store) ConflictKept() { s.conflicts.Inc() }

// Watch implements worker.StoreMetrics.
func (s *Store) Watch(status func() syncqueue.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Shown implements worker.StoreMetrics.
func (s *Store) Shown(mode string, folder func() dirmode.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode, s.folder = mode, folder
}

// Covered implements worker.StoreMetrics.
func (s *Store) Covered(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return // the watch racing the end of the mount: its series are gone
	}
	s.m.covers.WithLabelValues(s.id).Set(float64(n))
}

// Done implements worker.StoreMetrics: every series of the store is
// dropped.
func (s *Store) Done() {
	s.mu.Lock()
	s.done, s.status, s.folder = true, nil, nil
	s.mu.Unlock()
	m := s.m
	m.mu.Lock()
	if m.stores[s.id] == s {
		delete(m.stores, s.id)
	}
	m.mu.Unlock()
	l := prometheus.Labels{"store_id": s.id}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.fuseSeconds, m.fuseErrors, m.passSeconds, m.passes, m.uploads, m.deletes, m.failures, m.conflicts, m.remote, m.covers,
	} {
		v.DeletePartialMatch(l)
	}
}

// statusFunc is what Watch gave, nil before it or after Done.
func (s *Store) statusFunc() func() syncqueue.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// shown is what Shown gave: the mode ("" before it) and, for a
// directory, its stats (nil after Done).
func (s *Store) shown() (string, func() dirmode.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode, s.folder
}

// outcome is how a pass went, as memfs_sync_passes_total counts it.
type outcome int

const (
	outcomeSynced outcome = iota
	outcomeIdle
	outcomeFailed
	numOutcomes
)

var outcomes = [numOutcomes]outcome{outcomeSynced, outcomeIdle, outcomeFailed}

func (o outcome) String() string { return [...]string{"synced", "idle", "failed"}[o] }

// outcomeOf: failed when something failed (a conflict included: the
// engine does not count such a pass as a successful sync either); synced
// when it uploaded or deleted something; idle otherwise.
func outcomeOf(p syncqueue.PassInfo) outcome {
	switch {
	case !p.Clean:
		return outcomeFailed
	case p.Result.Uploaded+p.Result.Deleted > 0:
		return outcomeSynced
	}
	return outcomeIdle
}

// reasonLabels names the engine's reasons in label values.
var reasonLabels = map[string]string{
	syncqueue.ReasonWaiting:     "waiting",
	syncqueue.ReasonDeleteDelay: "delete_delay",
	syncqueue.ReasonUnreachable: "unreachable",
	syncqueue.ReasonNoSpace:     "no_space",
	syncqueue.ReasonCap:         "cap",
	syncqueue.ReasonNotUTF8:     "not_utf8",
	syncqueue.ReasonPath:        "path_conflict",
	syncqueue.ReasonRefused:     "refused",
	syncqueue.ReasonCredential:  "credential",
	syncqueue.ReasonConflict:    "conflict",
	syncqueue.ReasonJournalIO:   "journal_io", // "I/O error on the journal (EIO)", any errno
	syncqueue.ReasonJournal:     "journal",
	syncqueue.ReasonScratch:     "scratch",
}

// reasonLabel is a reason's label value; "other" for one this table
// lacks (a reason added to the engine and not here).
func reasonLabel(reason string) string {
	if l, ok := reasonLabels[reason]; ok {
		return l
	}
	if strings.HasPrefix(reason, syncqueue.ReasonJournalIO+" (") {
		return reasonLabels[syncqueue.ReasonJournalIO]
	}
	return "other"
}
