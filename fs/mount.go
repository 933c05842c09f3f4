package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// FSType is the subtype of every memfs mount: /proc/self/mountinfo shows
// "fuse.memfs", with the store id as the source (fsname).
const FSType = "memfs"

// MountOptions configure a mount.
type MountOptions struct {
	// AllowOther lets users other than the one who mounts enter the mount
	// (FUSE's allow_other; a non-root user needs user_allow_other in
	// /etc/fuse.conf). The kernel checks every access against the
	// entries' owners and modes either way (default_permissions).
	AllowOther bool
	// Debug logs every FUSE request (very verbose).
	Debug bool
	// Observer, when set, is told of every FUSE request the mount
	// answers, with its latency and errno (observe.go). nil costs nothing.
	Observer OpObserver
	// OnUnmountWait, when set, is called once by Unmount when its first
	// attempt fails and the mount is still there (EBUSY, as root: a
	// process has a file open in it or works in it), with Unmount's
	// context and the attempt's error, before Unmount retries until ctx
	// ends and then detaches lazily: the caller says what the wait is and
	// how to cut it short.
	OnUnmountWait func(ctx context.Context, err error)
	// OnCover, when set, is called whenever what covers the mount changes
	// (Covered): a mount appears over or inside it, or one goes (nil when
	// none is left). It is called from the mount-table watch, one call at
	// a time and in order, from MountTree until the FUSE server ends or
	// Unmount begins; it must not block for long.
	OnCover func(covers []Cover)
}

// Mount is one mounted tree.
type Mount struct {
	// Dir is where the tree is mounted, as /proc/self/mountinfo lists it:
	// absolute, every symlink of the path MountTree was given resolved.
	Dir    string
	Tree   *Tree
	server *fuse.Server
	notify *notifier
	watch  tableWatch                           // gone.go
	id     mountIdentity                        // the mount in /proc/self/mountinfo (unmount.go)
	ended  chan struct{}                        // closed once the FUSE server has ended
	onWait func(ctx context.Context, err error) // MountOptions.OnUnmountWait
}

// CheckFUSE reports, with a fix, why this process can't mount: /dev/fuse
// missing or not accessible, or (not root) fusermount3 missing.
func CheckFUSE() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("/dev/fuse is missing: load the fuse kernel module (modprobe fuse), or give the container the device (--device /dev/fuse)")
		}
		return fmt.Errorf("/dev/fuse is not accessible (%v): run as root, or give this user access to /dev/fuse", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			if _, err2 := exec.LookPath("fusermount"); err2 != nil {
				return errors.New("fusermount3 is not installed: as a normal user, mounting needs it (Debian/Ubuntu: apt-get install fuse3), or run as root")
			}
		}
	}
	return nil
}

