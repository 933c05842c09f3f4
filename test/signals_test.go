package test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
	"github.com/memfs/memfs/worker"
)

// Tests of the second signal (docs/operating.md, "Mounting a store" and
// "The worker"): the first
// SIGINT/SIGTERM starts a clean stop, the second stops waiting, and no
// signal may kill a process before it has detached its mounts.

// sgExitLeft is the exit status every command that syncs documents
// (--help, docs/operating.md) for a stop that left changes in the journal.
const sgExitLeft = 3

// TestMountSecondSignal: a second signal while memfs mount stops (Ctrl-C
// twice; timeout(1), which signals the process and then its group) stops
// the waiting but never leaves a dead mount: the process
// exits with its journal closed, the mount point is neither mounted nor
// ENOTCONN, and the next memfs mount with the same state dir shows every
// file closed before the signals and uploads it from the journal: nothing
// closed is lost. The exit status says what the stop left, not how it
// began (docs/operating.md, "Stopping and exit status"): sgExitLeft when the second signal cut the final sync
// short (a stalled store), 0 when it only cut short the wait for a busy
// mount after everything went up; either when it raced the final sync.
func TestMountSecondSignal(t *testing.T) {
	tests := []struct {
		name string
		// stall SIGSTOPs memfs serve before the signals: the final sync
		// then waits for it until FinalSyncTimeout unless cut short.
		stall bool
		// busy keeps a process in the mount: the unmount then retries
		// until UnmountTimeout unless cut short.
		busy bool
		// then sends what follows the first SIGINT. When there is a stop
		// to cut short (stall or busy), it runs once the stop has begun
		// (the mount refuses changes), so that it lands while the stop
		// waits; otherwise at once.
		then func(m *harness.Mount)
	}{
		// What timeout -s INT does: the process, then its group, at once.
		// The stop may finish before the second lands (exit 0).
		{"the process then its group at once", false, false, func(m *harness.Mount) { m.SignalGroup(syscall.SIGINT) }},
		{"Ctrl-C twice during the final sync", true, false, func(m *harness.Mount) { m.Signal(syscall.SIGINT) }},
		{"the process then its group during the final sync", true, false, func(m *harness.Mount) { m.SignalGroup(syscall.SIGINT) }},
		{"three signals during the final sync", true, false, func(m *harness.Mount) {
			m.Signal(syscall.SIGTERM)
			m.Signal(syscall.SIGINT)
		}},
		{"Ctrl-C twice on a busy mount", false, true, func(m *harness.Mount) { m.Signal(syscall.SIGINT) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newMtEnv(t, map[string]string{"/existing.md": "v1\n"})
			o := e.opts()
			o.NewGroup = true
			m := harness.StartMount(t, o)
			mtMustSh(t, m.Dir, `printf 'alpha' > a.md && mkdir -p d/e && printf 'deep\n' > d/e/b.md && printf 'v2\n' > existing.md`)
			want := map[string]string{"/a.md": "alpha", "/d/e/b.md": "deep\n", "/existing.md": "v2\n"}
			if tc.stall {
				e.serve.Signal(syscall.SIGSTOP)
				t.Cleanup(func() { e.serve.Signal(syscall.SIGCONT) })
			}
			if tc.busy {
				sgHoldBusy(t, m.Dir)
			}

			t0 := time.Now()
			m.Signal(syscall.SIGINT)
			if tc.stall || tc.busy {
				sgWaitFrozen(t, m.Dir)
			}
			if tc.busy {
				// The final sync has uploaded everything (its pass is
				// logged once the store confirmed each change): the stop
				// waits for the busy mount alone.
				mtCheckPass(t, m.WaitOutput(1, "sync pass", mtExitTimeout), map[string]int{"uploaded": 3, "left": 0})
			}
			tc.then(m)
			code := m.Wait(mtExitTimeout)
			took := time.Since(t0)
			switch {
			case tc.stall && code == sgExitLeft:
			case tc.busy && code == 0:
			case !tc.stall && !tc.busy && (code == 0 || code == sgExitLeft):
				t.Logf("exit %d: the second signal came after (0) or during (%d) the final sync", code, sgExitLeft)
			default:
				want := sgExitLeft
				if tc.busy {
					want = 0
				}
				t.Errorf("memfs mount exited %d after the signals, want %d:\n%s", code, want, m.Output())
			}
			if code == sgExitLeft {
				if l := m.Lines("memfs mount:", "cut short by a second signal", "left in the journal"); len(l) != 1 {
					t.Errorf("exit %d without a message saying the final sync was cut short and what is left:\n%s", code, m.Output())
				}
			}
			sgCheckPrompt(t, took, tc.stall, tc.busy)
			// A second signal cuts the final sync short, not the closing
			// of the journal that keeps what it did not upload.
			if l := m.Lines("close journal"); len(l) > 0 {
				t.Errorf("the journal was not closed cleanly: %q", l)
			}
			sgCheckDetached(t, m.Dir)

			if tc.stall {
				e.serve.Signal(syscall.SIGCONT)
			}
			m2 := e.mount() // the same store, state dir and mount point
			if got := mtMountFiles(t, m2.Dir); !maps.Equal(got, want) {
				t.Errorf("the new mount does not show the files closed before the signals:\n%s", mtDiff(got, want))
			}
			e.waitStore(want)
			mtStop(t, m2)
		})
	}
}

