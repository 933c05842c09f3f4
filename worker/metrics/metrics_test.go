package metrics

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// sample finds the series of name whose labels include want; nil if none.
func sample(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value; it fails the test if absent.
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := sample(t, reg, name, labels)
	switch {
	case m == nil:
		t.Fatalf("%s%v: absent", name, labels)
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}

func newTestMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{WorkItems: true})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestStoreMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	const id = "memstore_a"
	s := m.Store(id)
	id1 := map[string]string{"store_id": id}
	with := func(k, v string) map[string]string { return map[string]string{"store_id": id, k: v} }

	// Before Watch: counters exist, levels don't.
	if sample(t, reg, "memfs_sync_pending_uploads", id1) != nil {
		t.Error("levels reported before the store was mounted")
	}
	s.ObserveOp(fs.OpLookup, time.Millisecond, 0)
	s.ObserveOp(fs.OpLookup, 2*time.Millisecond, syscall.ENOENT)
	s.ObserveOp(fs.OpWrite, time.Microsecond, 0)
	s.ObserveOp(fs.NumOps, time.Microsecond, 0) // out of range: ignored
	s.PassDone(syncqueue.PassInfo{Duration: 3 * time.Second, Clean: true, Result: syncqueue.SyncResult{Uploaded: 2, Deleted: 1}}, nil)
	s.PassDone(syncqueue.PassInfo{Duration: time.Millisecond, Clean: true}, nil)
	s.PassDone(syncqueue.PassInfo{Duration: time.Millisecond, Clean: false, Result: syncqueue.SyncResult{Failed: 2}},
		map[string]int{syncqueue.ReasonCap: 1, syncqueue.ReasonNotUTF8: 2, "a reason nobody mapped": 1})
	s.RemoteApplied()
	s.ConflictKept()
	s.ConflictKept()

	lookup := sample(t, reg, "memfs_fuse_operation_duration_seconds", with("op", "lookup"))
	if lookup == nil || lookup.Histogram.GetSampleCount() != 2 || lookup.Histogram.GetSampleSum() < 0.003-1e-9 {
		t.Errorf("lookup histogram: %v", lookup)
	}
	if v := value(t, reg, "memfs_fuse_operation_errors_total", with("op", "lookup")); v != 1 {
		t.Errorf("lookup errors = %v, want 1", v)
	}
	if v := value(t, reg, "memfs_fuse_operation_errors_total", with("op", "write")); v != 0 {
		t.Errorf("write errors = %v, want 0", v)
	}
	if sample(t, reg, "memfs_fuse_operation_duration_seconds", with("op", "read")) != nil {
		t.Error("an op the mount never served has a series")
	}
	passes := sample(t, reg, "memfs_sync_pass_duration_seconds", id1)
	if passes == nil || passes.Histogram.GetSampleCount() != 3 {
		t.Errorf("pass histogram: %v", passes)
	}
	for outcome, want := range map[string]float64{"synced": 1, "idle": 1, "failed": 1} {
		if v := value(t, reg, "memfs_sync_passes_total", with("outcome", outcome)); v != want {
			t.Errorf("passes %s = %v, want %v", outcome, v, want)
		}
	}
	for name, want := range map[string]float64{"memfs_sync_uploads_total": 2, "memfs_sync_deletes_total": 1,
		"memfs_sync_remote_changes_applied_total": 1, "memfs_sync_conflicts_total": 2} {
		if v := value(t, reg, name, id1); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for reason, want := range map[string]float64{"cap": 1, "not_utf8": 2, "other": 1} {
		if v := value(t, reg, "memfs_sync_upload_failures_total", with("reason", reason)); v != want {
			t.Errorf("failures %s = %v, want %v", reason, v, want)
		}
	}

	// Levels, from Status at scrape time.
	last := time.Unix(1_700_000_000, 500_000_000)
	st := syncqueue.Status{StoreID: id, JournalBytes: 4096, LastSync: &last, Unreachable: true, Pending: []syncqueue.PendingChange{
		{Path: "/a", Op: "create", Reason: syncqueue.ReasonUnreachable},
		{Path: "/b", Op: "update", Reason: syncqueue.ReasonNotUTF8},
		{Path: "/c", Op: "unjournaled", Reason: syncqueue.ReasonNoSpace},
		{Path: "/d", Op: "delete", Reason: syncqueue.ReasonDeleteDelay},
	}}
	scrapes := 0
	s.Watch(func() syncqueue.Status { scrapes++; return st })
	for name, want := range map[string]float64{"memfs_sync_pending_uploads": 3, "memfs_sync_pending_deletes": 1,
		"memfs_journal_bytes": 4096, "memfs_sync_last_success_timestamp_seconds": 1_700_000_000.5, "memfs_sync_store_unreachable": 1} {
		if v := value(t, reg, name, id1); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for reason, want := range map[string]float64{"unreachable": 1, "not_utf8": 1, "no_space": 1, "delete_delay": 1, "cap": 0, "path_conflict": 0} {
		if v := value(t, reg, "memfs_sync_pending_changes", with("reason", reason)); v != want {
			t.Errorf("pending %s = %v, want %v", reason, v, want)
		}
	}
	if scrapes == 0 {
		t.Error("levels were not read from the status function")
	}
	// No successful sync yet: the timestamp is absent, not 0.
	st.LastSync = nil
	if sample(t, reg, "memfs_sync_last_success_timestamp_seconds", id1) != nil {
		t.Error("a last-sync timestamp without a successful sync")
	}

	// Covers: 0 from the start, then what the watch says.
	if v := value(t, reg, "memfs_mount_covers", id1); v != 0 {
		t.Errorf("memfs_mount_covers = %v before any cover, want 0", v)
	}
	s.Covered(2)
	if v := value(t, reg, "memfs_mount_covers", id1); v != 2 {
		t.Errorf("memfs_mount_covers = %v, want 2", v)
	}

	// Another store's series are its own; Done drops only this store's.
	other := m.Store("memstore_b")
	other.ObserveOp(fs.OpRead, time.Millisecond, 0)
	s.Done()
	s.ObserveOp(fs.OpRead, time.Millisecond, 0) // after Done: no series comes back
	s.Covered(1)
	s.PassDone(syncqueue.PassInfo{Clean: true}, map[string]int{syncqueue.ReasonCap: 1})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if lp.GetName() == "store_id" && lp.GetValue() == id {
					t.Errorf("after Done: %s still has a series of %s", mf.GetName(), id)
				}
			}
		}
	}
	if sample(t, reg, "memfs_fuse_operation_duration_seconds", map[string]string{"store_id": "memstore_b", "op": "read"}) == nil {
		t.Error("Done of one store dropped another's series")
	}
}

