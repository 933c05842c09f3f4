package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/store"
)

// memoryRoot is the worker's memory root: the path it was given and its
// canonical form, resolved once with filepath.EvalSymlinks. The operator
// may reach the root through symlinks; nothing below it may be one
// (beneath.go).
type memoryRoot struct {
	Given string // as configured (--memory-root), named in messages
	Canon string // Given with every symlink resolved; "" until resolved
}

// String names the root as configured, and its canonical form if it
// differs.
func (r memoryRoot) String() string {
	if r.Canon == "" || r.Canon == r.Given {
		return r.Given
	}
	return fmt.Sprintf("%s (%s)", r.Given, r.Canon)
}

// resolve fills in Canon if the root exists.
func (r *memoryRoot) resolve() error {
	abs, err := filepath.Abs(r.Given)
	if err != nil {
		return err
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	r.Canon = canon
	return nil
}

// path is where the root is: its canonical form once resolved.
func (r memoryRoot) path() string {
	if r.Canon != "" {
		return r.Canon
	}
	return r.Given
}

// ensureMemoryRoot creates the memory root if needed (its parent must
// exist) and checks this process can create directories in it.
func ensureMemoryRoot(r memoryRoot) error {
	root := r.Given
	parent := filepath.Dir(r.path())
	if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot create the memory store's folder %s: its parent %s does not exist; %s", root, parent, writableFix(root))
	}
	if err := os.MkdirAll(r.path(), 0o755); err != nil {
		return memoryRootError(fmt.Sprintf("cannot create the memory store's folder %s", root), r, err)
	}
	probe, err := os.MkdirTemp(r.path(), ".memfs-probe-")
	if err != nil {
		return memoryRootError(fmt.Sprintf("cannot create the memory store's folder in %s", root), r, err)
	}
	return os.Remove(probe)
}

// writableFix is the fix for a memory root this process may not create or
// write: the host makes it, and gives it to the worker's user.
func writableFix(root string) string {
	return fmt.Sprintf("the worker host must make this mount path writable: sudo mkdir -p %s && sudo chown \"$USER\" %s", root, root)
}

// memoryRootError says why the memory root can't be used (what failed,
// then err), with the fix only where it can work: the host's sudo mkdir
// and chown cure a missing or forbidden directory, not a path through a
// file nor a read-only filesystem.
func memoryRootError(what string, r memoryRoot, err error) error {
	switch {
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EEXIST):
		if f := notDirectory(r.path()); f != "" {
			return fmt.Errorf("%s: %s is a file, not a directory; remove it or pick another memory root", what, f)
		}
	case errors.Is(err, unix.EROFS):
		return fmt.Errorf("%s: %v; pick a memory root on a writable filesystem", what, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: %v; %s", what, err, writableFix(r.Given))
	}
	return fmt.Errorf("%s: %v", what, err)
}

