package harness

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is a running memfs process (memfs worker, memfs session, memfs up)
// whose output a test reads line by line. It is killed when the test ends
// if it is still running.
type Proc struct {
	// Args are the command line arguments after the binary.
	Args []string

	t     testing.TB
	cmd   *exec.Cmd
	done  chan struct{}
	group bool // started with ProcOptions.NewGroup

	mu     sync.Mutex
	output strings.Builder // stdout and stderr, interleaved; GUARDED_BY(mu)
	lines  chan struct{}   // closed and replaced on every new line; GUARDED_BY(mu)
}

// ProcOptions configure StartProc.
type ProcOptions struct {
	// Dir is the working directory ("" = the test's).
	Dir string
	// Env is added to the environment.
	Env []string
	// NewGroup starts the process in a process group of its own (Setpgid),
	// so SignalGroup can signal the group as a terminal or timeout(1) does
	// without reaching the test binary.
	NewGroup bool
	// Prefix, when set, is a command that runs the binary: the process
	// started is Prefix, then the binary and args. It must exec the binary
	// (not fork it), so that signals sent to the process reach memfs.
	Prefix []string
}

// StartProc starts the memfs binary with args and returns at once.
func StartProc(t testing.TB, opts ProcOptions, args ...string) *Proc {
	t.Helper()
	p := &Proc{Args: args, t: t, done: make(chan struct{}), lines: make(chan struct{}), group: opts.NewGroup}
	argv := append(append(slices.Clone(opts.Prefix), Binary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = opts.Dir
	if len(opts.Env) > 0 {
		cmd.Env = append(os.Environ(), opts.Env...)
	}
	cmd.SysProcAttr = childAttr()
	cmd.SysProcAttr.Setpgid = opts.NewGroup
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	var readers sync.WaitGroup
	readers.Add(2)
	read := func(f io.Reader) {
		defer readers.Done()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.addLine(sc.Text())
		}
	}
	go read(stdout)
	go read(stderr)
	// Wait only after both pipes are drained (os/exec's rule for
	// StdoutPipe), so Output is complete once the process is done.
	go func() { readers.Wait(); cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if p.Running() {
			p.Kill()
		}
	})
	return p
}

func (p *Proc) addLine(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.output.WriteString(line + "\n")
	close(p.lines)
	p.lines = make(chan struct{})
}

// Output is everything the process printed so far (stdout and stderr).
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// Lines returns the output lines that contain every one of parts.
func (p *Proc) Lines(parts ...string) []string {
	var found []string
	for _, l := range strings.Split(p.Output(), "\n") {
		if containsAll(l, parts) {
			found = append(found, l)
		}
	}
	return found
}

func containsAll(s string, parts []string) bool {
	for _, x := range parts {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return s != ""
}

// WaitOutput waits until the output holds n lines that contain every one
// of parts and returns the n-th; it fails the test at the deadline or if
// the process exits first.
func (p *Proc) WaitOutput(n int, timeout time.Duration, parts ...string) string {
	p.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		next := p.lines
		p.mu.Unlock()
		if found := p.Lines(parts...); len(found) >= n {
			return found[n-1]
		}
		select {
		case <-next:
		case <-p.done:
			if found := p.Lines(parts...); len(found) >= n {
				return found[n-1]
			}
			p.t.Fatalf("memfs %s exited (%d) before printing %q (%d times):\n%s", p.Args[0], p.cmd.ProcessState.ExitCode(), parts, n, p.Output())
		case <-deadline.C:
			p.t.Fatalf("memfs %s did not print %q (%d times) within %s:\n%s", p.Args[0], parts, n, timeout, p.Output())
		}
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal memfs %s: %v", p.Args[0], err)
	}
}

// SignalGroup sends sig to the process's group, as timeout(1) does after
// signalling the process itself. The process must have been started with
// ProcOptions.NewGroup: otherwise its group is the test binary's.
func (p *Proc) SignalGroup(sig syscall.Signal) {
	p.t.Helper()
	if !p.group {
		p.t.Fatalf("SignalGroup: memfs %s was not started in a group of its own (ProcOptions.NewGroup)", p.Args[0])
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		p.t.Fatalf("signal the group of memfs %s: %v", p.Args[0], err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone. Mounts it
// served stay in the mount table (stale) until someone detaches them.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Wait waits for the process to exit (bounded by timeout) and returns its
// exit code; it fails the test at the deadline.
func (p *Proc) Wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		p.t.Fatalf("memfs %s did not exit within %s:\n%s", p.Args[0], timeout, p.Output())
		return -1
	}
}

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// WorkerOptions configure a `memfs worker` process.
type WorkerOptions struct {
	// URL, EnvironmentID and EnvironmentKey name the work queue (required).
	URL, EnvironmentID, EnvironmentKey string
	// MemoryRoot is --memory-root (required: tests never use /mnt/memory).
	MemoryRoot string
	// StateDir is --state-dir ("" = a new t.TempDir()); reuse it to
	// restart a worker after a crash.
	StateDir string
	// Dir is the working directory ("" = the test's).
	Dir string
	// Args are extra flags.
	Args []string
}

// Worker is a running `memfs worker` process.
type Worker struct {
	*Proc
	Opts WorkerOptions
}

// workerReady is what memfs worker logs once it recovered what a previous
// run left behind and polls.
const workerReady = "worker polling for work"

// StartWorker runs `memfs worker` and waits until it polls. When the test
// ends, a process still running is killed and every mount left under the
// memory root is detached, so no stale mount outlives the test.
func StartWorker(t testing.TB, opts WorkerOptions) *Worker {
	t.Helper()
	if opts.MemoryRoot == "" {
		t.Fatal("StartWorker: MemoryRoot is required")
	}
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	args := []string{"worker", "--api-url", opts.URL, "--environment-id", opts.EnvironmentID, "--environment-key", opts.EnvironmentKey,
		"--memory-root", opts.MemoryRoot, "--state-dir", opts.StateDir}
	w := &Worker{Proc: StartProc(t, ProcOptions{Dir: opts.Dir}, append(args, opts.Args...)...), Opts: opts}
	t.Cleanup(func() {
		if w.Running() {
			w.Kill()
		}
		DetachUnder(opts.MemoryRoot)
	})
	w.WaitOutput(1, 60*time.Second, workerReady)
	return w
}

// MountsUnder lists the mount points at or under dir, from
// /proc/self/mountinfo (stale FUSE mounts included), as mountinfo names
// them: with the symlinks above dir resolved.
func MountsUnder(dir string) []string {
	abs, err := mountinfoPath(dir)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 {
			mp := unescapeMountinfo(f[4])
			if mp == abs || strings.HasPrefix(mp, abs+"/") {
				out = append(out, mp)
			}
		}
	}
	return out
}

// DetachUnder lazily unmounts every mount at or under dir (test cleanup).
func DetachUnder(dir string) {
	mps := MountsUnder(dir)
	for i := len(mps) - 1; i >= 0; i-- {
		unix.Unmount(mps[i], unix.MNT_DETACH)
	}
}
