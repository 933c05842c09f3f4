package main

import (
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// An I/O error on the journal is named as such in the text form, with its
// errno, and is neither a full state dir nor an unreachable store.
func TestStatusTextJournalIOError(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	reason := syncqueue.ReasonJournalIO + " (EIO)"
	s := syncqueue.Status{StoreID: "memstore_a", JournalError: reason, Pending: []syncqueue.PendingChange{
		{Path: "/n.md", Op: "unjournaled", Reason: reason, Error: "I/O error on the journal (EIO): fdatasync /s/journal: input/output error"}}}
	rep := statusReport{Live: []worker.ProcessStatus{{PID: 1, Command: "memfs mount", Started: now,
		Mounts: []worker.MountStatus{{Dir: "/mnt/m", StoreID: "memstore_a", Access: "read_write", Sync: s}}}}}
	var b strings.Builder
	printStatus(&b, rep, now)
	out := b.String()
	for _, want := range []string{"now         I/O ERROR ON THE JOURNAL (EIO)", "unjournaled  /n.md  I/O error on the journal (EIO)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
	for _, wrong := range []string{"STATE DIR FULL", "STORE UNREACHABLE"} {
		if strings.Contains(out, wrong) {
			t.Errorf("status text says %q:\n%s", wrong, out)
		}
	}
}

// Refused and held journals are listed with their path, store and reason
// or session, in the text form as in --json.
func TestStatusTextSetAsideJournals(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	rep := statusReport{
		Refused: []worker.SetAsideJournal{{StoreID: "memstore_a", Path: "/s/stores/memstore_a/refused/1/journal",
			Reason: "written in another state dir (identity f; this one is e)", Since: now.Add(-time.Minute)}},
		Held: []worker.SetAsideJournal{{StoreID: "memstore_b", Path: "/s/stores/memstore_b/held/sesn_x/2/journal",
			Session: "sesn_x", Since: now.Add(-time.Hour)}},
	}
	var b strings.Builder
	printStatus(&b, rep, now)
	out := b.String()
	for _, want := range []string{
		"REFUSED JOURNALS", "/s/stores/memstore_a/refused/1/journal  (store memstore_a, 1m00s ago)", "written in another state dir",
		"memfs replay --trust-journal PATH",
		"HELD JOURNALS", "/s/stores/memstore_b/held/sesn_x/2/journal  (store memstore_b, written in session sesn_x",
		"waiting for session sesn_x's next run on this host, or memfs replay with an API key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}
