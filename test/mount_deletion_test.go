package test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

// TestMountDeletionModes: --memory-sync-deletions and the guards that keep
// a local accident from emptying a store; in both modes.
func TestMountDeletionModes(t *testing.T) { mtInModes(t, testMountDeletionModes) }

func testMountDeletionModes(t *testing.T, mode string) {
	mtRequireMode(t, mode)
	three := map[string]string{"/a.md": "a\n", "/b.md": "b\n", "/d/c.md": "c\n"}
	withoutA := map[string]string{"/b.md": "b\n", "/d/c.md": "c\n"}

	t.Run("enabled", func(t *testing.T) {
		e := newMtEnvIn(t, mode, three)
		m := e.mount("--memory-sync-deletions", "enabled", "--memory-sync-delete-delay", mtDeleteDelay)
		mtMustSh(t, m.Dir, "rm a.md")
		// Even with the delay long past, the pass that first sees a
		// delete does not send it: a later pass must confirm it.
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 1})
		if got := e.contents(); !maps.Equal(got, three) {
			t.Fatalf("the delete was sent by the pass that first saw it:\n%s", mtDiff(got, three))
		}
		e.checkSynced(m, withoutA, true)
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 1, "left": 0})
		e.waitStore(withoutA)
		mtStop(t, m)
	})

	t.Run("enabled waits for the delay", func(t *testing.T) {
		e := newMtEnvIn(t, mode, three)
		m := e.mount("--memory-sync-delete-delay", "1h")
		mtMustSh(t, m.Dir, "rm a.md")
		for range 3 {
			mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 1})
		}
		if got := e.contents(); !maps.Equal(got, three) {
			t.Fatalf("a delete was sent before its delay:\n%s", mtDiff(got, three))
		}
		e.checkSynced(m, withoutA, true)
		// Ctrl-C of memfs mount is a clean end: the final sync sends the
		// pending delete without the wait.
		mtStop(t, m)
		e.waitStore(withoutA)
	})

	t.Run("log_only", func(t *testing.T) {
		e := newMtEnvIn(t, mode, three)
		m := e.mount("--memory-sync-deletions", "log_only", "--memory-sync-delete-delay", mtDeleteDelay)
		mtMustSh(t, m.Dir, "rm a.md")
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 1})
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 0})
		m.WaitOutput(1, "would delete memory /a.md", mtPollTimeout)
		if got := e.contents(); !maps.Equal(got, three) {
			t.Errorf("log_only deleted in the store:\n%s", mtDiff(got, three))
		}
		if got := mtMountFiles(t, m.Dir); !maps.Equal(got, withoutA) {
			t.Errorf("the mount after log_only:\n%s", mtDiff(got, withoutA))
		}
		mtStop(t, m)
		if got := e.contents(); !maps.Equal(got, three) {
			t.Errorf("log_only deleted in the store at the end:\n%s", mtDiff(got, three))
		}
	})

	t.Run("disabled", func(t *testing.T) {
		e := newMtEnvIn(t, mode, three)
		m := e.mount("--memory-sync-deletions", "disabled", "--memory-sync-delete-delay", mtDeleteDelay)
		mtMustSh(t, m.Dir, "rm a.md")
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 1})
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 0})
		if got := mtMountFiles(t, m.Dir); !maps.Equal(got, withoutA) {
			t.Errorf("the file came back on the mount:\n%s", mtDiff(got, withoutA))
		}
		mtStop(t, m)
		if got := e.contents(); !maps.Equal(got, three) {
			t.Errorf("disabled deleted in the store:\n%s", mtDiff(got, three))
		}
		if strings.Contains(m.Output(), "would delete") {
			t.Errorf("disabled logged a would-be delete:\n%s", m.Output())
		}
	})

	t.Run("per-pass cap", func(t *testing.T) {
		files := map[string]string{}
		for i := range 40 {
			files[fmt.Sprintf("/n/%02d.md", i)] = fmt.Sprintf("note %d\n", i)
		}
		e := newMtEnvIn(t, mode, files)
		m := e.mount("--memory-sync-delete-delay", mtDeleteDelay)
		mtMustSh(t, m.Dir, "find n -type f ! -name 00.md -exec rm {} +")
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "left": 39})
		if n := len(e.contents()); n != 40 {
			t.Fatalf("the store holds %d memories after the first pass, want 40", n)
		}
		// 40 memories: at most max(40/4, 8) = 10 deletes in one pass.
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 10, "left": 29})
		mtCheckPass(t, m.WaitOutput(1, "held back by the per-pass cap", mtPollTimeout), map[string]int{"held_back": 29})
		if n := len(e.contents()); n != 30 {
			t.Fatalf("the store holds %d memories after the second pass, want 30", n)
		}
		// The rest follow on later passes, each within the cap.
		for pass := 0; len(e.contents()) > 1; pass++ {
			if pass == 10 {
				t.Fatalf("the deletes did not finish in 10 more passes: %d memories left", len(e.contents()))
			}
			n := len(e.contents())
			c := mtPassCounts(t, m.SyncNow(mtPassTimeout))
			if limit := min(max(n/4, 8), 50); c["deleted"] == 0 || c["deleted"] > limit {
				t.Fatalf("a pass over %d memories deleted %d (cap %d)", n, c["deleted"], limit)
			}
		}
		e.waitStore(map[string]string{"/n/00.md": "note 0\n"})
		mtStop(t, m)
	})

	t.Run("whole store emptied", func(t *testing.T) {
		e := newMtEnvIn(t, mode, three)
		m := e.mount("--memory-sync-delete-delay", mtDeleteDelay)
		mtMustSh(t, m.Dir, "rm -r ./*")
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0})
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0})
		m.WaitOutput(1, "every file of the store disappeared at once", mtPollTimeout)
		if got := e.contents(); !maps.Equal(got, three) {
			t.Fatalf("a store emptied at once lost memories:\n%s", mtDiff(got, three))
		}
		// The files come back on the mount from the store.
		for deadline := time.Now().Add(mtPollTimeout); ; {
			got := mtMountFiles(t, m.Dir)
			if maps.Equal(got, three) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the files were not restored on the mount:\n%s", mtDiff(got, three))
			}
			time.Sleep(20 * time.Millisecond) // poll interval
		}
		// Not at the clean end either.
		mtStop(t, m)
		if got := e.contents(); !maps.Equal(got, three) {
			t.Errorf("the final sync emptied the store:\n%s", mtDiff(got, three))
		}
	})
}