// TestModeMetrics: each mounted store says its mode, once mounted; a
// directory's stats are read at each scrape; files never uploaded are
// counted apart from the uploads that wait.
func TestModeMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	dir, fuse := m.Store("memstore_d"), m.Store("memstore_f")
	d1, f1 := map[string]string{"store_id": "memstore_d"}, map[string]string{"store_id": "memstore_f"}
	mode := func(id, mode string) map[string]string { return map[string]string{"store_id": id, "mode": mode} }
	st := syncqueue.Status{Pending: []syncqueue.PendingChange{
		{Path: "/a", Op: "create", Reason: syncqueue.ReasonWaiting},
		{Path: "/link", Op: syncqueue.OpNotUploaded, Reason: "a symbolic link: never followed or uploaded"},
		{Path: "/big", Op: syncqueue.OpNotUploaded, Reason: "larger than a memory may be"},
	}, NotUploaded: 2}
	dir.Watch(func() syncqueue.Status { return st })
	fuse.Watch(func() syncqueue.Status { return syncqueue.Status{} })
	if sample(t, reg, "memfs_mount_mode", d1) != nil {
		t.Error("a mode before the mount said it")
	}
	stats := dirmode.Stats{Looks: 7, LastLookMs: 2.5, Overflows: 1, Restored: 3, Redownloads: 2, MarkerProblem: "missing", Watching: true}
	scrapes := 0
	dir.Shown(worker.ModeDirectory, func() dirmode.Stats { scrapes++; return stats })
	fuse.Shown(worker.ModeFUSE, nil)

	if v := value(t, reg, "memfs_mount_mode", mode("memstore_d", "directory")); v != 1 {
		t.Errorf("memfs_mount_mode{directory} = %v, want 1", v)
	}
	if v := value(t, reg, "memfs_mount_mode", mode("memstore_f", "fuse")); v != 1 {
		t.Errorf("memfs_mount_mode{fuse} = %v, want 1", v)
	}
	if sample(t, reg, "memfs_mount_mode", mode("memstore_d", "fuse")) != nil || sample(t, reg, "memfs_mount_mode", mode("memstore_f", "directory")) != nil {
		t.Error("a store has a series for a mode it is not in")
	}
	for name, want := range map[string]float64{"memfs_directory_looks_total": 7, "memfs_directory_last_look_duration_seconds": 0.0025,
		"memfs_directory_watch_overflows_total": 1, "memfs_directory_read_only_restores_total": 3, "memfs_directory_redownloads_total": 2,
		"memfs_directory_marker_problem": 1, "memfs_directory_watching": 1, "memfs_sync_not_uploaded": 2, "memfs_sync_pending_uploads": 1} {
		if v := value(t, reg, name, d1); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
		if strings.HasPrefix(name, "memfs_directory_") && sample(t, reg, name, f1) != nil {
			t.Errorf("the FUSE mount has %s", name)
		}
	}
	if v := value(t, reg, "memfs_sync_pending_changes", map[string]string{"store_id": "memstore_d", "reason": "other"}); v != 0 {
		t.Errorf("the files never uploaded counted as pending changes of reason other: %v", v)
	}
	stats.MarkerProblem, stats.Watching, stats.Looks = "", false, 8
	for name, want := range map[string]float64{"memfs_directory_marker_problem": 0, "memfs_directory_watching": 0, "memfs_directory_looks_total": 8} {
		if v := value(t, reg, name, d1); v != want {
			t.Errorf("%s = %v after a change, want %v", name, v, want)
		}
	}
	if scrapes == 0 {
		t.Error("the directory's stats were not read")
	}
	dir.Done()
	if sample(t, reg, "memfs_mount_mode", d1) != nil || sample(t, reg, "memfs_directory_looks_total", d1) != nil {
		t.Error("after Done the directory's mode or stats are still exported")
	}
}

