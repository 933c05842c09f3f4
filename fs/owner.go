package fs

import (
	"fmt"
	"syscall"
)

// Ownership says who owns what a mount shows and with which modes: the
// files and folders loaded from the store (a store has no owners or
// modes) and the mount's root. Entries created on the mount belong to
// their creator instead, as on a local filesystem (see Tree.Create).
// Modes and owners are local to the mount, never synced, and not kept
// across a remount: a remount shows the store's files with these again.
type Ownership struct {
	// UID and GID own the loaded entries and the root (--uid, --gid).
	UID, GID uint32
	// FileMode and DirMode are the loaded entries' modes (--file-mode,
	// --dir-mode); 0 means 0644 and 0755.
	FileMode, DirMode uint32
	// Umask is taken out of FileMode and DirMode (--umask).
	Umask uint32
}

// Defaults of Ownership's modes.
const (
	DefaultFileMode = 0o644
	DefaultDirMode  = 0o755
)

// Owner is who makes a new entry: the caller of the FUSE request.
type Owner struct{ UID, GID uint32 }

// Validate checks the modes and fills in defaults.
func (o *Ownership) Validate() error {
	if o.FileMode == 0 {
		o.FileMode = DefaultFileMode
	}
	if o.DirMode == 0 {
		o.DirMode = DefaultDirMode
	}
	for _, m := range []struct {
		name string
		v    uint32
	}{{"file mode", o.FileMode}, {"directory mode", o.DirMode}, {"umask", o.Umask}} {
		if m.v&^0o7777 != 0 {
			return fmt.Errorf("fs: %s %#o has bits beyond 07777", m.name, m.v)
		}
	}
	return nil
}

// fileMode and dirMode are the modes of loaded entries.
func (o Ownership) fileMode() uint32 { return o.FileMode &^ o.Umask }
func (o Ownership) dirMode() uint32  { return o.DirMode &^ o.Umask }

// newEntryOwner is who owns a new entry in directory d made by caller: the
// caller, but the group of d when d is setgid (and a new directory keeps
// the setgid bit then), as the kernel does on ext4 and tmpfs.
func newEntryOwner(d *node, caller Owner, mode uint32, dir bool) (uid, gid, m uint32) {
	uid, gid, m = caller.UID, caller.GID, mode&0o7777
	if d.mode&syscall.S_ISGID != 0 {
		gid = d.gid
		if dir {
			m |= syscall.S_ISGID
		}
	}
	return uid, gid, m
}
