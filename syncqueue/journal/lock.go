package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFileName is the lock file inside a journal directory.
const lockFileName = "lock"

// dirLock is an exclusive flock on a directory's lock file. flock locks
// belong to the open file description, so a second lockDir of the same
// directory fails even within one process.
type dirLock struct {
	f *os.File
}

// lockDir takes the lock of dir without blocking and writes this process's
// pid into the lock file, so that whoever finds it locked can name the
// holder.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	// O_NOFOLLOW: a symlink planted as the lock file must not make the
	// truncate below clobber its target.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		holder := "unknown pid"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = "pid " + strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by another memfs process (%s, recorded in %s)", ErrLocked, dir, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write pid to %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// release empties the lock file (its pid is about to be stale) and closes
// it, which drops the flock.
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	terr := l.f.Truncate(0)
	cerr := l.f.Close()
	l.f = nil
	if cerr != nil {
		return fmt.Errorf("release lock: %w", cerr)
	}
	if terr != nil {
		return fmt.Errorf("release lock: %w", terr)
	}
	return nil
}
