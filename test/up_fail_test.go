package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// upFailTimeout bounds how long memfs up takes to fail once its demo
// session has failed: at once, so well within its own 60 s wait for the
// mount (which it used to sit out before failing).
const upFailTimeout = 30 * time.Second

// TestUpSessionFails: when the demo session fails before its store is
// mounted, memfs up fails at once (exit 1) with the session's reason, not
// after waiting 60 s for a mount that cannot come; and the reason gives no
// fix that cannot work (sudo mkdir -p through a file). Nothing is left
// mounted or created.
func TestUpSessionFails(t *testing.T) {
	t.Parallel()
	t.Run("memory root under a regular file", func(t *testing.T) {
		t.Parallel()
		base := t.TempDir()
		file := filepath.Join(base, "file")
		if err := os.WriteFile(file, []byte("not a directory\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := harness.StartProc(t, harness.ProcOptions{},
			"up", "--data-dir", filepath.Join(base, "data"), "--memory-root", filepath.Join(file, "mem"), "--listen", "127.0.0.1:0")
		code := p.Wait(upFailTimeout)
		out := p.Output()
		want := "memfs up: the demo session failed: cannot create the memory store's folder " + filepath.Join(file, "mem") + ": " + file + " is a file, not a directory"
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("memfs up exited %d, want 1 and %q:\n%s", code, want, out)
		}
		if strings.Contains(out, "sudo mkdir") || strings.Contains(out, "context canceled") {
			t.Errorf("memfs up gives a fix that cannot work, or no reason:\n%s", out)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "not a directory\n" {
			t.Errorf("the file in the way changed: %q, %v", b, err)
		}
	})
	t.Run("FUSE unavailable", func(t *testing.T) {
		t.Parallel()
		strace := requireTool(t, "strace")
		base := t.TempDir()
		root := filepath.Join(base, "mnt")
		t.Cleanup(func() { harness.DetachUnder(root) })
		ctx, cancel := context.WithTimeout(context.Background(), upFailTimeout)
		defer cancel()
		// Every open of /dev/fuse fails with ENOENT, as on a host without
		// the fuse module or a container without the device; --mount-mode
		// fuse refuses to fall back to a folder (auto's fallback is
		// TestMountAutoWithoutFUSE's).
		cmd := exec.CommandContext(ctx, strace, "-f", "-qq", "-o", "/dev/null", "-P", "/dev/fuse", "-e", "trace=openat", "-e", "inject=openat:error=ENOENT",
			harness.Binary(t), "up", "--mount-mode", "fuse", "--data-dir", filepath.Join(base, "data"), "--memory-root", root, "--listen", "127.0.0.1:0")
		// Its own group, killed whole at the deadline: strace and memfs up.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		b, err := cmd.CombinedOutput()
		out := string(b)
		if ctx.Err() != nil {
			t.Fatalf("memfs up did not fail within %s without FUSE:\n%s", upFailTimeout, out)
		}
		want := "memfs up: the demo session failed: mount memory store "
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "/dev/fuse is missing") {
			t.Errorf("memfs up exited %d (%v), want 1 and %q with the reason:\n%s", code, err, want, out)
		}
		if m := harness.MountsUnder(root); len(m) > 0 {
			t.Errorf("mounted: %v", m)
		}
	})
}

// upMountDelay holds the demo session's open of /dev/fuse (strace's
// delay_enter), so that a Ctrl-C sent once the session is claimed lands
// before the store can be mounted.
const upMountDelay = 10 * time.Second

// TestUpCtrlCBeforeTheMount: Ctrl-C while memfs up waits for its demo
// store to be mounted is the normal stop: it says so, ends the session,
// leaves nothing mounted and exits 0; never a bare "context canceled".
func TestUpCtrlCBeforeTheMount(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	strace := requireTool(t, "strace")
	base := t.TempDir()
	root := filepath.Join(base, "mnt")
	t.Cleanup(func() { harness.DetachUnder(root) })
	ctx, cancel := context.WithTimeout(context.Background(), upMountDelay+mtExitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, strace, "-f", "-qq", "-o", "/dev/null", "-P", "/dev/fuse", "-e", "trace=openat",
		"-e", fmt.Sprintf("inject=openat:delay_enter=%d", upMountDelay.Microseconds()),
		harness.Binary(t), "up", "--data-dir", filepath.Join(base, "data"), "--memory-root", root, "--listen", "127.0.0.1:0", "--log-level", "info")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "claimed work item") {
			// memfs up is strace's child; only it gets the Ctrl-C.
			kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(kids)))
			if err != nil || perr != nil {
				t.Fatalf("find memfs up below strace: %q, %v, %v", kids, err, perr)
			}
			if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
	}
	<-exited
	if ctx.Err() != nil {
		t.Fatalf("memfs up did not exit after Ctrl-C:\n%s", out.String())
	}
	got := out.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("memfs up exited %d after Ctrl-C before the mount, want 0:\n%s", code, got)
	}
	for _, s := range []string{"memfs up: stopping before the demo store was mounted", "memfs up: stopped; nothing is left mounted."} {
		if !strings.Contains(got, s) {
			t.Errorf("memfs up does not say %q:\n%s", s, got)
		}
	}
	if strings.Contains(got, "memfs is up.") || strings.Contains(got, "memfs up: context canceled") {
		t.Errorf("memfs up mounted, or said only that its context was canceled:\n%s", got)
	}
	if m := harness.MountsUnder(root); len(m) > 0 {
		t.Errorf("mounted: %v", m)
	}
}
