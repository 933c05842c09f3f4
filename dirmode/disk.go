package dirmode

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Every access to the store's folder goes through a file descriptor of its
// root and openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS (or, on a
// kernel without openat2, a walk one component at a time with O_NOFOLLOW):
// a symbolic link planted anywhere in the folder can't make the worker read
// or write outside it, and no link is ever followed.

// resolveFlags keep a lookup below the root and off every link.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// noOpenat2 is set once openat2 turns out not to exist (ENOSYS).
var noOpenat2 bool

// rel is a store path ("/a/b.md") as a path relative to the root ("a/b.md";
// "." for the root).
func rel(p string) string {
	if p == "/" || p == "" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// openBeneath opens the store path p below root with flags (O_NOFOLLOW
// and O_CLOEXEC are added), following no symbolic link on the way.
func openBeneath(root int, p string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2 {
		fd, err := unix.Openat2(root, rel(p), &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveFlags})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2 = true
	}
	return walkOpen(root, rel(p), flags, mode)
}

// walkOpen is openBeneath without openat2: each directory of the path is
// opened with O_NOFOLLOW from the one before it.
func walkOpen(root int, r string, flags int, mode uint32) (int, error) {
	if r == "." {
		return unix.Openat(root, ".", flags, mode)
	}
	segs := strings.Split(r, "/")
	dir := root
	for i, s := range segs {
		if s == ".." || s == "." || s == "" {
			if dir != root {
				unix.Close(dir)
			}
			return -1, unix.EXDEV
		}
		if i == len(segs)-1 {
			fd, err := unix.Openat(dir, s, flags, mode)
			if dir != root {
				unix.Close(dir)
			}
			return fd, err
		}
		next, err := unix.Openat(dir, s, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != root {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir = next
	}
	return -1, unix.EINVAL
}

// openDir opens the directory at store path p below root for reading.
func openDir(root int, p string) (int, error) {
	return openBeneath(root, p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// parentOf splits a store path into its folder and name.
func parentOf(p string) (dir, name string) {
	return path.Dir(p), path.Base(p)
}

// lstatAt is fstatat(AT_SYMLINK_NOFOLLOW) of name in the directory dirfd.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// readFile reads the regular file at store path p below root, with its
// stat before and after: a file that changed while it was read is
// reported unstable, to be looked at again. A path that is not a regular
// file (a link, a FIFO: O_NOFOLLOW and O_NONBLOCK keep either from
// holding the read) is an error.
func readFile(root int, p string, max int64) (content []byte, st unix.Stat_t, stable bool, err error) {
	fd, err := openBeneath(root, p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, st, false, err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, false, fmt.Errorf("%s is not a regular file", p)
	}
	if st.Size > max {
		return nil, st, true, errTooLarge(st.Size)
	}
	buf := make([]byte, st.Size+1) // one more: a file that grew shows it
	n := 0
	for n < len(buf) {
		c, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, st, false, err
		}
		if c == 0 {
			break
		}
		n += c
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, st, false, err
	}
	stable = int64(n) == st.Size && sameStat(st, after)
	return buf[:n], after, stable, nil
}

// sameStat says whether two stats of a file show the same content: the
// same inode, size, mtime and ctime.
func sameStat(a, b unix.Stat_t) bool {
	return a.Ino == b.Ino && a.Dev == b.Dev && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// isNotExist reports an error that means "nothing there".
func isNotExist(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist)
}