func TestWorkerMetrics(t *testing.T) {
	m, reg := newTestMetrics(t)
	m.Claimed()
	m.Claimed()
	m.HeartbeatFailed()
	m.Ended(worker.EndClean, nil)
	m.Ended(worker.EndLeaseLost, nil)
	m.Ended(worker.EndShutdown, nil)
	m.Ended(worker.EndShutdown, errors.New("no token"))
	m.Ended(worker.EndShutdown, errors.New("mount failed"))
	if v := value(t, reg, "memfs_worker_work_items_claimed_total", nil); v != 2 {
		t.Errorf("claimed = %v", v)
	}
	if v := value(t, reg, "memfs_worker_heartbeat_failures_total", nil); v != 1 {
		t.Errorf("heartbeat failures = %v", v)
	}
	for ending, want := range map[string]float64{"clean": 1, "lease_lost": 1, "shutdown": 1, "failed": 2} {
		if v := value(t, reg, "memfs_worker_work_items_ended_total", map[string]string{"ending": ending}); v != want {
			t.Errorf("ended %s = %v, want %v", ending, v, want)
		}
	}
}

// Every reason the engine gives has a label of its own.
func TestReasonLabels(t *testing.T) {
	reasons := []string{syncqueue.ReasonWaiting, syncqueue.ReasonDeleteDelay, syncqueue.ReasonUnreachable, syncqueue.ReasonNoSpace,
		syncqueue.ReasonCap, syncqueue.ReasonNotUTF8, syncqueue.ReasonPath, syncqueue.ReasonRefused, syncqueue.ReasonCredential,
		syncqueue.ReasonConflict, syncqueue.ReasonScratch,
		syncqueue.ReasonJournalIO + " (EIO)", syncqueue.ReasonJournal}
	seen := map[string]string{}
	for _, r := range reasons {
		l := reasonLabel(r)
		if l == "other" {
			t.Errorf("reason %q has no label", r)
		}
		if prev, dup := seen[l]; dup {
			t.Errorf("reasons %q and %q share the label %q", prev, r, l)
		}
		seen[l] = r
	}
	if len(reasonLabels) != len(reasons) {
		t.Errorf("reasonLabels has %d entries, the engine %d reasons: update this test or the table", len(reasonLabels), len(reasons))
	}
}

// Two processes' worth of registration on one registry is refused, not
// silently merged (memfs up registers serve's metrics and these on one).
func TestNewTwiceOnOneRegistry(t *testing.T) {
	_, reg := newTestMetrics(t)
	if _, err := New(reg, Options{WorkItems: true}); err == nil {
		t.Error("registering the metrics twice on one registry succeeded")
	}
}

// BenchmarkObserveOp is the cost of one FUSE request's observation.
func BenchmarkObserveOp(b *testing.B) {
	m, err := New(prometheus.NewRegistry(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	s := m.Store("memstore_bench")
	s.ObserveOp(fs.OpRead, time.Microsecond, 0)
	b.ReportAllocs()
	for b.Loop() {
		s.ObserveOp(fs.OpRead, 30*time.Microsecond, 0)
	}
}

// Without WorkItems (memfs mount) the work-item series are not exported;
// the mounts' are.
func TestNewWithoutWorkItems(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.Claimed()
	m.Ended(worker.EndClean, nil)
	m.Store("memstore_a").ObserveOp(fs.OpRead, time.Millisecond, 0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if strings.HasPrefix(mf.GetName(), "memfs_worker_") {
			t.Errorf("a registry without work items exports %s", mf.GetName())
		}
	}
	if !slices.Contains(names, "memfs_fuse_operation_duration_seconds") {
		t.Errorf("the mounts' series are missing: %v", names)
	}
}

// Every reason label, "other" included, is documented in docs/operating.md's
// metrics section.
func TestReasonLabelsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "### Metrics")
	end := strings.Index(readme[max(start, 0):], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/operating.md has no metrics section")
	}
	section := readme[start : start+end]
	for _, l := range reasonOrder {
		doc := "`" + l + "`"
		if l == "other" {
			doc = "`reason=\"other\"`" // `other` alone is also an HTTP method's label
		}
		if !strings.Contains(section, doc) {
			t.Errorf("the reason label %q is not documented in the metrics section of docs/operating.md (%s)", l, doc)
		}
	}
}
