package fs

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// goneWatch tells when a mount has left this mount namespace.
type goneWatch struct {
	once sync.Once
	ch   chan struct{}
}

// tablePoll is how long one wait for a change of the mount table lasts
// before the watcher looks whether the FUSE server ended meanwhile (then it
// stops). The table itself wakes it at once when it changes.
const tablePoll = 2000 // milliseconds

// Gone returns a channel closed once the mount has left this mount
// namespace, unmounted by this process or from outside:
//
//   - the kernel ended the FUSE connection (umount, fusermount3 -u, or an
//     umount -l of a mount nobody uses): the server's loops end;
//   - the mount point left the mount table while files in it are still
//     open (umount -l of a busy mount): the kernel keeps the connection
//     until the last of them closes, which may be never (a shell whose
//     working directory it is), but no path reaches the mount any more.
//
// The second is seen by waiting on /proc/self/mountinfo, which the kernel
// wakes (POLLPRI) whenever this namespace's mount table changes, and then
// looking for the mount point; nothing is read while the table stays the
// same. The watch ends with the mount.
func (m *Mount) Gone() <-chan struct{} {
	m.gone.once.Do(func() {
		m.gone.ch = make(chan struct{})
		var closeOnce sync.Once
		closeGone := func() { closeOnce.Do(func() { close(m.gone.ch) }) }
		go func() {
			<-m.ended
			closeGone()
		}()
		go func() {
			if watchTable(m.left, m.ended) {
				closeGone()
			}
		}()
	})
	return m.gone.ch
}

// left reports whether this mount has left the mount table, by its id (a
// mount made since at the same path, a bind mount say, is not it).
func (m *Mount) left() bool {
	p, err := m.place()
	return err == nil && p.gone
}

// watchTable waits, looking again at every change of the mount table,
// until left reports true (true) or ended is closed (false). If the mount table can't be watched it waits for
// ended alone: the server's end still reports every unmount but the lazy
// detach of a busy mount.
func watchTable(left func() bool, ended <-chan struct{}) bool {
	// A raw descriptor, not an os.File: Go registers the files it opens
	// with its own epoll when they can be polled, as this one can, and
	// the runtime's epoll_wait then consumes the table's change event
	// (the kernel reports each change once per open file) before this
	// poll sees it; the watch missed an unmount now and then.
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		<-ended
		return false
	}
	defer unix.Close(fd) //nolint:errcheck
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for {
		// Looked at after opening the file and after every wake-up, so a
		// change between the two is never missed.
		if left() {
			return true
		}
		for {
			select {
			case <-ended:
				return false
			default:
			}
			fds[0].Revents = 0
			n, err := unix.Poll(fds, tablePoll)
			if err != nil && !errors.Is(err, unix.EINTR) {
				<-ended
				return false
			}
			if n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 {
				break // the table changed: look again
			}
		}
	}
}
