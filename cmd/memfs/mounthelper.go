package main

// mount.memfs: the memfs binary called by that name (a symlink,
// ln -s /usr/local/bin/memfs /sbin/mount.memfs) is the helper mount(8)
// runs for filesystems of type memfs, from the command line, /etc/fstab
// or a systemd .mount unit:
//
//	mount.memfs STORE MOUNTPOINT [-sfnv] [-o OPTIONS] [-t memfs]
//
// mount(8) and systemd wait for the helper to exit and take its status as
// the mount's, while a FUSE filesystem lives as long as its process. So
// the helper starts `memfs mount --store STORE -o OPTIONS -- MOUNTPOINT` as
// a detached child (a session of its own, stdin /dev/null, stdout and
// stderr appended to <state dir>/log/mount-<STORE>.log) and exits 0 once
// /proc/self/mountinfo lists the store at MOUNTPOINT; if the child exits
// first, it prints the child's last log lines and exits with the child's
// status; after mountHelperWait it stops the child (SIGTERM) and exits 1.
// umount stops the child: it uploads what is pending and exits.

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/memfs/memfs/worker"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// mountHelperName is the name (argv[0]'s base) that makes the binary
// mount(8)'s helper.
const mountHelperName = "mount.memfs"

// mountHelperWait bounds how long mount.memfs waits for the mount:
// loading a store of thousands of memories takes seconds, and systemd
// gives a mount 90 s (DefaultTimeoutStartSec) before it kills the helper,
// so the helper gives up first and says why.
const mountHelperWait = 75 * time.Second

// mountHelperStopWait bounds how long a child that did not mount in time
// gets to stop after SIGTERM.
const mountHelperStopWait = 10 * time.Second

// mountHelperPoll is how often the helper looks for the mount.
const mountHelperPoll = 50 * time.Millisecond

const mountHelperUsage = `Usage: mount.memfs STORE MOUNTPOINT [-sfnv] [-o OPTIONS]

mount(8)'s helper for memory stores (type memfs): mount -t memfs STORE
MOUNTPOINT, an /etc/fstab line or a systemd .mount unit runs it. STORE is
the store id (memstore_...). It starts 'memfs mount' in the background
and exits 0 once the store is mounted (at most 75 s), or exits non-zero
with the mount's error. umount stops the mount (pending changes are
uploaded first).

OPTIONS are memfs mount's -o options: ro, rw, uid=N, gid=N, allow_other,
api_url=URL, api_key_file=FILE, ca_file=FILE, insecure_http, state_dir=DIR,
sync_interval=DUR, sync_quiet=DUR, mount_mode=, file_mode=, dir_mode=, umask=,
x-mount.mkdir[=MODE]; defaults, noauto, nofail, _netdev, user, users
and x-systemd.* are ignored. The mount's log
is appended to STATE_DIR/log/mount-STORE.log (state_dir=, else
MEMFS_STATE_DIR, else /var/lib/memfs as root).

  -s  sloppy: ignore unknown options (with a warning) instead of failing
  -f  fake: check the arguments, mount nothing
  -n  accepted (no /etc/mtab is written anyway)
  -v  verbose: say what is started and where it logs

Install: ln -s /usr/local/bin/memfs /sbin/mount.memfs
fstab:   memstore_... /mnt/notes memfs api_url=http://127.0.0.1:8080,api_key_file=/etc/memfs/admin.key,_netdev,x-mount.mkdir 0 0
`

// helperArgs are mount.memfs's arguments.
type helperArgs struct {
	store, dir                  string
	options                     []string // each -o argument
	sloppy, fake, verbose, help bool
}