// PrepareMountpoint creates dir (0700) if missing and accepts an existing
// empty directory; anything else is refused and left exactly as found. It
// reports whether it created the directory. Symlinks in dir are followed,
// as mount(8) follows them, the last component's too.
func PrepareMountpoint(dir string) (created bool, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if _, lerr := os.Lstat(dir); lerr == nil {
			target, _ := os.Readlink(dir)
			return false, fmt.Errorf("the mount point %s is a symbolic link to %s, which does not exist; create it or pick another path", dir, target)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return false, fmt.Errorf("create mount point %s: %w", dir, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("mount point %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("something already exists at the mount point %s and it is not a directory; remove it or pick another path", dir)
	}
	real, err := RealPath(dir)
	if err != nil {
		return false, err
	}
	if mounted, _ := IsMounted(real); mounted {
		return false, fmt.Errorf("%s is already a mount point; unmount it first (umount %s) or pick another path", dir, dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("mount point %s: %w", dir, err)
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return false, fmt.Errorf("the mount point %s is not empty; memfs mounts only on an empty directory", dir)
	}
	return false, nil
}

// MountTree mounts t at dir. As root it mounts directly (no fusermount);
// otherwise go-fuse uses fusermount3.
func MountTree(dir string, t *Tree, opts MountOptions) (*Mount, error) {
	if err := CheckFUSE(); err != nil {
		return nil, err
	}
	// The kernel resolves every symlink in the mount point and lists the
	// mount at the resolved path: Dir must be that path, or the watch for
	// an unmount (Gone) and Unmount would look for a mount point that
	// mountinfo never lists (a mount reached through a symlink would be
	// taken as unmounted from outside at once).
	abs, err := RealPath(dir)
	if err != nil {
		return nil, err
	}
	timeout := cacheTimeout
	mo := fuse.MountOptions{
		FsName:      t.opts.StoreID,
		Name:        FSType,
		DirectMount: os.Geteuid() == 0,
		AllowOther:  opts.AllowOther,
		Debug:       opts.Debug,
		MaxWrite:    128 * 1024,
	}
	// The kernel enforces modes and owners, for every user, as on a
	// local filesystem (root's usual exceptions aside).
	mo.Options = append(mo.Options, "default_permissions")
	if t.opts.ReadOnly {
		// MS_RDONLY on the mount itself (direct mount as root), and "ro"
		// for fusermount3 and the superblock.
		mo.Options = append(mo.Options, "ro")
		mo.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY
	}
	root := &fnode{t: t}
	gopts := &gofs.Options{
		MountOptions:    mo,
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		RootStableAttr:  &gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: RootIno},
		// Modes are exactly what was set: 0 stays 0.
		NullPermissions: true,
	}
	// What gofs.Mount does, with the observer between the kernel and the
	// node bridge when there is one.
	raw := gofs.NewNodeFS(root, gopts)
	if opts.Observer != nil {
		raw = &observedFS{RawFileSystem: raw, obs: opts.Observer}
	}
	server, err := fuse.NewServer(raw, abs, &gopts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		// go-fuse's serve loop ends by itself when the mount failed.
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	ended := make(chan struct{})
	go func() {
		server.Wait()
		close(ended)
	}()
	id, err := mountID(abs, t.opts.StoreID)
	if err != nil {
		unix.Unmount(abs, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	n := newNotifier(root.EmbeddedInode(), t.log)
	t.mu.Lock()
	t.notify = n
	t.mu.Unlock()
	m := &Mount{Dir: abs, Tree: t, server: server, notify: n, id: id, ended: ended, onWait: opts.OnUnmountWait}
	m.startWatch(opts.OnCover)
	return m, nil
}

// RealPath is dir made absolute with every symlink in it resolved: the
// path /proc/self/mountinfo lists a mount on dir at. dir must exist.
func RealPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w", dir, err)
	}
	return real, nil
}

// Wait blocks until the FUSE connection ends (unmounted by us or by
// someone else; see Gone for a busy mount detached lazily).
func (m *Mount) Wait() { <-m.ended }

// IsMounted reports whether dir is a mount point, from /proc/self/mountinfo.
// It compares cleaned absolute paths and resolves no symlink: the kernel
// lists a mount at the path it was mounted on with every symlink resolved,
// so a caller that may hold a path through a symlink resolves it first.
func IsMounted(dir string) (bool, error) {
	mounts, err := Mounts()
	if err != nil {
		return false, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	for _, mi := range mounts {
		if filepath.Clean(mi.Dir) == abs {
			return true, nil
		}
	}
	return false, nil
}

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	Dir     string
	FSType  string
	Source  string
	Options string // the per-mount options: "ro,nosuid,..." or "rw,..."
}

// ReadOnly reports whether the kernel mounted it read-only.
func (mi MountInfo) ReadOnly() bool {
	for _, o := range strings.Split(mi.Options, ",") {
		if o == "ro" {
			return true
		}
	}
	return false
}

// Mounts lists the mounts of this process's namespace, parsed by
// github.com/moby/sys/mountinfo (octal escapes decoded).
func Mounts() ([]MountInfo, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	out := make([]MountInfo, 0, len(infos))
	for _, mi := range infos {
		out = append(out, MountInfo{Dir: mi.Mountpoint, FSType: mi.FSType, Source: mi.Source, Options: mi.Options})
	}
	return out, nil
}
