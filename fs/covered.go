package fs

// Mounts that hide a mount (docs/operating.md, "Mounts over a store").
//
// Root can put another mount between a mount path and the memfs mount on
// it: mount --bind /tmp/fake over the mount path, a mount on a directory
// in the mount, or a mount over a directory above the mount path. Paths
// then lead to files that are not the store's, while the FUSE mount, still
// in the mount table and still served, looks well. The mount-table watch
// (gone.go) finds such covers at every change of the table with coversOf,
// a pure function over the parsed table, and keeps what it found for
// Covered and MountOptions.OnCover.

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Cover is a mount that hides all or part of a memfs mount from the paths
// that lead to it.
type Cover struct {
	MountInfo
	// ID is the cover's mount id in /proc/self/mountinfo.
	ID int
	// Root is the directory of its filesystem the cover shows: "/", or
	// for a bind mount the directory bound (mount --bind /tmp/fake ...
	// on /tmp's filesystem: /tmp/fake, or /fake if /tmp is a mount).
	Root string
	// Inside: the cover is mounted on a directory in the mount and hides
	// that directory. Otherwise it is mounted at the mount path itself or
	// at a directory above it, and hides the whole mount.
	Inside bool
	// on: the cover stands on the mount itself (its parent mount, or its
	// parent's, and so on, is the mount); Unmount detaches these.
	on bool
}

// Where is "inside" for a cover on a directory in the mount, else "over".
func (c Cover) Where() string {
	if c.Inside {
		return "inside"
	}
	return "over"
}

// coversOf finds the mount me in infos, the mount table in the kernel's
// order (mounts are listed in the order they were made), and the mounts
// that cover it, topmost (listed last) first. found is false when me is
// not in the table (it left this namespace). dir is the mount's path as the
// table lists it. A mount covers me when
//
//   - it stands on me: its parent is me or a cover standing on me (a
//     mount at dir stacked over me, or one on a directory in me);
//   - or it was made after me (listed after me) at dir, below dir, or at
//     a directory above dir: a path to dir, or into it, then leads to it
//     first. A mount made before me is under me, not over me.
//
// A mount at a path that merely shares a prefix with dir (/mnt/memory/
// notes2 next to /mnt/memory/notes) is unrelated, as is every mount made
// before me elsewhere than on me.
func coversOf(infos []*mountinfo.Info, me mountIdentity, dir string) (found bool, covers []Cover) {
	dir = filepath.Clean(dir)
	mine := slices.IndexFunc(infos, me.is)
	if mine < 0 {
		return false, nil
	}
	on := map[int]bool{me.id: true}
	for i, mi := range infos {
		if i == mine {
			continue
		}
		p := filepath.Clean(mi.Mountpoint)
		at, inside, above := p == dir, isBelow(dir, p), isBelow(p, dir)
		c := Cover{MountInfo: MountInfo{Dir: mi.Mountpoint, FSType: mi.FSType, Source: mi.Source, Options: mi.Options}, ID: mi.ID, Root: mi.Root, Inside: inside}
		switch {
		case on[mi.Parent]:
			on[mi.ID] = true
			c.on = true
			// On me, so at dir or below it: a path elsewhere would be a
			// mount moved out of me (mount --move), which hides nothing of
			// me; it is still detached with me.
			c.Inside = !at
		case i > mine && (at || inside || above):
		default:
			continue
		}
		covers = append(covers, c)
	}
	slices.Reverse(covers)
	return true, covers
}

// isBelow reports whether path p is strictly below directory dir; both are
// clean and absolute.
func isBelow(dir, p string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// sameCovers reports whether a and b list the same covers, in order.
func sameCovers(a, b []Cover) bool {
	return slices.EqualFunc(a, b, func(x, y Cover) bool {
		return x.ID == y.ID && x.Dir == y.Dir && x.Inside == y.Inside && x.FSType == y.FSType && x.Source == y.Source
	})
}

// Covered lists the mounts that cover this one now (see Cover), topmost
// first, as the mount-table watch last found them; nil when none does.
// The watch follows the table from MountTree until the mount's FUSE server
// ends, or Unmount begins: Unmount detaches the covers standing on it and
// reports them itself (Unmounted.Covers).
func (m *Mount) Covered() []Cover {
	m.watch.mu.Lock()
	defer m.watch.mu.Unlock()
	return slices.Clone(m.watch.covers)
}
