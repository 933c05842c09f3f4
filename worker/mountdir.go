package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mountDir is a mount directory this process created below the memory
// root (docs/operating.md, "Session lifecycle", step 5). It keeps the directory it was created in open,
// so it is checked and removed there, wherever a rename may have taken
// that directory since; its device and inode tell it from a directory
// swapped in at the same path.
type mountDir struct {
	t        mountTarget
	parent   int // the directory it was created in; -1 once closed
	dev, ino uint64
}

// testHookMountDirCreated, when set (tests), runs right after the mkdirat
// and before the path is checked again: the moment a swapped-in symlink
// would have to win the race.
var testHookMountDirCreated func(t mountTarget)

// createMountDir creates t's directory (0700) with mkdirat in its parent,
// reached from / without following any symlink; something already there
// is refused and left as found. It then walks the whole canonical path
// again: if it no longer leads to the new directory without a symlink (a
// symlink was swapped in between the walk and the mkdirat), the directory
// is removed from where it was made and the mount path refused.
func createMountDir(t mountTarget, storeID string) (*mountDir, error) {
	parent, err := t.openParent()
	if err != nil {
		return nil, t.walkError(storeID, err)
	}
	name := filepath.Base(t.Rel)
	if err := unix.Mkdirat(parent, name, 0o700); err != nil {
		defer unix.Close(parent)
		var st unix.Stat_t
		if errors.Is(err, unix.EEXIST) && unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return nil, t.existsError(parent, st)
		}
		return nil, fmt.Errorf("create the mount directory %s: %w", t, err)
	}
	d := &mountDir{t: t, parent: parent}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		d.remove()
		return nil, fmt.Errorf("create the mount directory %s: %w", t, err)
	}
	d.dev, d.ino = st.Dev, st.Ino
	if testHookMountDirCreated != nil {
		testHookMountDirCreated(t)
	}
	if err := d.verify(storeID); err != nil {
		d.remove()
		return nil, err
	}
	return d, nil
}

// adoptMountDir holds the folder a killed worker created at t and left
// holding its store (directory mode: dirmode.TakeUp accepted it) as if
// this process had created it: checked the same way, and removed at the
// mount's end once empty, so that it does not stay in the way of the
// store's next session.
func adoptMountDir(t mountTarget, storeID string) (*mountDir, error) {
	parent, err := t.openParent()
	if err != nil {
		return nil, t.walkError(storeID, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, filepath.Base(t.Rel), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(parent)
		return nil, fmt.Errorf("the store's folder %s is no longer a directory (%v)", t, err)
	}
	d := &mountDir{t: t, parent: parent, dev: st.Dev, ino: st.Ino}
	if err := d.verify(storeID); err != nil {
		unix.Close(parent)
		return nil, err
	}
	return d, nil
}

// verify checks that the canonical mount path still leads, without
// following any symlink, to the directory created. The mount syscall
// takes a path, so MountStore calls this right before mounting.
func (d *mountDir) verify(storeID string) error {
	fd, err := openNoSymlinks(d.t.Canon())
	if err != nil {
		return d.t.walkError(storeID, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("memory store path %s: %w", d.t, err)
	}
	if st.Dev != d.dev || st.Ino != d.ino {
		return fmt.Errorf("the mount directory %s was replaced after the worker created it; the store is not mounted there", d.t)
	}
	return nil
}

// release closes the parent's descriptor, leaving the directory.
func (d *mountDir) release() {
	if d.parent >= 0 {
		unix.Close(d.parent)
		d.parent = -1
	}
}

// remove removes the directory if it is still the one created and is
// empty, and closes its parent. A directory that holds files is left.
func (d *mountDir) remove() error {
	if d.parent < 0 {
		return nil
	}
	defer func() { unix.Close(d.parent); d.parent = -1 }()
	name := filepath.Base(d.t.Rel)
	var st unix.Stat_t
	if err := unix.Fstatat(d.parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove the mount directory %s: %w", d.t, err)
	}
	if d.dev != 0 && (st.Dev != d.dev || st.Ino != d.ino) {
		return fmt.Errorf("the mount directory %s was replaced after the worker created it; left what is there now", d.t)
	}
	if err := unix.Unlinkat(d.parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove the mount directory %s: %w", d.t, err)
	}
	return nil
}

// detachStale lazily detaches the mount at the canonical path p that a
// killed worker left, reaching it through its parent directory opened
// without following any symlink (umount2 takes a path: /proc/self/fd/N
// names that directory).
func detachStale(p string) error {
	parent, err := openNoSymlinks(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	return unix.Unmount(fdPath(parent, filepath.Base(p)), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
}

// removeLeftDir removes the empty directory at the canonical path p that a
// killed worker created, through its parent opened without following any
// symlink.
func removeLeftDir(p string) error {
	parent, err := openNoSymlinks(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if err := unix.Unlinkat(parent, filepath.Base(p), unix.AT_REMOVEDIR); err != nil {
		return &os.PathError{Op: "rmdir", Path: p, Err: err}
	}
	return nil
}
