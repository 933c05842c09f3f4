package dirmode

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The watch gives latency; the rescan is the truth. inotify watches every
// folder of the store (added by each look's walk, through the descriptor
// the walk opened below the root, so a watch never lands outside it) for
// closes after a write, moves, creations, removals and attribute changes;
// any event asks for a look soon. A watch that can't be added (the
// user's watch limit) and an event queue that overflowed (IN_Q_OVERFLOW)
// lose nothing: the look that follows and the rescan every interval walk
// the whole folder.

const watchMask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB | unix.IN_ONLYDIR

// watcher is the folder's inotify instance.
type watcher struct {
	f      *os.File
	signal func()

	mu        sync.Mutex
	paths     map[int]string  // GUARDED_BY(mu): watch descriptor → store path of its folder
	closed    map[string]bool // GUARDED_BY(mu): files closed after a write (or moved in) since the last look
	overflows int             // GUARDED_BY(mu)
}

// testHookBeforeRead, when set (tests), runs before each read of the
// event queue: a test holds it to let the queue overflow.
var testHookBeforeRead func()

// newWatcher starts an inotify instance; signal is called on each batch of
// events.
func newWatcher(signal func()) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), signal: signal, paths: map[int]string{}, closed: map[string]bool{}}
	go w.read()
	return w, nil
}

// add watches the folder open at fd, whose store path is p.
func (w *watcher) add(p string, fd int) error {
	raw, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var wd int
	var aerr error
	raw.Control(func(ifd uintptr) {
		wd, aerr = unix.InotifyAddWatch(int(ifd), "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	})
	if aerr != nil {
		return aerr
	}
	w.mu.Lock()
	w.paths[wd] = p
	w.mu.Unlock()
	return nil
}

// read reads events until the instance is closed.
func (w *watcher) read() {
	buf := make([]byte, 64*1024)
	for {
		if testHookBeforeRead != nil {
			testHookBeforeRead()
		}
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		w.parse(buf[:n])
		w.signal()
	}
}

// parse notes the events of one read.
func (w *watcher) parse(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[off]))
		name := ""
		if ev.Len > 0 {
			raw := b[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			for i, c := range raw {
				if c == 0 {
					raw = raw[:i]
					break
				}
			}
			name = string(raw)
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			w.overflows++
		case ev.Mask&unix.IN_IGNORED != 0:
			delete(w.paths, int(ev.Wd))
		case ev.Mask&(unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO) != 0 && name != "":
			if dir, ok := w.paths[int(ev.Wd)]; ok {
				w.closed[join(dir, name)] = true
			}
		}
	}
}

// takeClosed returns the files closed since the last call (nil watcher:
// none).
func (w *watcher) takeClosed() map[string]bool {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.closed
	w.closed = map[string]bool{}
	return c
}

// takeOverflows returns how many overflows came since the last call.
func (w *watcher) takeOverflows() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.overflows
	w.overflows = 0
	return n
}

func (w *watcher) close() { w.f.Close() }

// watchDir is the walk's callback: it watches each folder it opens.
// REQUIRES: d.mu held.
func (d *Dir) watchDir(p string, fd int) {
	if d.events == nil {
		return
	}
	if err := d.events.add(p, fd); err != nil && !d.warned["watch"] {
		d.warned["watch"] = true
		d.log.WithError(err).Warn("a folder of the store can't be watched (the inotify watch limit, fs.inotify.max_user_watches?): its changes are found by the rescan every interval")
	}
}
