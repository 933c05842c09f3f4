package test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/syncqueue"
)

// An I/O error on the journal (docs/formats.md, "The journal (version
// 2)", I/O errors; docs/sync.md, "Why a change waits"), on a real mount:
// strace fails every fdatasync of the memfs mount process with EIO for a
// while. Closes fail with EIO only while that lasts, the files keep their
// content and reach the store once it is over, memfs status names the
// real cause (never a full state dir, never an unreachable store), and
// after kill -9 and a remount nothing closed is lost.
func TestFaultJournalFdatasyncEIO(t *testing.T) {
	straceBin := requireTool(t, "strace")
	e := newMtEnv(t, map[string]string{"/base.md": "base\n"})
	m := e.mount("--memory-sync-quiet", "off") // passes on SIGUSR1 only
	want := map[string]string{"/base.md": "base\n"}
	write := func(name, content string) error {
		return os.WriteFile(filepath.Join(m.Dir, name), []byte(content), 0o644)
	}
	if err := write("before.md", "before the fault\n"); err != nil {
		t.Fatalf("a write before the fault: %v", err)
	}
	want["/before.md"] = "before the fault\n"

	stopFault := jfInjectFdatasyncEIO(t, straceBin, m.Pid())
	// Within a group commit (100 ms) of a close the journal finds its
	// fdatasync failed, and refuses the closes that follow with EIO; the
	// closes before that work. (New files each time: an open with
	// O_TRUNC of a journaled file would be refused first.)
	var refused string
	deadline := time.Now().Add(mtPollTimeout)
	for i := 0; refused == ""; i++ {
		p := fmt.Sprintf("/during-%03d.md", i)
		want[p] = fmt.Sprintf("file %d, closed during the fault\n", i)
		switch err := write(p[1:], want[p]); {
		case errors.Is(err, syscall.EIO):
			refused = p
		case err != nil:
			t.Fatalf("a close during the fault: %v, want success or EIO", err)
		case time.Now().After(deadline):
			t.Fatalf("%d closes during the fault worked: the journal did not see its fdatasync fail", i+1)
		default:
			time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, refused)); err != nil || string(b) != want[refused] {
		t.Fatalf("%s after its close failed: %q, %v (want its new content)", refused, b, err)
	}
	ioReason := syncqueue.ReasonJournalIO + " (EIO)"

	// The store is reachable: a pass uploads what the journal holds, and
	// status says why the refused file waits, truthfully.
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"failed": 0})
	s, _ := jfMountStatus(t, e.stateDir, m.Dir)
	if s.NoSpace || s.Unreachable || s.JournalError != ioReason {
		t.Errorf("memfs status --json during the fault: no_space=%v unreachable=%v journal_error=%q, want false, false, %q",
			s.NoSpace, s.Unreachable, s.JournalError, ioReason)
	}
	var found bool
	for _, c := range s.Pending {
		if c.Path == refused {
			found = true
			if c.Op != "unjournaled" || c.Reason != ioReason || !strings.Contains(c.Error, "fdatasync") {
				t.Errorf("memfs status --json: %s pending as %+v, want unjournaled for %q", refused, c, ioReason)
			}
		}
	}
	if !found {
		t.Errorf("memfs status --json does not list %s: %+v", refused, s.Pending)
	}
	// The sync invariant, during the fault: every closed file is in the
	// store, or pending with a reason (no conflict can arise here).
	stored, pending := e.contents(), map[string]string{}
	for _, c := range s.Pending {
		pending[c.Path] = c.Reason
	}
	for p, c := range want {
		if stored[p] != c && pending[p] == "" {
			t.Errorf("%s is neither in the store (%q) nor pending: the invariant is broken", p, stored[p])
		}
	}
	text, _, _ := cvMemfs(t, nil, "status", "--state-dir", e.stateDir)
	t.Logf("memfs status during the fault:\n%s", text)
	for _, w := range []string{ioReason, "I/O ERROR ON THE JOURNAL (EIO)"} {
		if !strings.Contains(text, w) {
			t.Errorf("memfs status does not say %q:\n%s", w, text)
		}
	}
	for _, wrong := range []string{"STATE DIR FULL", "STORE UNREACHABLE", syncqueue.ReasonNoSpace, syncqueue.ReasonUnreachable} {
		if strings.Contains(text, wrong) {
			t.Errorf("memfs status says %q during an I/O error on the journal:\n%s", wrong, text)
		}
	}
	m.WaitOutput(1, "I/O error on the journal", mtPollTimeout)

	stopFault()
	// Once fdatasync works again the journal goes on in a fresh file, by
	// itself, and journals the file whose close failed.
	mtPoll(t, "the journal to recover and journal "+refused, func() (bool, string) {
		s, ok := jfMountStatus(t, e.stateDir, m.Dir)
		for _, c := range s.Pending {
			if c.Op == "unjournaled" {
				return false, fmt.Sprintf("%s still unjournaled (%s)", c.Path, c.Reason)
			}
		}
		return ok && s.JournalError == "", fmt.Sprintf("journal_error %q", s.JournalError)
	})
	m.WaitOutput(1, "journal recovered", mtPollTimeout)
	if err := write("after.md", "after the fault\n"); err != nil {
		t.Fatalf("a close after the fault: %v", err)
	}
	want["/after.md"] = "after the fault\n"

	// kill -9 before any pass: the fresh journal is all that holds the
	// refused file and after.md.
	m.Kill()
	if err := unix.Unmount(m.Dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	m = e.mount("--memory-sync-quiet", "off")
	if got := mtMountFiles(t, m.Dir); !maps.Equal(got, want) {
		t.Fatalf("the remount does not show every closed file:\n%s", mtDiff(got, want))
	}
	e.waitStore(want)
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"failed": 0, "left": 0})
	mtStop(t, m)
}