// notDirectory returns the deepest of p and its ancestors that exists,
// if it is not a directory ("" otherwise): the file a path runs into.
func notDirectory(p string) string {
	for d := p; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil {
			if fi.IsDir() {
				return ""
			}
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// mountTarget is a checked mount path: a path below the canonical memory
// root, every component of it but the last an existing directory, no
// symlink among them.
type mountTarget struct {
	Path string // the mount path as the session named it (or <root>/<slug>)
	Root string // the canonical memory root
	Rel  string // Path below Root (slash-separated, no "..")
}

// Canon is the canonical mount path: where the store is mounted.
func (t mountTarget) Canon() string { return filepath.Join(t.Root, t.Rel) }

// String names the mount path as the session did, and its canonical form
// if it differs.
func (t mountTarget) String() string {
	if c := t.Canon(); c != t.Path {
		return fmt.Sprintf("%s (%s)", t.Path, c)
	}
	return t.Path
}

// openParent opens the directory the mount directory goes in, walking
// from / to the root and down to it without following any symlink.
func (t mountTarget) openParent() (int, error) {
	fd, err := openNoSymlinks(t.Root)
	if err != nil {
		return -1, fmt.Errorf("the memory root %s: %w", t.Root, err)
	}
	dir := filepath.Dir(t.Rel)
	if dir == "." {
		return fd, nil // the mount directory goes in the root itself
	}
	return walkAt(fd, t.Root, dir)
}

// below returns p relative to root if p is strictly below it.
func below(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// checkMountPath checks one store's mount path before anything is mounted
// (docs/operating.md, "Session lifecycle", step 4): a clean absolute path (no ..) under the memory
// root, reached from the root without crossing a symlink, with nothing at
// it. A resource without a mount path gets <root>/<slug>. The mount path
// may name the root as configured or in its canonical form. In directory
// mode (mode, the session's resolved mount mode) a folder there that is
// this state dir's copy of the store is accepted too (takeUpFolder).
func checkMountPath(root memoryRoot, r store.SessionResource, mode, stateDir string) (mountTarget, error) {
	p := r.MountPath
	if p == "" {
		p = filepath.Join(root.Given, store.Slug(r.Name, r.MemoryStoreID))
	}
	if !filepath.IsAbs(p) || strings.Contains("/"+p+"/", "/../") || filepath.Clean(p) != p {
		return mountTarget{}, fmt.Errorf("the mount path %q of memory store %s is not a clean absolute path", p, r.MemoryStoreID)
	}
	rel, ok := below(filepath.Clean(root.Given), p)
	if !ok {
		rel, ok = below(root.Canon, p)
	}
	if !ok {
		return mountTarget{}, fmt.Errorf("the mount path %q of memory store %s is outside the memory root %s", p, r.MemoryStoreID, root)
	}
	t := mountTarget{Path: p, Root: root.Canon, Rel: rel}
	parent, err := t.openParent()
	if err != nil {
		return mountTarget{}, t.walkError(r.MemoryStoreID, err)
	}
	defer unix.Close(parent)
	if err := t.checkFree(parent); err != nil {
		if mode != ModeDirectory {
			return mountTarget{}, err
		}
		if err := t.takeUpFolder(parent, r.MemoryStoreID, stateDir, err); err != nil {
			return mountTarget{}, err
		}
	}
	return t, nil
}

// takeUpFolder accepts, in directory mode, the folder at the mount path
// in parent when it is this state dir's copy of the store
// (dirmode.TakeUp: its marker, and the state dir's baseline of it): a
// worker killed while it ran left it, and the store's mount takes it up.
// Anything else stays refused with busy (checkFree's refusal), and, for a
// folder, why it is not taken up.
func (t mountTarget) takeUpFolder(parent int, storeID, stateDir string, busy error) error {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, filepath.Base(t.Rel), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return busy
	}
	if err := dirmode.TakeUp(t.Canon(), storeID, stateDir); err != nil {
		return fmt.Errorf("%w: %v", busy, err)
	}
	return nil
}

// checkFree fails unless nothing is at the mount path in parent.
func (t mountTarget) checkFree(parent int) error {
	name := filepath.Base(t.Rel)
	var st unix.Stat_t
	err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil:
		return t.existsError(parent, st)
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTCONN):
		return fmt.Errorf("memory store path %s: %w: a dead FUSE mount is there; detach it (umount -l %s)", t, err, t.Canon())
	default:
		return fmt.Errorf("memory store path %s: %w", t, err)
	}
}

// existsError is the refusal of a path where something is
// (docs/operating.md, "Session lifecycle", step 4); a
// symlink says where it points.
func (t mountTarget) existsError(parent int, st unix.Stat_t) error {
	what := ""
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		what = fmt.Sprintf(" (a symbolic link to %s)", readlinkAt(parent, filepath.Base(t.Rel)))
	}
	return fmt.Errorf("something already exists at the memory store's path %s%s; it must not exist when the session starts (it was left as found)", t, what)
}

// walkError says why the walk to a mount path failed; a symlink is named
// with where it points.
func (t mountTarget) walkError(storeID string, err error) error {
	var sl *symlinkError
	if errors.As(err, &sl) {
		if _, inside := below(t.Root, sl.Path); inside {
			return fmt.Errorf("the mount path %q of memory store %s passes through a symbolic link: %s; nothing below the memory root %s may be a symbolic link", t.Path, storeID, sl, t.Root)
		}
		return fmt.Errorf("the mount path %q of memory store %s: the memory root %s was resolved when the worker started, and now passes through a symbolic link: %s", t.Path, storeID, t.Root, sl)
	}
	return fmt.Errorf("memory store path %s: %w", t, err)
}

// hasJournal reports whether a store has a journal directory in the state dir.
func hasJournal(stateDir, storeID string) bool {
	_, err := os.Stat(filepath.Join(stateDir, "stores", storeID, "journal"))
	return err == nil
}