// parseHelperArgs reads mount(8)'s calling convention: two positional
// arguments, then single-letter flags (-sfnv, clustered or not) and -o
// OPTIONS (or -oOPTIONS), -t TYPE; in any order.
func parseHelperArgs(args []string) (helperArgs, error) {
	var h helperArgs
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "--help" || a == "-help":
			h.help = true
			return h, nil
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case a == "-o" || a == "-t":
			if i+1 == len(args) {
				return h, usagef("%s needs a value", a)
			}
			i++
			if a == "-o" {
				h.options = append(h.options, args[i])
			} else if err := checkHelperType(args[i]); err != nil {
				return h, err
			}
		case strings.HasPrefix(a, "-o"):
			h.options = append(h.options, a[2:])
		case strings.HasPrefix(a, "-t"):
			if err := checkHelperType(a[2:]); err != nil {
				return h, err
			}
		case strings.HasPrefix(a, "--"):
			return h, usagef("unknown flag %q (mount.memfs takes -s, -f, -n, -v, -o OPTIONS)", a)
		case strings.HasPrefix(a, "-N"):
			return h, usagef("-N (another mount namespace) is not supported by mount.memfs")
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				switch c {
				case 's':
					h.sloppy = true
				case 'f':
					h.fake = true
				case 'n':
				case 'v':
					h.verbose = true
				default:
					return h, usagef("unknown flag -%c in %q (mount.memfs takes -s, -f, -n, -v, -o OPTIONS)", c, a)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return h, usagef("want STORE MOUNTPOINT, got %d argument(s)", len(pos))
	}
	h.store, h.dir = pos[0], pos[1]
	if !strings.HasPrefix(h.store, store.PrefixStore) || len(h.store) == len(store.PrefixStore) {
		return h, usagef("the source must be a memory store id (%s...), not %q", store.PrefixStore, h.store)
	}
	return h, nil
}

// checkHelperType accepts the types mount(8) may name for us.
func checkHelperType(t string) error {
	if t == fs.FSType || t == "fuse."+fs.FSType {
		return nil
	}
	return usagef("-t %s: mount.memfs mounts only type %s", t, fs.FSType)
}

// runMountHelper is main for mount.memfs; it returns the exit status.
func runMountHelper(args []string) int {
	const name = mountHelperName
	h, err := parseHelperArgs(args)
	if err != nil {
		return exitStatus(name, err)
	}
	if h.help {
		fmt.Print(mountHelperUsage)
		return 0
	}
	// The options are checked here too, so a mistake is reported at once
	// (not in the child's log); with -s unknown ones are dropped.
	stateDir := envOr(defaultStateDir(), "MEMFS_STATE_DIR")
	var kept []string
	for _, o := range h.options {
		set, _, unknown, err := parseMountOptions(o, h.sloppy)
		if err != nil {
			return exitStatus(name, usagef("-o: %v", err)) // not o: it may hold an api_key=
		}
		for _, u := range unknown {
			fmt.Fprintf(os.Stderr, "%s: ignoring unknown option %q (-s)\n", name, u)
		}
		for _, s := range set {
			if s.name == "state-dir" {
				stateDir = s.value
			}
			if s.name == "mount-mode" && s.value != worker.ModeFUSE {
				return exitStatus(name, usagef("-o mount_mode=%s: %s mounts with FUSE (a folder is not a mount fstab or systemd could see); for directory mode run memfs mount --mount-mode directory", s.value, name))
			}
		}
		kept = append(kept, dropOptions(o, unknown))
	}
	// mount(8) waits for a mount: never a folder in its place.
	childArgs := []string{"mount", "--mount-mode", worker.ModeFUSE, "--store", h.store}
	if o := strings.Join(nonEmpty(kept), ","); o != "" {
		childArgs = append(childArgs, "-o", o)
	}
	childArgs = append(childArgs, "--", h.dir)
	if h.fake {
		if h.verbose {
			fmt.Printf("%s: -f: would run memfs %s\n", name, strings.Join(childArgs, " "))
		}
		return 0
	}
	pid, logPath, err := startMountChild(h, childArgs, stateDir)
	if err != nil {
		return exitStatus(name, err)
	}
	if h.verbose {
		fmt.Printf("%s: %s mounted at %s by memfs mount (pid %d); its log: %s\n", name, h.store, h.dir, pid, logPath)
	}
	return 0
}

