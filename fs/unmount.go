package fs

// Taking a mount down (docs/operating.md, "Mounting a store").
//
// go-fuse's Server.Unmount is not used: it unmounts whatever is on top of
// the mount point's path and then waits, without a bound, for the FUSE
// connection to end. With something mounted over ours (mount --bind X
// over the mount point) it unmounts that instead, and waits for ever for a
// connection that nothing ended; the same wait hangs when the connection
// outlives the unmount (a copy of the mount in another mount namespace,
// made by unshare -m or a sandbox).
//
// Instead the mount is found in /proc/self/mountinfo by the mount id and
// device it had when it was mounted, and each step is bounded by the
// caller's context:
//
//   - mounts someone put on ours (at the mount point, or below it) are
//     detached lazily, topmost first: they sit on our mount and cannot
//     outlive it, and the mount point is ours to remove;
//   - ours, once on top, is unmounted (umount2, UMOUNT_NOFOLLOW), EBUSY
//     retried with backoff until ctx ends, then detached lazily
//     (MNT_DETACH);
//   - a mount that already left this namespace (umount from outside) is
//     left alone: nothing at its path is ours any more.
//
// Once it unmounted the mount itself, it waits, bounded by ctx, for the
// FUSE server to end; a connection that lives on (a copy of the mount in
// another namespace) is reported as Lingering and left to end with the
// process. After a lazy detach, or a mount that left from outside, it does
// not wait: the kernel keeps such a connection while a file in it is
// open, which may be never.
//
// Reading the table and unmounting its top are two steps: another mount
// at the mount point in between (only root can make one) would be taken
// down in place of ours; ours is then found again and taken down next.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Unmounted says how Unmount took a mount away.
type Unmounted struct {
	// Outside: the mount had already left this mount namespace
	// (unmounted from outside); Unmount took nothing down.
	Outside bool
	// Lazy: the mount was still busy when ctx ended (a process works in
	// it) and was detached lazily: it left the mount table at once, and
	// the kernel ends its connection when the last file in it closes.
	Lazy bool
	// Covers are the mounts someone had put on this one (mount --bind
	// over the mount point or a directory in it), detached lazily first.
	Covers []MountInfo
	// Lingering: Unmount unmounted the mount, but its FUSE connection was
	// still open when ctx ended (a copy of the mount in another mount
	// namespace); its server answers until the connection or the process
	// ends. (After Outside or Lazy the connection may live on as well, as
	// long as a file in the mount is open; Unmount does not wait for it.)
	Lingering bool
}

// Unmount takes the mount away; see UnmountReport.
func (m *Mount) Unmount(ctx context.Context) error {
	_, err := m.UnmountReport(ctx)
	return err
}

