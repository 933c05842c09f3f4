package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

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
	for _, d := range []*prometheus.Desc{pendingUploadsDesc, pendingDeletesDesc, pendingChangesDesc, journalBytesDesc, lastSyncDesc, unreachableDesc} {
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
	}
}

func collectStatus(ch chan<- prometheus.Metric, id string, st syncqueue.Status) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{id}, labels...)...)
	}
	byReason := make(map[string]int, len(reasonOrder))
	uploads, deletes := 0, 0
	for _, p := range st.Pending {
		if p.Op == "delete" {
			deletes++
		} else {
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
	down := 0.0
	if st.Unreachable {
		down = 1
	}
	gauge(unreachableDesc, down)
}
