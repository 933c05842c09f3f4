package fs

import (
	"context"
	"strings"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/sirupsen/logrus"
)

// invalidation asks the kernel to forget what it cached about a path:
// with content, the file's pages and attributes (same inode, new bytes);
// otherwise its entry in its parent (the name was created, deleted, moved
// away or now names another inode).
type invalidation struct {
	path    string
	content bool
}

// notifier sends invalidations to the kernel from its own goroutine: a
// notification written from inside a FUSE handler, or while holding a lock
// a handler may take, can deadlock (the write on /dev/fuse is synchronous).
// The tree queues invalidations (under Tree.mu, which is fine: the queue
// has its own lock, taken after Tree.mu and never the other way round) and
// the goroutine drains the queue holding no lock while it calls the kernel.
type notifier struct {
	root *gofs.Inode
	log  logrus.FieldLogger

	mu    sync.Mutex
	queue []invalidation // GUARDED_BY(mu)
	wake  chan struct{}  // capacity 1
	stop  chan struct{}
	done  chan struct{}

	closeOnce sync.Once
}

func newNotifier(root *gofs.Inode, log logrus.FieldLogger) *notifier {
	n := &notifier{root: root, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

func (n *notifier) push(inv invalidation) {
	n.mu.Lock()
	n.queue = append(n.queue, inv)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case <-n.wake:
		}
		for {
			n.mu.Lock()
			batch := n.queue
			n.queue = nil
			if len(batch) == 0 {
				n.mu.Unlock()
				break
			}
			n.mu.Unlock()
			for _, inv := range batch {
				n.send(inv)
			}
		}
	}
}

// send invalidates one path. It walks go-fuse's inode tree from the root:
// a level the kernel never looked up has nothing cached below it but
// possibly a negative entry, which NotifyEntry on the deepest known
// parent clears. ENOENT from the kernel is harmless (nothing was cached).
func (n *notifier) send(inv invalidation) {
	segs := strings.Split(strings.TrimPrefix(inv.path, "/"), "/")
	parent := n.root
	for i, s := range segs {
		child := parent.GetChild(s)
		last := i == len(segs)-1
		if child == nil {
			n.checked(inv.path, parent.NotifyEntry(s))
			return
		}
		if last {
			if inv.content {
				n.checked(inv.path, child.NotifyContent(0, 0))
				return
			}
			// The name no longer leads to this inode (deleted, moved away
			// or replaced): drop it from go-fuse's tree and the kernel's.
			parent.RmChild(s)
			n.checked(inv.path, parent.NotifyDelete(s, child))
			return
		}
		parent = child
	}
}

// checked logs a failed invalidation. ENOENT is harmless: the kernel had
// nothing cached under that name. Anything else means the kernel may serve
// stale data until its cache times out (cacheTimeout), which is worth a
// line, but not an error: the tree is right.
func (n *notifier) checked(path string, errno syscall.Errno) {
	if errno == 0 || errno == syscall.ENOENT {
		return
	}
	n.log.WithFields(logrus.Fields{"path": path, "errno": errno.Error()}).Warn("the kernel refused a cache invalidation; the mount may show the old state of this path for up to 5 minutes")
}

// close stops the goroutine (idempotent); invalidations still queued are
// dropped: the mount is going away. It waits for the goroutine until ctx
// ends: an invalidation the kernel holds up (it may wait for a lock of an
// inode a request to this very server holds) must not hold up the unmount,
// which ends it.
func (n *notifier) close(ctx context.Context) {
	n.closeOnce.Do(func() { close(n.stop) })
	select {
	case <-n.done:
	case <-ctx.Done():
	}
}