// UnmountReport takes the mount out of this mount namespace, within ctx:
// it detaches what was mounted over it, unmounts it (retrying EBUSY with
// backoff until ctx ends, then detaching it lazily) and waits, bounded by
// ctx, for its FUSE connection to end. It reports how.
func (m *Mount) UnmountReport(ctx context.Context) (Unmounted, error) {
	var res Unmounted
	m.watch.quiet.Store(true)
	m.Tree.mu.Lock()
	m.Tree.notify = nil
	m.Tree.mu.Unlock()
	m.notify.close(ctx)
	backoff := 20 * time.Millisecond
	unmounted, coverPasses := false, 0
	for !unmounted {
		place, err := m.place()
		if err != nil {
			return res, fmt.Errorf("unmount %s: %w", m.Dir, err)
		}
		switch {
		case place.gone:
			res.Outside = true
			unmounted = true
			continue
		case len(place.on()) > 0:
			covers := place.on()
			if coverPasses > 0 {
				// A cover that did not go (its path leads elsewhere now):
				// look again after a while, within ctx.
				select {
				case <-ctx.Done():
					return res, fmt.Errorf("unmount %s: %s is still mounted over it", m.Dir, covers[0].Dir)
				case <-time.After(backoff):
					backoff = min(backoff*2, time.Second)
				}
			}
			coverPasses++
			for _, c := range covers {
				// umount2 acts on the top of the stack at a path: the last
				// mount listed there, which is c.
				err := unix.Unmount(c.Dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
				switch {
				case err == nil:
					res.Covers = append(res.Covers, c)
				case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
					// Gone meanwhile, or not on top: the next look tells.
				default:
					return res, fmt.Errorf("unmount %s: detach %s, mounted over it: %w", m.Dir, c.Dir, err)
				}
			}
			continue
		}
		err = unix.Unmount(m.Dir, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			unmounted = true
			continue
		case errors.Is(err, unix.EBUSY):
			if m.onWait != nil {
				m.onWait(ctx, err)
				m.onWait = nil
			}
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// The table changed since it was read: read it again.
		default:
			return res, fmt.Errorf("unmount %s: %w", m.Dir, err)
		}
		select {
		case <-ctx.Done():
			if derr := unix.Unmount(m.Dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); derr != nil {
				if p, perr := m.place(); perr != nil || !p.gone {
					return res, fmt.Errorf("unmount %s: %v; lazy detach: %w", m.Dir, err, derr)
				}
				res.Outside = true
			} else {
				res.Lazy = true
			}
			unmounted = true
		case <-time.After(backoff):
			backoff = min(backoff*2, time.Second)
		}
	}
	if res.Outside || res.Lazy {
		// The kernel keeps the connection while a file in it is open,
		// which may be never: don't wait for it.
		return res, nil
	}
	// The kernel ended the connection in the umount: the server's loops
	// end on their next read. Wait for that within ctx, and for
	// serverEndGrace at least, so that a ctx already ended (a second
	// signal) does not report a connection that is merely ending.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverEndGrace)
	defer cancel()
	select {
	case <-m.ended:
	case <-ctx.Done():
		select {
		case <-m.ended:
		case <-wctx.Done():
			res.Lingering = true
		}
	}
	return res, nil
}

// serverEndGrace is the least time Unmount waits for the FUSE server to
// end after unmounting it: a bound, not an expected duration.
const serverEndGrace = time.Second

// mountPlace is where a mount stands in the mount table.
type mountPlace struct {
	gone   bool    // it left this namespace
	covers []Cover // mounts that cover it, topmost first (coversOf)
}

// on lists the covers that stand on the mount, topmost first: the ones
// Unmount detaches (a mount over a directory above the mount path is not
// on it, and not Unmount's to take down).
func (p mountPlace) on() []MountInfo {
	var out []MountInfo
	for _, c := range p.covers {
		if c.on {
			out = append(out, c.MountInfo)
		}
	}
	return out
}

// place reads the mount table once and finds the mount by its id, and
// what covers it.
func (m *Mount) place() (mountPlace, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return mountPlace{}, fmt.Errorf("read the mount table: %w", err)
	}
	found, covers := coversOf(infos, m.id, m.Dir)
	return mountPlace{gone: !found, covers: covers}, nil
}

// mountIdentity tells a mount in the mount table: its id, which the
// kernel reuses once it is unmounted, and its device, which a mount made
// since at the same path (a bind mount) does not share.
type mountIdentity struct {
	id, major, minor int
}

func (mid mountIdentity) is(mi *mountinfo.Info) bool {
	return mi.ID == mid.id && mi.Major == mid.major && mi.Minor == mid.minor
}

// mountID finds the memfs mount just made at dir: the last fuse.memfs
// mount of source listed there (the kernel lists mounts in the order they
// were made).
func mountID(dir, source string) (mountIdentity, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return mountIdentity{}, fmt.Errorf("read the mount table: %w", err)
	}
	var mid mountIdentity
	found := false
	for _, mi := range infos {
		if filepath.Clean(mi.Mountpoint) == dir && mi.FSType == "fuse."+FSType && mi.Source == source {
			mid, found = mountIdentity{id: mi.ID, major: mi.Major, minor: mi.Minor}, true
		}
	}
	if !found {
		return mountIdentity{}, fmt.Errorf("the mount at %s is not in the mount table", dir)
	}
	return mid, nil
}
