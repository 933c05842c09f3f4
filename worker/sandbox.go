package worker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The agent's sandbox (--run-tools; docs/operating.md, "The agent's
// sandbox").
//
// The model's output is untrusted input, and the worker runs as root (it
// mounts). So the session's tool runner — the SDK's runner with its bash,
// read, write, edit, glob and grep tools — does not run in the worker: it
// runs as a separate process (memfs __tools-runner, toolsrunner.go) in a
// sandbox made by bubblewrap, started as root:
//
//   - namespaces of its own: mount, PID (the worker and every other
//     process of the host are invisible; the sandbox ends, everything in
//     it killed, when bwrap ends), IPC, UTS, cgroup, and with
//     --tools-network none a network namespace holding only loopback;
//   - a root of its own, a tmpfs, holding only: /usr, /bin, /sbin, /lib*
//     and /etc read-only (with /etc's secrets masked: shadow files, ssh
//     and TLS private keys, /etc/memfs and the key files the worker was
//     given), a private /tmp, /var/tmp and /run, a /proc of its own PID
//     namespace, a minimal /dev (null, zero, full, random, urandom, tty,
//     a pts of its own, shm), the session's work directory and the
//     session's own mounts — the read-only stores bound read-only. Not
//     there: the state dir (journals, conflict logs, keys), the data dir,
//     other sessions' work directories and mount paths, /home, /root,
//     /var, /sys;
//   - bwrap keeps only CAP_SETUID, CAP_SETGID and CAP_SETPCAP and sets
//     no_new_privs; setpriv (util-linux) then empties the bounding set,
//     clears the supplementary groups and becomes the tools user, so the
//     runner and everything it starts run with that uid/gid, no
//     capability in any set, and no way to gain one (no_new_privs);
//   - the runner holds no key: it reaches the API through a unix socket
//     bound into the sandbox (apiproxy.go), served by the worker, which
//     adds the session token itself and forwards only the routes the
//     tool runner uses, of this session only.
//
// A worker that is not root runs bwrap as its own user (which then needs
// unprivileged user namespaces) and the tools as that same user.

// Network modes of the sandbox (--tools-network).
const (
	NetworkHost = "host" // the host's network (the default)
	NetworkNone = "none" // a network namespace with only loopback
)

// ToolsUser is the unprivileged user the agent's tools run as.
type ToolsUser struct {
	Name     string
	UID, GID uint32
}

func (u ToolsUser) String() string {
	if u.Name != "" {
		return fmt.Sprintf("%s (uid %d, gid %d)", u.Name, u.UID, u.GID)
	}
	return fmt.Sprintf("uid %d, gid %d", u.UID, u.GID)
}

// sandboxPaths inside the sandbox.
const (
	sandboxExe    = "/run/memfs/memfs"    // this binary, bound read-only
	sandboxSocket = "/run/memfs/api.sock" // the API proxy's socket
)

// sandboxSpec is everything the sandbox of one session is made from.
type sandboxSpec struct {
	Bwrap, Setpriv string // the tools' paths on the host
	Exe            string // this binary on the host
	Socket         string // the API proxy's socket on the host
	Workdir        string
	Mounts         []sandboxMount
	Network        string
	User           ToolsUser
	// Privileged: bwrap runs as root, so the caps are cut to what setpriv
	// needs and setpriv becomes User. Else bwrap runs as the worker's user,
	// who is also User.
	Privileged bool
	// Hide are files and directories masked inside the sandbox (key files);
	// only those under a bound tree matter.
	Hide []string
	// Host lists what exists on the host: the system directories and the
	// secrets to mask (statPaths; a test passes its own).
	Host map[string]hostEntry
}

// sandboxMount is one of the session's mounts.
type sandboxMount struct {
	Path     string
	ReadOnly bool
}

// hostEntry is what is at a path on the host.
type hostEntry struct {
	Dir     bool
	Symlink string // the target, for a symlink
}

// systemDirs are bound read-only when they are directories, and made the
// same symlinks when they are symlinks (merged /usr).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// etcSecrets are masked inside the sandbox even though the tools user
// could not read most of them anyway.
var etcSecrets = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/ssh", "/etc/ssl/private", "/etc/memfs", "/etc/credstore", "/etc/credstore.encrypted",
}

// statPaths looks up on the host every path bwrapArgs asks about.
func statPaths(paths []string) map[string]hostEntry {
	out := map[string]hostEntry{}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		e := hostEntry{Dir: fi.IsDir()}
		if fi.Mode()&os.ModeSymlink != 0 {
			e.Symlink, _ = os.Readlink(p)
			if e.Symlink == "" {
				continue
			}
		}
		out[p] = e
	}
	return out
}

