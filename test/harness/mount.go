package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MountOptions configure a `memfs mount` process.
type MountOptions struct {
	// URL and APIKey name the memfs serve process (required).
	URL, APIKey string
	// Store is the --store id ("" leaves the flag out).
	Store string
	// Dir is the MOUNTPOINT argument ("" leaves it out).
	Dir string
	// StateDir is --state-dir ("" = a new t.TempDir()).
	StateDir string
	// Args are extra flags, placed before MOUNTPOINT.
	Args []string
}

func (o MountOptions) args() []string {
	args := []string{"mount", "--api-url", o.URL, "--api-key", o.APIKey, "--state-dir", o.StateDir}
	if o.Store != "" {
		args = append(args, "--store", o.Store)
	}
	args = append(args, o.Args...)
	if o.Dir != "" {
		args = append(args, o.Dir)
	}
	return args
}

// Mount is a running `memfs mount` process.
type Mount struct {
	// Dir is the mount point the process printed.
	Dir  string
	Opts MountOptions

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	output strings.Builder // stdout and stderr, interleaved; GUARDED_BY(mu)
	lines  chan struct{}   // closed and replaced on every new line; GUARDED_BY(mu)
}

// mountedRe matches the line memfs mount prints once the store is mounted.
var mountedRe = regexp.MustCompile(`^memfs mount: (\S+) mounted at (.+) \(Ctrl-C to unmount\)$`)

// StartMount runs `memfs mount` and waits until it prints that the store is
// mounted. When the test ends, a process still running is killed and a
// mount it left is detached, so no stale mount outlives the test.
func StartMount(t testing.TB, opts MountOptions) *Mount {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	m := &Mount{Opts: opts, t: t, done: make(chan struct{}), lines: make(chan struct{})}
	cmd := exec.Command(Binary(t), opts.args()...)
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
	m.cmd = cmd
	mounted := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m.addLine(sc.Text())
			if sm := mountedRe.FindStringSubmatch(sc.Text()); sm != nil {
				mounted <- sm[2]
			}
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			m.addLine(sc.Text())
		}
	}()
	// Wait only after both pipes are drained (os/exec's rule for
	// StdoutPipe), so Output is complete once the process is done.
	go func() { readers.Wait(); cmd.Wait(); close(m.done) }() //nolint:errcheck
	t.Cleanup(func() {
		if m.Running() {
			m.Kill()
		}
		dir := m.Dir
		if dir == "" {
			dir = opts.Dir // it may have mounted without saying so
		}
		if dir != "" && IsMounted(dir) {
			unix.Unmount(dir, unix.MNT_DETACH) //nolint:errcheck
		}
	})
	select {
	case dir := <-mounted:
		m.Dir = dir
	case <-m.done:
		t.Fatalf("memfs mount exited (%d) before mounting:\n%s", cmd.ProcessState.ExitCode(), m.Output())
	case <-time.After(60 * time.Second):
		t.Fatalf("memfs mount did not mount within 60s:\n%s", m.Output())
	}
	if !IsMounted(m.Dir) {
		t.Fatalf("memfs mount says it mounted %s, but /proc/self/mountinfo does not list it:\n%s", m.Dir, m.Output())
	}
	return m
}

func (m *Mount) addLine(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.output.WriteString(line + "\n")
	close(m.lines)
	m.lines = make(chan struct{})
}

// Output is everything the process printed so far (stdout and stderr).
func (m *Mount) Output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.output.String()
}

// WaitOutput waits until the output holds n lines containing substr and
// returns the last of them; it fails the test at the deadline or if the
// process exits first.
func (m *Mount) WaitOutput(n int, substr string, timeout time.Duration) string {
	m.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		var found []string
		for _, l := range strings.Split(m.output.String(), "\n") {
			if strings.Contains(l, substr) {
				found = append(found, l)
			}
		}
		next := m.lines
		m.mu.Unlock()
		if len(found) >= n {
			return found[n-1]
		}
		select {
		case <-next:
		case <-m.done:
			// Check once more: the line may have come with the exit.
			if l := m.countLines(substr); l >= n {
				continue
			}
			m.t.Fatalf("memfs mount exited before printing %q (%d times):\n%s", substr, n, m.Output())
		case <-deadline.C:
			m.t.Fatalf("memfs mount did not print %q (%d times) within %s:\n%s", substr, n, timeout, m.Output())
		}
	}
}