// startMountChild starts memfs mount in the background and waits for the
// store to be mounted at h.dir. It returns the child's pid and log file.
// A child that exits first is an error holding its last log lines and
// its exit status.
func startMountChild(h helperArgs, childArgs []string, stateDir string) (int, string, error) {
	abs, err := filepath.Abs(h.dir)
	if err != nil {
		return 0, "", err
	}
	// A mount already there would pass for ours below.
	if mounted, _ := fs.IsMounted(resolvePath(abs)); mounted {
		return 0, "", fmt.Errorf("%s is already a mount point; unmount it first (umount %s)", abs, abs)
	}
	logPath, logFile, start, err := openMountLog(stateDir, h.store)
	if err != nil {
		return 0, "", err
	}
	defer logFile.Close()
	exe, err := os.Executable()
	if err != nil {
		return 0, "", fmt.Errorf("find this binary to start memfs mount: %w", err)
	}
	fmt.Fprintf(logFile, "%s mount.memfs: starting memfs %s\n", time.Now().Format(time.RFC3339), strings.Join(childArgs, " "))
	cmd := &exec.Cmd{
		Path:   exe,
		Args:   append([]string{"memfs"}, childArgs...), // not mount.memfs: the child is memfs mount
		Stdout: logFile,
		Stderr: logFile,
		// A session of its own: no terminal's hangup or Ctrl-C reaches
		// it, and it outlives mount(8) and this process.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("start memfs mount: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Stops the child that has not mounted yet: it would otherwise mount
	// with no one waiting for it.
	stopChild := func() {
		cmd.Process.Signal(syscall.SIGTERM) // it may have just exited
		select {
		case <-exited:
		case <-time.After(mountHelperStopWait):
		}
	}
	// Ctrl-C on mount(8), or systemd giving up on the mount, while we wait.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(stop)
	tick := time.NewTicker(mountHelperPoll)
	defer tick.Stop()
	deadline := time.NewTimer(mountHelperWait)
	defer deadline.Stop()
	for {
		select {
		case err := <-exited:
			return 0, logPath, childFailed(err, logPath, start)
		case s := <-stop:
			stopChild()
			return 0, logPath, fmt.Errorf("%v while waiting for the mount: memfs mount was stopped (its log: %s)", s, logPath)
		case <-deadline.C:
			stopChild()
			return 0, logPath, fmt.Errorf("the store was not mounted at %s within %s; memfs mount was stopped (its log: %s)%s",
				abs, mountHelperWait, logPath, logTail(logPath, start))
		case <-tick.C:
			if storeMountedAt(abs, h.store) {
				return cmd.Process.Pid, logPath, nil
			}
		}
	}
}

// childFailed is the error of a memfs mount that exited before mounting:
// its status (an exitError, so mount.memfs exits with it) and what it
// logged.
func childFailed(waitErr error, logPath string, start int64) error {
	code := 1
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) && ee.ExitCode() > 0 {
		code = ee.ExitCode()
	}
	// A nil waitErr is a child that exited 0 without the store being
	// listed at the mount point: said as such, never as "<nil>".
	how := "exit status 0"
	if waitErr != nil {
		how = waitErr.Error()
	}
	return exitError{code: code, msg: fmt.Sprintf("memfs mount exited before mounting (%s; its log: %s)%s", how, logPath, logTail(logPath, start))}
}

// openMountLog opens <stateDir>/log/mount-<store>.log for appending
// (directories 0700, file 0600, like everything in the state dir) and
// returns its size before this run, where this run's lines start.
func openMountLog(stateDir, storeID string) (string, *os.File, int64, error) {
	dir := filepath.Join(stateDir, "log")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, 0, fmt.Errorf("the log directory of mount.memfs: %w", err)
	}
	p := filepath.Join(dir, "mount-"+storeID+".log")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", nil, 0, fmt.Errorf("the log of mount.memfs: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return "", nil, 0, err
	}
	return p, f, fi.Size(), nil
}

// logTailLines is how much of the child's log an error repeats.
const logTailLines = 10

// logTail returns the last lines this run wrote to the log, indented
// below a newline ("" if none).
func logTail(path string, start int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > logTailLines {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "\n  " + strings.Join(lines, "\n  ")
}

// storeMountedAt reports whether the kernel lists a memfs mount of
// storeID at dir (symlinks in dir resolved, as mountinfo shows paths).
func storeMountedAt(dir, storeID string) bool {
	real := resolvePath(dir)
	mounts, err := fs.Mounts()
	if err != nil {
		return false
	}
	for _, mi := range mounts {
		if mi.Dir == real && mi.FSType == "fuse."+fs.FSType && mi.Source == storeID {
			return true
		}
	}
	return false
}

// resolvePath is dir with its symlinks resolved, or dir when that fails
// (it may not exist yet).
func resolvePath(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return filepath.Clean(dir)
}

// dropOptions removes the options in drop from the comma-separated list.
func dropOptions(list string, drop []string) string {
	if len(drop) == 0 {
		return list
	}
	var out []string
	for _, o := range strings.Split(list, ",") {
		if !slices.Contains(drop, o) {
			out = append(out, o)
		}
	}
	return strings.Join(out, ",")
}

func nonEmpty(list []string) []string {
	var out []string
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
