package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MountOptions configure a `memfs mount` process.
type MountOptions struct {
	// URL and APIKey name the memfs serve process (required, unless
	// APIKeyFile is given).
	URL, APIKey string
	// APIKeyFile, when set, is passed as --api-key-file instead of
	// --api-key APIKey, which puts the key in the process's argv.
	APIKeyFile string
	// Store is the --store id ("" leaves the flag out).
	Store string
	// Dir is the MOUNTPOINT argument ("" leaves it out).
	Dir string
	// StateDir is --state-dir ("" = a new t.TempDir()).
	StateDir string
	// Args are extra flags, placed before MOUNTPOINT.
	Args []string
	// NewGroup starts the process in a process group of its own (see
	// ProcOptions.NewGroup and Proc.SignalGroup).
	NewGroup bool
	// Env is added to the process's environment.
	Env []string
	// NoMkdir leaves --mkdir out. Tests mount on directories that do not
	// exist yet, which memfs mount creates (and removes at unmount) only
	// with --mkdir; without it a missing mount point is an error.
	NoMkdir bool
	// Directory says the store is written into Dir as a plain folder
	// (--mount-mode directory, or an auto that picks it): StartMount then
	// checks that nothing is mounted there, instead of a mount.
	Directory bool
	// Prefix, when set, is a command that runs memfs: the process started
	// is Prefix, then the binary and the arguments (unshare -m sh -c
	// '... && exec "$0" "$@"', say). Whatever it runs must exec memfs,
	// so that the process's pid is memfs's and signals reach it.
	Prefix []string
}

// CommandArgs are the memfs arguments (from "mount" on) these options give,
// for a test that starts the process its own way (on a terminal, say).
func (o MountOptions) CommandArgs() []string {
	args := []string{"mount", "--api-url", o.URL, "--state-dir", o.StateDir}
	switch {
	case o.APIKeyFile != "":
		args = append(args, "--api-key-file", o.APIKeyFile)
	case o.APIKey != "":
		args = append(args, "--api-key", o.APIKey)
	}
	if o.Store != "" {
		args = append(args, "--store", o.Store)
	}
	if !o.NoMkdir {
		args = append(args, "--mkdir")
	}
	args = append(args, o.Args...)
	if o.Dir != "" {
		args = append(args, o.Dir)
	}
	return args
}

// Mount is a running `memfs mount` process: a Proc that has mounted Dir.
type Mount struct {
	*Proc
	// Dir is the mount point the process printed.
	Dir  string
	Opts MountOptions
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
	m := &Mount{Opts: opts}
	// Registered before StartProc's own cleanup, so it runs after it
	// (cleanups run last-in first-out): the process is gone by then.
	t.Cleanup(func() {
		dir := m.Dir
		if dir == "" {
			dir = opts.Dir // it may have mounted without saying so
		}
		if dir != "" && IsMounted(dir) {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	m.Proc = StartProc(t, ProcOptions{NewGroup: opts.NewGroup, Env: opts.Env, Prefix: opts.Prefix}, opts.CommandArgs()...)
	line := m.Proc.WaitOutput(1, 60*time.Second, "mounted at", "Ctrl-C to unmount")
	sm := mountedRe.FindStringSubmatch(line)
	if sm == nil {
		t.Fatalf("memfs mount printed an unexpected line %q:\n%s", line, m.Output())
	}
	m.Dir = sm[2]
	switch {
	case opts.Directory && IsMounted(m.Dir):
		t.Fatalf("memfs mount was to write the store into the folder %s, but /proc/self/mountinfo lists a mount there:\n%s", m.Dir, m.Output())
	case !opts.Directory && !IsMounted(m.Dir):
		t.Fatalf("memfs mount says it mounted %s, but /proc/self/mountinfo does not list it:\n%s", m.Dir, m.Output())
	}
	return m
}

// WaitOutput waits until the output holds n lines containing substr and
// returns the n-th of them; it fails the test at the deadline or if the
// process exits first.
func (m *Mount) WaitOutput(n int, substr string, timeout time.Duration) string {
	m.t.Helper()
	return m.Proc.WaitOutput(n, timeout, substr)
}

// syncLine is what memfs mount logs after each SIGUSR1 pass.
const syncLine = "sync pass on SIGUSR1"

// SyncNow sends SIGUSR1 and waits until the process logs that the pass
// ran; it returns that log line (with its uploaded=, deleted=, failed=
// and left= counts). One signal at a time: signals sent together may be
// merged into one pass.
func (m *Mount) SyncNow(timeout time.Duration) string {
	m.t.Helper()
	n := len(m.Lines(syncLine))
	m.Signal(syscall.SIGUSR1)
	return m.WaitOutput(n+1, syncLine, timeout)
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
	cmd := exec.CommandContext(ctx, Binary(t), opts.CommandArgs()...)
	if len(opts.Env) > 0 {
		cmd.Env = append(os.Environ(), opts.Env...)
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		if opts.Dir != "" && IsMounted(opts.Dir) {
			unix.Unmount(opts.Dir, unix.MNT_DETACH)
		}
		t.Fatalf("memfs mount %v did not exit within %s:\n%s%s", opts.CommandArgs()[1:], timeout, out.String(), errb.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run memfs mount: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

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

// mountinfoPath is the path /proc/self/mountinfo lists a mount at dir
// at: absolute, with the symlinks above dir resolved (dir itself is not
// looked at: it may be a dead FUSE mount).
func mountinfoPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if abs == "/" {
		return abs, nil
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return abs, nil // a parent that doesn't exist has nothing mounted below
	}
	return filepath.Join(parent, filepath.Base(abs)), nil
}

// mountinfoLine returns the fields of the last /proc/self/mountinfo line
// whose mount point is dir (the one on top), or nil.
func mountinfoLine(dir string) []string {
	abs, err := mountinfoPath(dir)
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
