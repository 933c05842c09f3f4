package worker

// Walking a path without following symlinks (docs/operating.md, "The
// worker": a mount path that crosses a symlink is refused).
//
// The memory root is resolved once, with filepath.EvalSymlinks: the
// operator may have made it, or a directory above it, a symlink. Nothing
// below it may be one. A mount path is therefore never resolved by the
// kernel in one go: it is walked one component at a time from a file
// descriptor of the directory above, with openat2(RESOLVE_NO_SYMLINKS |
// RESOLVE_BENEATH) — or, on a kernel without openat2 (ENOSYS, before
// 5.6), openat(O_NOFOLLOW | O_DIRECTORY) and a type check of what was
// opened. The mount directory is then created with mkdirat in the parent
// directory's descriptor, so a symlink swapped in after the check cannot
// redirect it (paths.go, mountdir.go).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// symlinkError reports a symbolic link met where none may be.
type symlinkError struct {
	Path   string // the symlink
	Target string // what it points to ("?" if it could not be read)
}

func (e *symlinkError) Error() string {
	return fmt.Sprintf("%s is a symbolic link to %s", e.Path, e.Target)
}

// noOpenat2 is set once openat2 answered ENOSYS: every later walk uses
// openat(O_NOFOLLOW) per component. Tests set it to run both ways.
var noOpenat2 atomic.Bool

// dirOpenFlags open a directory only to walk and to *at() in it: O_PATH
// needs no read permission on it.
const dirOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// openDirAt opens the directory name inside dirfd without following a
// symlink; dir is dirfd's path, for errors. A symlink is a *symlinkError;
// anything else that is not a directory is ENOTDIR.
func openDirAt(dirfd int, dir, name string) (int, error) {
	p := filepath.Join(dir, name)
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return -1, fmt.Errorf("%s: %q is not a plain path component", p, name)
	}
	fd, err := -1, error(nil)
	for range 3 { // EAGAIN: openat2 raced a rename or a mount; retry
		if !noOpenat2.Load() {
			fd, err = unix.Openat2(dirfd, name, &unix.OpenHow{
				Flags:   dirOpenFlags,
				Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
			})
			if errors.Is(err, unix.ENOSYS) {
				noOpenat2.Store(true)
			}
		}
		if noOpenat2.Load() {
			fd, err = unix.Openat(dirfd, name, dirOpenFlags|unix.O_NOFOLLOW, 0)
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err == nil {
		// O_PATH|O_NOFOLLOW may open the symlink itself: check what it is.
		var st unix.Stat_t
		if err = unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return fd, nil
		}
		unix.Close(fd)
		if err == nil {
			err = unix.ENOTDIR
		}
	}
	return -1, explainAt(dirfd, p, name, err)
}

// explainAt turns the error of opening name in dirfd into one that says
// what is there: a symlink (and where it points) or not a directory.
func explainAt(dirfd int, p, name string, err error) error {
	var st unix.Stat_t
	if serr := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return &symlinkError{Path: p, Target: readlinkAt(dirfd, name)}
		case unix.S_IFDIR:
		default:
			err = unix.ENOTDIR
		}
	}
	return &os.PathError{Op: "open", Path: p, Err: err}
}

// readlinkAt reads the symlink name in dirfd ("?" if it can't).
func readlinkAt(dirfd int, name string) string {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "?"
	}
	return string(buf[:n])
}

// openNoSymlinks opens the directory at the clean absolute path p, walking
// from / one component at a time and following no symlink.
func openNoSymlinks(p string) (int, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return -1, fmt.Errorf("%s is not a clean absolute path", p)
	}
	fd, err := unix.Open("/", dirOpenFlags, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	return walkAt(fd, "/", strings.TrimPrefix(p, "/"))
}

// walkAt walks rel (slash-separated, relative) down from dirfd, whose path
// is dir, following no symlink; it takes dirfd over (closes it) and
// returns the descriptor of the last directory.
func walkAt(dirfd int, dir, rel string) (int, error) {
	for _, name := range strings.Split(rel, "/") {
		if name == "" {
			continue
		}
		next, err := openDirAt(dirfd, dir, name)
		unix.Close(dirfd)
		if err != nil {
			return -1, err
		}
		dirfd, dir = next, filepath.Join(dir, name)
	}
	return dirfd, nil
}

// fdPath names name inside the directory open as fd, for the calls that
// take only a path (umount2): the kernel resolves /proc/self/fd/N to that
// very directory, wherever its path now leads.
func fdPath(fd int, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, name)
}