// TestUpSecondSignal: a second Ctrl-C while memfs up waits to unmount a
// busy mount stops the waiting: it detaches the mount lazily and exits at
// once, 0, since the final sync had uploaded everything (the exit status
// comes from what is left, not from the second signal), and what it
// uploaded stays in the store.
func TestUpSecondSignal(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	up := startUp(t, "--log-level", "info")
	mtMustSh(t, up.dir, `echo "- Likes examples." >> preferences/style.md`)
	want := "- Prefers concise answers.\n- Uses tabs, not spaces.\n- Likes examples.\n"
	sgHoldBusy(t, up.dir)

	t0 := time.Now()
	up.proc.Signal(syscall.SIGINT)
	sgWaitFrozen(t, up.dir)
	// The pass that uploaded the edit is logged once the store confirmed
	// it: nothing is pending, and up waits for the busy mount alone.
	up.proc.WaitOutput(1, wkSyncTimeout, "sync pass", "uploaded=1", "left=0")
	up.proc.Signal(syscall.SIGINT)
	if code := up.proc.Wait(wkExitTimeout); code != 0 {
		t.Errorf("memfs up exited %d after two Ctrl-Cs with nothing left to upload, want 0:\n%s", code, up.proc.Output())
	}
	sgCheckPrompt(t, time.Since(t0), false, true)
	if m := harness.MountsUnder(up.root); len(m) > 0 {
		t.Errorf("still mounted after memfs up exited: %v", m)
	}
	sgCheckDetached(t, up.dir)

	if got := up.storeAfterExit(t)["/preferences/style.md"]; got != want {
		t.Errorf("/preferences/style.md in the store after memfs up exited: %q, want %q", got, want)
	}
}

// sgCheckPrompt fails if the process took as long to exit as what the
// second signal was to cut short would have taken by itself: the final
// sync on a stalled server, the EBUSY retries on a busy mount.
func sgCheckPrompt(t *testing.T, took time.Duration, stall, busy bool) {
	t.Helper()
	if stall && took >= syncqueue.FinalSyncTimeout {
		t.Errorf("exited %s after the first signal: the second did not cut the final sync (bounded at %s) short", took, syncqueue.FinalSyncTimeout)
	}
	if busy && took >= worker.UnmountTimeout {
		t.Errorf("exited %s after the first signal: the second did not cut the unmount retries (bounded at %s) short", took, worker.UnmountTimeout)
	}
}

// sgHoldBusy keeps a process whose working directory is dir until the
// test ends: an unmount of dir fails with EBUSY meanwhile.
func sgHoldBusy(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a process in %s: %v", dir, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// sgWaitFrozen polls until the mount at dir refuses changes (EROFS): the
// stop has begun. It probes with mkdir, because an empty directory exists
// only locally and never reaches the store.
func sgWaitFrozen(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(mtPollTimeout)
	for i := 0; ; i++ {
		err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("probe-%d", i)), 0o755)
		switch {
		case errors.Is(err, syscall.EROFS):
			return
		case err != nil:
			t.Fatalf("probing the mount for the stop: %v", err)
		case time.Now().After(deadline):
			t.Fatalf("the mount at %s still takes changes %s after SIGINT", dir, mtPollTimeout)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// sgCheckDetached fails unless dir is neither a dead FUSE mount (ENOTCONN)
// nor in /proc/self/mountinfo; a mount still there is detached lazily, so
// none outlives the test.
func sgCheckDetached(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s after the process exited: %v (a dead mount)", dir, err)
	}
	if harness.IsMounted(dir) {
		t.Errorf("%s is still in /proc/self/mountinfo after the process exited; detaching it", dir)
		syscall.Unmount(dir, syscall.MNT_DETACH)
	}
}
