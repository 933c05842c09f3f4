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
