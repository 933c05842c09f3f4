package harness

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tmpfsSizeRe is what SmallTmpfs accepts as a size: a tmpfs size= value
// with a k, m or g suffix. Anything else (a comma above all) could smuggle
// other mount options in.
var tmpfsSizeRe = regexp.MustCompile(`^[1-9][0-9]*[kmgKMG]?$`)

// SmallTmpfs mounts a tmpfs of size (a tmpfs size= value: "512k", "3m")
// at a new temporary directory of mode 0700 and returns it, for tests of
// what happens when a state dir's disk fills up (see FillDisk). It is
// detached (MNT_DETACH) when the test ends, before the directory is
// removed. Mounting needs root: without it the test is skipped, or fails
// when CI=true (CI runs as root, so there it means a broken setup).
func SmallTmpfs(t testing.TB, size string) string {
	t.Helper()
	if reason, fatal := rootRefusal(os.Geteuid(), os.Getenv("CI")); reason != "" {
		if fatal {
			t.Fatalf("SmallTmpfs: %s", reason)
		}
		t.Skipf("SmallTmpfs: %s", reason)
	}
	if !tmpfsSizeRe.MatchString(size) {
		t.Fatalf("SmallTmpfs: size %q: want a number with an optional k, m or g suffix, e.g. 3m", size)
	}
	// t.TempDir registers its removal first, so it runs after the
	// unmount below (cleanups run last-in first-out).
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("SmallTmpfs: mount a %s tmpfs at %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("SmallTmpfs: unmount %s: %v", dir, err)
		}
	})
	return dir
}

// rootRefusal says why a process with effective uid euid can't mount, and
// whether that fails the test rather than skips it: ci is $CI, and CI runs
// as root.
func rootRefusal(euid int, ci string) (reason string, fatal bool) {
	if euid == 0 {
		return "", false
	}
	return "needs root to mount a tmpfs (CI runs as root)", ci == "true"
}

// fillCap is the most free space FillDisk takes. More means dir is on a
// real disk, and filling it would break every other process on the machine.
const fillCap = 256 << 20

// FillDisk writes a file named filler-* in dir until the file system
// answers ENOSPC, and returns a func that removes it (also run when the
// test ends; calling it again does nothing). While it is there no new
// block can be allocated: a write that needs one fails with ENOSPC, though
// one that fits in a block a file already has may still succeed, as on
// any full disk. dir should be a SmallTmpfs: FillDisk fails the test if
// its file system has more than 256 MiB free.
func FillDisk(t testing.TB, dir string) (release func()) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("FillDisk: statfs %s: %v", dir, err)
	}
	if free := st.Bfree * uint64(st.Bsize); free > fillCap {
		t.Fatalf("FillDisk: %s has %d MiB free, over the %d MiB cap: fill a SmallTmpfs, not a real disk", dir, free>>20, fillCap>>20)
	}
	f, err := os.CreateTemp(dir, "filler-")
	if err != nil {
		t.Fatalf("FillDisk: %v", err)
	}
	name := f.Name()
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("FillDisk: release: %v", err)
			}
		})
	}
	t.Cleanup(release)
	// A short write fills the last block it can; the next write then
	// fails with ENOSPC.
	buf := make([]byte, 64<<10)
	var werr error
	for werr == nil {
		_, werr = f.Write(buf)
	}
	if cerr := f.Close(); cerr != nil && !errors.Is(cerr, syscall.ENOSPC) {
		t.Fatalf("FillDisk: close %s: %v", name, cerr)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("FillDisk: write %s: %v, want ENOSPC", name, werr)
	}
	return release
}
