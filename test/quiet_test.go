package test

import (
	"strings"
	"testing"
)

// TestMountQuietPassUploadsBeforeTheInterval: on a real mount with a 60 s
// interval and a 200 ms quiet period, an edit made in a shell reaches the
// store by a pass the quiet trigger started, with no SIGUSR1: the store is
// polled for at most mtPollTimeout (20 s), a third of the interval, and the
// pass's log line names its trigger. That a burst costs one pass, that a
// file closed continuously goes up at the interval and that a failing
// store is tried once per interval depend on timing: the unit tests
// (syncqueue/schedule_test.go) check them in virtual time.
func TestMountQuietPassUploadsBeforeTheInterval(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/keep.md": "keep\n"})
	m := e.mount("--memory-sync-quiet", "200ms")

	mtMustSh(t, m.Dir, "echo first > notes.md")
	e.waitStore(map[string]string{"/keep.md": "keep\n", "/notes.md": "first\n"})
	line := m.WaitOutput(1, "sync pass", mtPollTimeout)
	if !strings.Contains(line, "trigger=quiet") {
		t.Fatalf("the pass that uploaded the edit: %q, want trigger=quiet", line)
	}
	mtCheckPass(t, line, map[string]int{"uploaded": 1, "failed": 0, "left": 0})

	// A second edit goes up the same way: the trigger re-arms after a pass.
	mtMustSh(t, m.Dir, "echo second >> notes.md")
	e.waitStore(map[string]string{"/keep.md": "keep\n", "/notes.md": "first\nsecond\n"})
	line = m.WaitOutput(2, "sync pass", mtPollTimeout)
	if !strings.Contains(line, "trigger=quiet") {
		t.Fatalf("the pass that uploaded the second edit: %q, want trigger=quiet", line)
	}
	if n := len(m.Lines("sync pass on SIGUSR1")); n != 0 {
		t.Fatalf("%d SIGUSR1 passes in a test that sent none", n)
	}
	mtStop(t, m)
}
