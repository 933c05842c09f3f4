package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/syncqueue"
)

// The levels of each mounted store, read from its engine's Status at
// every scrape.
var (
	pendingUploadsDesc = prometheus.NewDesc("memfs_sync_pending_uploads",
		"Local changes (creates, edits, moves) not yet in the store.", []string{"store_id"}, nil)
	pendingDeletesDesc = prometheus.NewDesc("memfs_sync_pending_deletes",
		"Local deletes not yet sent to the store.", []string{"store_id"}, nil)
	pendingChangesDesc = prometheus.NewDesc("memfs_sync_pending_changes",
		"Pending changes (uploads and deletes) by the reason each waits; every reason is always present.",
		[]string{"store_id", "reason"}, nil)
	journalBytesDesc = prometheus.NewDesc("memfs_journal_bytes",
		"Size of the store's journal file.", []string{"store_id"}, nil)
	lastSyncDesc = prometheus.NewDesc("memfs_sync_last_success_timestamp_seconds",
		"Start of the last sync pass that left nothing failed (unix seconds); absent until the mount's first one.",
		[]string{"store_id"}, nil)
	unreachableDesc = prometheus.NewDesc("memfs_sync_store_unreachable",
		"1 while the store does not answer this mount (an outage), else 0.", []string{"store_id"}, nil)
	notUploadedDesc = prometheus.NewDesc("memfs_sync_not_uploaded",
		"Files the mount keeps and never uploads (a directory's symbolic links, FIFOs, hard links, names no memory can have, files over a memory's size): memfs status lists each with its reason.",
		[]string{"store_id"}, nil)
)

// What each mounted store is shown as, and what a directory's watch and
// looks have done (dirmode.Stats), read at every scrape.
var (
	modeDesc = prometheus.NewDesc("memfs_mount_mode",
		"1 for the mode the store is shown in: fuse (a FUSE mount) or directory (plain files in its mount path, watched).",
		[]string{"store_id", "mode"}, nil)
	dirLooksDesc = prometheus.NewDesc("memfs_directory_looks_total",
		"Looks at the store's folder (directory mode): for an inotify event, a rescan, a sync.", []string{"store_id"}, nil)
	dirLastLookDesc = prometheus.NewDesc("memfs_directory_last_look_duration_seconds",
		"How long the last look at the store's folder took (directory mode).", []string{"store_id"}, nil)
	dirOverflowsDesc = prometheus.NewDesc("memfs_directory_watch_overflows_total",
		"Times the folder's inotify queue overflowed (directory mode): events were lost and the whole folder looked at.", []string{"store_id"}, nil)
	dirRestoredDesc = prometheus.NewDesc("memfs_directory_read_only_restores_total",
		"Files of a read-only store changed, moved, removed or added in its folder, and put back as the store holds them (directory mode).", []string{"store_id"}, nil)
	dirRedownloadsDesc = prometheus.NewDesc("memfs_directory_redownloads_total",
		"Times the store's folder was removed or replaced and the store downloaded into it again (directory mode).", []string{"store_id"}, nil)
	dirMarkerDesc = prometheus.NewDesc("memfs_directory_marker_problem",
		"1 while the folder's marker file is missing or altered (directory mode: no change is taken from the folder meanwhile), else 0.", []string{"store_id"}, nil)
	dirWatchingDesc = prometheus.NewDesc("memfs_directory_watching",
		"1 while inotify watches the folder, 0 when its changes are found by the rescan alone (directory mode).", []string{"store_id"}, nil)
)

// reasonOrder is every reason label, in a fixed order.
var reasonOrder = func() []string {
	out := make([]string, 0, len(reasonLabels)+1)
	for _, l := range reasonLabels {
		out = append(out, l)
	}
	out = append(out, "other")
	sort.Strings(out)
	return out
}()

// levels is the prometheus.Collector of the stores' levels.
type levels struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (levels) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pendingUploadsDesc, pendingDeletesDesc, pendingChangesDesc, journalBytesDesc, lastSyncDesc, unreachableDesc,
		notUploadedDesc, modeDesc, dirLooksDesc, dirLastLookDesc, dirOverflowsDesc, dirRestoredDesc, dirRedownloadsDesc, dirMarkerDesc, dirWatchingDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Status per mounted store.
func (l levels) Collect(ch chan<- prometheus.Metric) {
	for _, s := range l.m.mounted() {
		status := s.statusFunc()
		if status == nil {
			continue // not mounted yet, or gone
		}
		collectStatus(ch, s.id, status())
		if mode, folder := s.shown(); mode != "" {
			collectMode(ch, s.id, mode, folder)
		}
	}
}

// collectMode reports the store's mode and, for a directory, its stats.
func collectMode(ch chan<- prometheus.Metric, id, mode string, folder func() dirmode.Stats) {
	ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, 1, id, mode)
	if folder == nil {
		return
	}
	st := folder()
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		ch <- prometheus.MustNewConstMetric(d, t, v, id)
	}
	metric(dirLooksDesc, prometheus.CounterValue, float64(st.Looks))
	metric(dirLastLookDesc, prometheus.GaugeValue, st.LastLookMs/1000)
	metric(dirOverflowsDesc, prometheus.CounterValue, float64(st.Overflows))
	metric(dirRestoredDesc, prometheus.CounterValue, float64(st.Restored))
	metric(dirRedownloadsDesc, prometheus.CounterValue, float64(st.Redownloads))
	metric(dirMarkerDesc, prometheus.GaugeValue, bit(st.MarkerProblem != ""))
	metric(dirWatchingDesc, prometheus.GaugeValue, bit(st.Watching))
}

// bit is 1 for true, 0 for false.
func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func collectStatus(ch chan<- prometheus.Metric, id string, st syncqueue.Status) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{id}, labels...)...)
	}
	byReason := make(map[string]int, len(reasonOrder))
	uploads, deletes := 0, 0
	for _, p := range st.Pending {
		switch p.Op {
		case syncqueue.OpNotUploaded:
			continue // no upload waits: memfs_sync_not_uploaded
		case "delete":
			deletes++
		default:
			uploads++ // create, update, move, unjournaled
		}
		byReason[reasonLabel(p.Reason)]++
	}
	gauge(pendingUploadsDesc, float64(uploads))
	gauge(pendingDeletesDesc, float64(deletes))
	for _, r := range reasonOrder {
		gauge(pendingChangesDesc, float64(byReason[r]), r)
	}
	gauge(journalBytesDesc, float64(st.JournalBytes))
	if st.LastSync != nil {
		gauge(lastSyncDesc, float64(st.LastSync.UnixNano())/1e9)
	}
	gauge(unreachableDesc, bit(st.Unreachable))
	gauge(notUploadedDesc, float64(st.NotUploaded))
}