// requireTool returns the path of the command name (strace: test/run-tests.sh
// installs it; unshare: util-linux); without it the test is skipped, or
// fails under CI=true.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed, and under CI=true a test does not skip: %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// jfInjectFdatasyncEIO attaches strace to every thread of pid, failing
// each fdatasync with EIO, and returns once it is attached. The returned
// func detaches it (SIGINT: strace lets the process go on) and waits.
func jfInjectFdatasyncEIO(t *testing.T, straceBin string, pid int) (stop func()) {
	t.Helper()
	cmd := exec.Command(straceBin, "-f", "-p", fmt.Sprint(pid), "-e", "trace=fdatasync", "-e", "inject=fdatasync:error=EIO", "-o", "/dev/null")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	attached := make(chan string, 1) // the attach line; closed at EOF
	readDone := make(chan struct{})
	var rest strings.Builder // read once attached is closed
	go func() {
		defer close(readDone)
		defer close(attached)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "attached") {
				attached <- sc.Text()
				sent = true
				continue
			}
			rest.WriteString(sc.Text() + "\n")
		}
		io.Copy(io.Discard, stderr)
	}()
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		cmd.Process.Signal(os.Interrupt)
		<-readDone // EOF: strace has detached and exited
		cmd.Wait() // ended by the signal
	}
	t.Cleanup(stop)
	select {
	case line, ok := <-attached:
		if !ok {
			stop()
			t.Fatalf("strace exited before attaching to pid %d: %s", pid, rest.String())
		}
		t.Logf("fault on: %s", line)
	case <-time.After(mtPollTimeout):
		stop()
		t.Fatalf("strace did not attach to pid %d within %s", pid, mtPollTimeout)
	}
	return stop
}

// jfMountStatus is the sync status of the mount at dir, from memfs status
// --json.
func jfMountStatus(t *testing.T, stateDir, dir string) (syncqueue.Status, bool) {
	t.Helper()
	for _, p := range ftReadStatus(t, stateDir).Processes {
		for _, m := range p.Mounts {
			if m.Dir == dir {
				return m.Sync, true
			}
		}
	}
	return syncqueue.Status{}, false
}
