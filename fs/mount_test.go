package fs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"
	"golang.org/x/sys/unix"
)

// mountStoreID names this process's test mounts, so TestMain finds the
// ones it left behind (and only those: other processes mount too).
var mountStoreID = fmt.Sprintf("memstore_fstest%d", os.Getpid())

func TestMain(m *testing.M) {
	code := m.Run()
	// No mount may outlive the tests; detach any left behind.
	if mounts, err := Mounts(); err == nil {
		for _, mi := range mounts {
			if mi.FSType == "fuse."+FSType && mi.Source == mountStoreID {
				fmt.Fprintf(os.Stderr, "FAIL: a test left %s mounted; detaching it\n", mi.Dir)
				_ = unix.Unmount(mi.Dir, unix.MNT_DETACH)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// needFUSE skips a test that mounts when this process can't. With CI=true
// it fails instead (as test/'s mtRequireFUSE does): CI runs as root with
// /dev/fuse, and a FUSE test skipped there would hide that nothing was
// mounted.
func needFUSE(t testing.TB) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("needs root and /dev/fuse: not running as root")
	}
	if err := CheckFUSE(); err != nil {
		skip("needs root and /dev/fuse: %v", err)
	}
}

// testMount is a tree mounted for one test.
type testMount struct {
	dir string
	tr  *Tree
	j   *recJournal // nil for a read-only tree
}

// mountTestTree builds a tree (recording journal unless read-only) holding
// files, mounts it at a fresh directory, and unmounts it when the test
// ends, checking that the mount is gone.
func mountTestTree(t *testing.T, opts Options, files ...File) *testMount {
	t.Helper()
	return mountTestTreeWith(t, opts, MountOptions{}, files...)
}

// mountTestTreeWith is mountTestTree with the mount's options.
func mountTestTreeWith(t *testing.T, opts Options, mopts MountOptions, files ...File) *testMount {
	t.Helper()
	needFUSE(t)
	opts.StoreID = mountStoreID
	tr, j := newTestTree(t, opts)
	tr.Load(files)
	dir := t.TempDir()
	m, err := MountTree(dir, tr, mopts)
	if err != nil {
		t.Fatalf("MountTree: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Unmount(ctx); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		done := make(chan struct{})
		go func() { m.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the server of %s did not stop after Unmount", dir)
		}
		if mounted, err := IsMounted(dir); err != nil || mounted {
			t.Errorf("after Unmount: IsMounted(%s) = %v, %v; want false", dir, mounted, err)
		}
	})
	if mounted, err := IsMounted(dir); err != nil || !mounted {
		t.Fatalf("after MountTree: IsMounted(%s) = %v, %v; want true", dir, mounted, err)
	}
	return &testMount{dir: dir, tr: tr, j: j}
}

// path is p (a store path) on the mount.
func (m *testMount) path(p string) string { return m.dir + p }

// sh runs a shell command in the mount's root, as a user would, and
// returns its combined output. The child changes directory itself, after
// exec: a chdir into the mount between fork and exec would wait on this
// very process while it waits for the exec (a deadlock with GOMAXPROCS=1).
func (m *testMount) sh(t *testing.T, cmd string) (string, error) {
	t.Helper()
	c := exec.Command("sh", "-c", `cd "$MNT" || exit 99; `+cmd)
	c.Dir = "/"
	c.Env = append(os.Environ(), "MNT="+m.dir, "LC_ALL=C")
	out, err := c.CombinedOutput()
	return string(out), err
}

// mustSh runs cmd and fails the test unless it succeeds.
func (m *testMount) mustSh(t *testing.T, cmd string) string {
	t.Helper()
	out, err := m.sh(t, cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return out
}

// shFails runs cmd and fails the test unless it fails with msg in its output.
func (m *testMount) shFails(t *testing.T, cmd, msg string) {
	t.Helper()
	out, err := m.sh(t, cmd)
	if err == nil {
		t.Errorf("%s succeeded, want %q\n%s", cmd, msg, out)
	} else if !strings.Contains(out, msg) {
		t.Errorf("%s: %v, output %q, want %q", cmd, err, out, msg)
	}
}

// posixSkip lists the posixtest tests that don't apply to a memory store,
// with why. Every other test in posixtest.All runs, each on a fresh mount.
var posixSkip = map[string]string{
	"Link":                "hard links: link(2) is EPERM, a memory has one path",
	"LinkUnlinkRename":    "hard links: link(2) is EPERM, a memory has one path",
	"SymlinkReadlink":     "symlinks: symlink(2) is EPERM, a store holds only files and directories",
	"SetattrSymlink":      "symlinks: symlink(2) is EPERM, a store holds only files and directories",
	"OpenSymlinkRace":     "symlinks: symlink(2) is EPERM, a store holds only files and directories",
	"XAttr":               "extended attributes are ENOTSUP by design (checked in TestMountOps)",
	"XAttrLarge":          "extended attributes are ENOTSUP by design (checked in TestMountOps)",
	"FileLarge":           "writes 131,195 bytes; a memory holds at most 102,400 (EFBIG, checked in TestMountOps)",
	"Fallocate":           "fallocate is not an operation of the store (EOPNOTSUPP)",
	"FallocateKeepSize":   "fallocate is not an operation of the store (EOPNOTSUPP)",
	"FcntlFlockLocksFile": "expects a process to conflict with its own POSIX record lock, which POSIX doesn't do; go-fuse's own suite skips it",
}

func TestPosix(t *testing.T) {
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for name := range posixSkip {
		if _, ok := posixtest.All[name]; !ok {
			t.Errorf("posixSkip lists %s, which posixtest.All doesn't have", name)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if why, ok := posixSkip[name]; ok {
				t.Skip(why)
			}
			m := mountTestTree(t, Options{})
			// In a directory of its own, as go-fuse's suite runs them: the
			// mount's root holds the marker file, and ReadDirBasic wants
			// to see only the files it made.
			dir := m.path("/posix")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, dir)
		})
	}
}

func TestMountUnmount(t *testing.T) {
	m := mountTestTree(t, Options{})
	mounts, err := Mounts()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mi := range mounts {
		if mi.Dir == m.dir {
			found = true
			if mi.FSType != "fuse.memfs" || mi.Source != mountStoreID {
				t.Errorf("mountinfo shows %s %s, want fuse.memfs %s", mi.FSType, mi.Source, mountStoreID)
			}
		}
	}
	if !found {
		t.Fatalf("%s is not in /proc/self/mountinfo", m.dir)
	}
	if _, err := PrepareMountpoint(m.dir); err == nil {
		t.Error("PrepareMountpoint accepted a mount point in use")
	}
}

func TestMountUnmountBusyDetaches(t *testing.T) {
	needFUSE(t)
	tr, _ := newTestTree(t, Options{StoreID: mountStoreID})
	dir := t.TempDir()
	m, err := MountTree(dir, tr, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An open directory keeps the mount busy: Unmount retries, then
	// detaches lazily when its context ends.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := m.Unmount(ctx); err != nil {
		t.Errorf("Unmount of a busy mount: %v", err)
	}
	if mounted, _ := IsMounted(dir); mounted {
		t.Error("a busy mount is still mounted after Unmount")
	}
	if err := d.Close(); err != nil {
		t.Errorf("close of a directory of a detached mount: %v", err)
	}
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the server did not stop once the detached mount's last user went")
	}
}
