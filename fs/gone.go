package fs

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// tableWatch follows a mount in the mount table (MountTree starts it; it
// ends with the mount's FUSE server): when the mount leaves this mount
// namespace (Gone) and what covers it (Covered, MountOptions.OnCover).
type tableWatch struct {
	gone      chan struct{} // closed once, by closeGone
	closeOnce sync.Once
	onCover   func([]Cover) // MountOptions.OnCover
	// quiet is set when Unmount begins: the covers it detaches are its to
	// report, not the watch's.
	quiet atomic.Bool

	mu     sync.Mutex
	covers []Cover // the last covers found; GUARDED_BY(mu), written by the watch alone
}

func (w *tableWatch) closeGone() { w.closeOnce.Do(func() { close(w.gone) }) }

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
// looking for the mount by its id; nothing is read while the table stays
// the same. The same look finds what covers the mount (Covered).
func (m *Mount) Gone() <-chan struct{} { return m.watch.gone }

// startWatch starts following the mount in the mount table: one goroutine
// that ends with the FUSE server, and one that closes Gone when it ends.
func (m *Mount) startWatch(onCover func([]Cover)) {
	m.watch.gone = make(chan struct{})
	m.watch.onCover = onCover
	go func() {
		<-m.ended
		m.watch.closeGone()
	}()
	go func() {
		if watchTable(m.look, m.ended) {
			m.watch.closeGone()
		}
	}()
}

// look reads the mount table once: it records what covers the mount,
// telling OnCover when that changed, and reports whether the mount has
// left the table, by its id (a mount made since at the same path, a bind
// mount say, is not it). An unreadable table changes nothing.
func (m *Mount) look() bool {
	p, err := m.place()
	if err != nil {
		return false
	}
	if p.gone || m.watch.quiet.Load() {
		return p.gone
	}
	w := &m.watch
	w.mu.Lock()
	changed := !sameCovers(w.covers, p.covers)
	if changed {
		w.covers = p.covers
	}
	w.mu.Unlock()
	if changed && w.onCover != nil {
		w.onCover(slices.Clone(p.covers))
	}
	return false
}

// watchTable waits, looking again at every change of the mount table,
// until look reports true (true) or ended is closed (false). If the mount
// table can't be watched it waits for ended alone: the server's end still
// reports every unmount but the lazy detach of a busy mount.
func watchTable(look func() bool, ended <-chan struct{}) bool {
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
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for {
		// Looked at after opening the file and after every wake-up, so a
		// change between the two is never missed.
		if look() {
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