// bwrapArgs is the bwrap command line of a sandbox: a pure function of the
// spec (tested as such).
func bwrapArgs(s sandboxSpec) []string {
	a := []string{s.Bwrap,
		"--die-with-parent", "--new-session",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "memfs-tools",
	}
	if s.Network == NetworkNone {
		a = append(a, "--unshare-net")
	}
	for _, d := range systemDirs {
		switch e, ok := s.Host[d]; {
		case !ok:
		case e.Symlink != "":
			a = append(a, "--symlink", e.Symlink, d)
		case e.Dir:
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, p := range append(slices.Clone(etcSecrets), s.Hide...) {
		e, ok := s.Host[p]
		if !ok || e.Symlink != "" || !underBound(p) {
			continue
		}
		if e.Dir {
			a = append(a, "--tmpfs", p)
		} else {
			a = append(a, "--ro-bind", "/dev/null", p)
		}
	}
	a = append(a,
		"--proc", "/proc", "--dev", "/dev",
		"--perms", "1777", "--tmpfs", "/tmp",
		"--perms", "1777", "--tmpfs", "/var/tmp",
		"--perms", "0755", "--tmpfs", "/run",
	)
	// Binds come after the tmpfs mounts: a work dir or a mount path under
	// /tmp lands on the sandbox's own /tmp. The folders above them are made
	// 0755 (bwrap would make them 0700, closed to the tools user).
	made := map[string]bool{"/": true, "/tmp": true, "/var/tmp": true, "/run": true, "/proc": true, "/dev": true}
	a = append(parents(a, made, s.Workdir), "--bind", s.Workdir, s.Workdir)
	for _, m := range s.Mounts {
		a = parents(a, made, m.Path)
		if m.ReadOnly {
			a = append(a, "--ro-bind", m.Path, m.Path)
		} else {
			a = append(a, "--bind", m.Path, m.Path)
		}
	}
	a = append(a,
		"--perms", "0755", "--dir", filepath.Dir(sandboxExe),
		"--ro-bind", s.Exe, sandboxExe,
		"--bind", s.Socket, sandboxSocket,
		// No --chdir: bwrap, without CAP_DAC_OVERRIDE, may not enter the
		// tools user's 0700 work directory; the runner does.
		"--clearenv", "--setenv", "PATH", defaultToolPath,
	)
	if !s.Privileged {
		return append(a, "--", sandboxExe, ToolsRunnerCommand)
	}
	id := func(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
	return append(a,
		"--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
		"--", s.Setpriv, "--reuid="+id(s.User.UID), "--regid="+id(s.User.GID), "--clear-groups",
		"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs",
		"--", sandboxExe, ToolsRunnerCommand,
	)
}

// parents appends a --dir, 0755, for every folder above p not made yet.
func parents(a []string, made map[string]bool, p string) []string {
	var up []string
	for d := filepath.Dir(p); !made[d] && !underBound(d); d = filepath.Dir(d) {
		up = append(up, d)
		made[d] = true
	}
	for _, d := range slices.Backward(up) {
		a = append(a, "--perms", "0755", "--dir", d)
	}
	return a
}

// underBound reports whether p is inside a tree bwrapArgs binds from the
// host (a file elsewhere is not in the sandbox to begin with).
func underBound(p string) bool {
	for _, d := range systemDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// ToolsRunnerCommand is the hidden memfs command the sandbox runs.
const ToolsRunnerCommand = "__tools-runner"

// ErrNoSandbox says the sandbox's tools are missing.
var ErrNoSandbox = errors.New("the agent's tools run in a bubblewrap sandbox: install bubblewrap (apt-get install bubblewrap) and util-linux's setpriv")

// findSandboxTools finds bwrap and setpriv on the worker's PATH (or
// bwrap at the given path). setpriv must be under /usr, /bin or /sbin: it
// runs inside the sandbox.
func findSandboxTools(bwrap string) (string, string, error) {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	b, err := exec.LookPath(bwrap)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoSandbox, err)
	}
	sp, err := exec.LookPath("setpriv")
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoSandbox, err)
	}
	if sp, err = filepath.EvalSymlinks(sp); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoSandbox, err)
	}
	if !underBound(sp) {
		return "", "", fmt.Errorf("%w: setpriv is at %s, outside /usr, /bin and /sbin, so not in the sandbox", ErrNoSandbox, sp)
	}
	return b, sp, nil
}