// countLines counts the output lines containing substr.
func (m *Mount) countLines(substr string) int {
	n := 0
	for _, l := range strings.Split(m.Output(), "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// syncLine is what memfs mount logs after each SIGUSR1 pass.
const syncLine = "sync pass on SIGUSR1"

// SyncNow sends SIGUSR1 and waits until the process logs that the pass
// ran; it returns that log line (with its uploaded=, deleted=, failed=
// and left= counts). One signal at a time: signals sent together may be
// merged into one pass.
func (m *Mount) SyncNow(timeout time.Duration) string {
	m.t.Helper()
	n := m.countLines(syncLine)
	m.Signal(syscall.SIGUSR1)
	return m.WaitOutput(n+1, syncLine, timeout)
}

// Signal sends sig to the process.
func (m *Mount) Signal(sig os.Signal) {
	m.t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		m.t.Fatalf("signal memfs mount: %v", err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone. The mount it
// served stays in the mount table (stale) until someone detaches it.
func (m *Mount) Kill() {
	m.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
	<-m.done
}

// Wait waits for the process to exit (bounded by timeout) and returns its
// exit code; it fails the test at the deadline.
func (m *Mount) Wait(timeout time.Duration) int {
	m.t.Helper()
	select {
	case <-m.done:
		return m.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		m.t.Fatalf("memfs mount did not exit within %s:\n%s", timeout, m.Output())
		return -1
	}
}

// Running reports whether the process has not exited yet.
func (m *Mount) Running() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// RunMount runs `memfs mount` expecting it to fail before mounting: it
// returns the exit code, stdout and stderr. A process that mounts (or runs
// longer than timeout) fails the test.
func RunMount(t testing.TB, opts MountOptions, timeout time.Duration) (code int, stdout, stderr string) {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), opts.args()...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		if opts.Dir != "" && IsMounted(opts.Dir) {
			unix.Unmount(opts.Dir, unix.MNT_DETACH) //nolint:errcheck
		}
		t.Fatalf("memfs mount %v did not exit within %s:\n%s%s", opts.args()[1:], timeout, out.String(), errb.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run memfs mount: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// Pid is the process id.
func (m *Mount) Pid() int { return m.cmd.Process.Pid }

// MountOptionsOf returns the options /proc/self/mountinfo shows for the
// mount at dir: the per-mount ones (rw or ro, nosuid, ...) and the
// superblock's (rw or ro, user_id=, ...). Both are "" if dir is not a
// mount point.
func MountOptionsOf(dir string) (mount, super string) {
	f := mountinfoLine(dir)
	if f == nil {
		return "", ""
	}
	mount = f[5]
	for i, x := range f {
		// ... optional fields - FSTYPE SOURCE SUPER_OPTIONS
		if x == "-" && i+3 < len(f) {
			super = f[i+3]
		}
	}
	return mount, super
}

// IsMounted reports whether dir is a mount point, read from
// /proc/self/mountinfo (stat can't tell a stale FUSE mount apart).
func IsMounted(dir string) bool { return mountinfoLine(dir) != nil }

// mountinfoLine returns the fields of the last /proc/self/mountinfo line
// whose mount point is dir (the one on top), or nil.
func mountinfoLine(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		panic(fmt.Sprintf("read /proc/self/mountinfo: %v", err))
	}
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root MOUNTPOINT options ...
		f := strings.Fields(line)
		if len(f) > 5 && unescapeMountinfo(f[4]) == abs {
			found = f
		}
	}
	return found
}

// unescapeMountinfo decodes the \ooo escapes mountinfo uses for space, tab,
// newline and backslash.
func unescapeMountinfo(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
