package dirmode

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
)

// Remote changes land whole: the content is written to a temporary file
// in the target's folder, then renamed onto the target — with
// RENAME_EXCHANGE when something is there, so that what was replaced is
// still in hand, and checked: a write that came in after the last look
// (the engine never saw it) is journaled as a change made on what the
// file held before, which the store's version then wins over, the write
// going to the conflict log. A file at the target the engine has not
// seen (new, or changed since its record) is never replaced: it is
// journaled first, and the remote change waits for the merge that follows.

// errUnseen: a local change was in the way; it is journaled now.
var errUnseen = errors.New("the folder holds a change the engine had not seen yet: it is journaled first, and the store's change is merged with it")

// Apply makes each change: before Begin only in the entries (a journal
// replayed at Open: the folder holds those changes already), after it in
// the folder too.
func (d *Dir) Apply(changes []fs.Change) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, c := range changes {
		if err := d.applyOne(c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
		}
	}
	return errors.Join(errs...)
}

// applyOne makes one change. REQUIRES: d.mu held.
func (d *Dir) applyOne(c fs.Change) error {
	cur := d.byID[c.FileID]
	if cur == nil && c.Origin != "" && c.Origin != c.FileID {
		if cur = d.byID[c.Origin]; cur != nil {
			delete(d.byID, c.Origin)
			cur.fileID = c.FileID
			d.byID[c.FileID] = cur
		}
	}
	if c.Deleted {
		return d.applyDelete(cur)
	}
	if c.Path == "/"+fs.MarkerName {
		return errors.New("its path is the marker file's")
	}
	sum := sha256.Sum256(c.Content)
	sha := hex.EncodeToString(sum[:])
	if !d.started {
		return d.applyReplayed(cur, c, sha)
	}
	st, err := d.place(cur, c.Path, c.Content)
	if err != nil {
		return err
	}
	cur = d.placeEntry(cur, c)
	d.record(cur, sha, st)
	return nil
}

// placeEntry puts cur (nil: a new entry for c's file) at c's path, in
// place of the entry there. REQUIRES: d.mu held.
func (d *Dir) placeEntry(cur *entry, c fs.Change) *entry {
	if o := d.byPath[c.Path]; o != nil && o != cur {
		d.drop(o)
	}
	if cur == nil {
		cur = &entry{fileID: c.FileID, path: c.Path}
		d.add(cur)
	} else {
		d.moveTo(cur, c.Path)
	}
	return cur
}

// applyReplayed records a change replayed at Open. REQUIRES: d.mu held.
func (d *Dir) applyReplayed(cur *entry, c fs.Change, sha string) error {
	cur = d.placeEntry(cur, c)
	cur.sha, cur.replayed = sha, c.Content
	cur.rec = nil
	if r, ok := d.baseline[c.Path]; ok {
		cur.rec = &r
	}
	d.setLazy(cur, false)
	return nil
}

// applyDelete removes cur's file, if the folder holds it as recorded.
// REQUIRES: d.mu held.
func (d *Dir) applyDelete(cur *entry) error {
	if cur == nil {
		return nil
	}
	if d.started && cur.rec != nil {
		dir, name := parentOf(cur.path)
		fd, err := openDir(d.root, dir)
		if err == nil {
			defer unix.Close(fd)
			st, serr := lstatAt(fd, name)
			switch {
			case isNotExist(serr):
			case serr == nil && cur.rec.matchesFile(st):
				if err := unix.Unlinkat(fd, name, 0); err != nil && !isNotExist(err) {
					return err
				}
				d.prune(dir)
			default:
				d.lookLocked(true)
				return errUnseen
			}
		}
	}
	d.drop(cur)
	return nil
}

// place writes content at p for cur (nil: a new file), checking first
// that nothing unseen is in the way, and removes cur's file from its old
// path. It returns the new file's stat. REQUIRES: d.mu held.
func (d *Dir) place(cur *entry, p string, content []byte) (unix.Stat_t, error) {
	var none unix.Stat_t
	ro := d.fo.ReadOnly // nothing local is kept in a read-only store's folder
	if !ro && cur != nil && cur.rec != nil && cur.path != p && !d.asRecorded(cur) {
		d.lookLocked(true)
		return none, errUnseen
	}
	dir, name := parentOf(p)
	fd, err := d.mkdirs(dir)
	if err != nil {
		return none, err
	}
	defer unix.Close(fd)
	there, terr := lstatAt(fd, name)
	exists := terr == nil
	var like *unix.Stat_t
	if exists {
		switch there.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return none, fmt.Errorf("a folder stands at %s", p)
		case unix.S_IFREG:
			o := d.byPath[p]
			if !ro && (o == nil || o.rec == nil || !o.rec.matchesFile(there)) {
				d.lookLocked(true)
				return none, errUnseen
			}
			like = &there
		}
	}
	tmp, st, err := d.writeTemp(fd, content, like)
	if err != nil {
		return none, err
	}
	if err := d.rename(fd, tmp, name, exists); err != nil {
		unix.Unlinkat(fd, tmp, 0)
		return none, err
	}
	if exists && !ro {
		d.checkReplaced(fd, tmp, p)
	}
	if exists {
		unix.Unlinkat(fd, tmp, 0)
	}
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return none, err
	}
	if cur != nil && cur.rec != nil && cur.path != p {
		d.removeRecorded(cur)
	}
	return st, nil
}

// asRecorded says whether e's file is in the folder as recorded (or gone).
// REQUIRES: d.mu held.
func (d *Dir) asRecorded(e *entry) bool {
	dir, name := parentOf(e.path)
	fd, err := openDir(d.root, dir)
	if err != nil {
		return isNotExist(err)
	}
	defer unix.Close(fd)
	st, err := lstatAt(fd, name)
	if isNotExist(err) {
		return true
	}
	return err == nil && e.rec.matchesFile(st)
}

// removeRecorded removes e's file at its path (checked as recorded by the
// caller), and the folders it leaves empty. REQUIRES: d.mu held.
func (d *Dir) removeRecorded(e *entry) {
	dir, name := parentOf(e.path)
	fd, err := openDir(d.root, dir)
	if err != nil {
		return
	}
	unix.Unlinkat(fd, name, 0)
	unix.Close(fd)
	d.prune(dir)
}

// checkReplaced looks at what a RENAME_EXCHANGE took away from p (now at
// tmp): written since the last look, it is journaled as a change made on
// what the file held before, so the conflict rules keep it.
// REQUIRES: d.mu held.
func (d *Dir) checkReplaced(fd int, tmp, p string) {
	o := d.byPath[p]
	st, err := lstatAt(fd, tmp)
	// The exchange itself changed its ctime: a write shows in its size
	// and mtime.
	if err != nil || o == nil || o.rec == nil || (st.Ino == o.rec.Ino && st.Size == o.rec.Size && st.Mtim.Nano() == o.rec.Mtime) {
		return
	}
	content, _, _, err := readFile(d.root, join(dirOf(p), tmp), 1<<20)
	if err != nil {
		d.log.WithError(err).WithField("memory_path", p).Error("a file written while the store's change replaced it could not be read: that write is lost")
		return
	}
	d.log.WithField("memory_path", p).Warn("a file was written while the store's change replaced it: the write is kept as a conflicting local change")
	d.journal(o.rec.SHA, fs.FileState{FileID: o.fileID, Path: p, Content: content})
}

func dirOf(p string) string { dir, _ := parentOf(p); return dir }

// writeTemp writes content to a new temporary file in the folder fd, with
// the owner and mode of like (the file it replaces) or the mount's.
func (d *Dir) writeTemp(fd int, content []byte, like *unix.Stat_t) (string, unix.Stat_t, error) {
	var st unix.Stat_t
	var b [8]byte
	rand.Read(b[:])
	tmp := tmpPrefix + hex.EncodeToString(b[:])
	f, err := unix.Openat(fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", st, err
	}
	defer unix.Close(f)
	for off := 0; off < len(content); {
		n, err := unix.Write(f, content[off:])
		if err != nil {
			unix.Unlinkat(fd, tmp, 0)
			return "", st, err
		}
		off += n
	}
	uid, gid, mode := d.fileOwner()
	if like != nil && !d.fo.ReadOnly {
		uid, gid, mode = like.Uid, like.Gid, like.Mode&0o7777
	}
	d.chown(f, uid, gid)
	if err := unix.Fchmod(f, mode); err != nil {
		unix.Unlinkat(fd, tmp, 0)
		return "", st, err
	}
	return tmp, st, nil
}

// rename puts tmp at name: exchanged with what is there, or only if
// nothing is (a file made meanwhile is then the engine's to see first).
func (d *Dir) rename(fd int, tmp, name string, exists bool) error {
	if exists {
		err := unix.Renameat2(fd, tmp, fd, name, unix.RENAME_EXCHANGE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			return unix.Renameat(fd, tmp, fd, name) // a filesystem without it
		}
		return err
	}
	err := unix.Renameat2(fd, tmp, fd, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		d.lookLocked(true)
		return errUnseen
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return unix.Renameat(fd, tmp, fd, name)
	}
	return err
}

// mkdirs opens the folder at store path dir, making the folders missing
// on the way (with the mount's owner and mode), never through a link.
// REQUIRES: d.mu held.
func (d *Dir) mkdirs(dir string) (int, error) {
	fd, err := openDir(d.root, dir)
	if err == nil || !isNotExist(err) {
		return fd, err
	}
	cur, err := unix.Openat(d.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	uid, gid, mode := d.dirOwner()
	for _, seg := range strings.Split(rel(dir), "/") {
		if err := unix.Mkdirat(cur, seg, 0o700); err == nil {
			unix.Fchownat(cur, seg, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
			unix.Fchmodat(cur, seg, mode, 0)
		} else if !errors.Is(err, unix.EEXIST) {
			unix.Close(cur)
			return -1, err
		}
		next, err := unix.Openat(cur, seg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// prune removes the folders at and above dir that are empty, below the
// root. REQUIRES: d.mu held.
func (d *Dir) prune(dir string) {
	for dir != "/" && dir != "." {
		parent, name := parentOf(dir)
		fd, err := openDir(d.root, parent)
		if err != nil {
			return
		}
		err = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		unix.Close(fd)
		if err != nil {
			return
		}
		dir = parent
	}
}

// fileOwner and dirOwner are who owns what the worker writes, with which
// mode: the mount's --uid, --gid and modes; for a read-only store the
// worker's own user, with the write bits off.
func (d *Dir) fileOwner() (uid, gid, mode uint32) {
	o := d.fo.Owner
	mode = o.FileMode &^ o.Umask
	if d.fo.ReadOnly {
		return uint32(os.Geteuid()), uint32(os.Getegid()), mode &^ 0o222
	}
	return o.UID, o.GID, mode
}

func (d *Dir) dirOwner() (uid, gid, mode uint32) {
	o := d.fo.Owner
	mode = o.DirMode &^ o.Umask
	if d.fo.ReadOnly {
		off := uint32(0o222)
		if os.Geteuid() != 0 {
			off = 0o022 // a worker that is not root writes into its folders itself
		}
		return uint32(os.Geteuid()), uint32(os.Getegid()), mode &^ off
	}
	return o.UID, o.GID, mode
}

// chown gives fd to uid:gid; a worker that is not root can't, and says so once.
func (d *Dir) chown(fd int, uid, gid uint32) {
	if err := unix.Fchown(fd, int(uid), int(gid)); err != nil && !d.warned["chown"] {
		d.warned["chown"] = true
		d.log.WithError(err).Warn("the store's files can't be given to --uid/--gid (the worker is not root): they belong to the worker's user")
	}
}

// setRootOwner gives the folder itself the mount's owner and mode.
// REQUIRES: d.mu held.
func (d *Dir) setRootOwner() {
	uid, gid, mode := d.dirOwner()
	d.chown(d.root, uid, gid)
	unix.Fchmod(d.root, mode)
}

// writeMarker writes the marker file (read-only, the worker's).
// REQUIRES: d.mu held.
func (d *Dir) writeMarker() {
	tmp, _, err := d.writeTemp(d.root, fs.MarkerContent(d.fo.StoreID), nil)
	if err == nil {
		unix.Fchmodat(d.root, tmp, 0o444, 0)
		unix.Fchownat(d.root, tmp, os.Geteuid(), os.Getegid(), unix.AT_SYMLINK_NOFOLLOW)
		err = unix.Renameat(d.root, tmp, d.root, fs.MarkerName)
	}
	if err != nil {
		d.log.WithError(err).Error("the marker file can't be written")
	}
}

// Fill writes a waiting file's content, unless the folder holds a file
// there the engine has not seen (journaled then instead). It reports
// whether it took content.
func (d *Dir) Fill(fileID string, content []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.byID[fileID]
	if e == nil || !e.lazy || !d.started {
		return false
	}
	delete(d.restore, fileID)
	st, err := d.place(e, e.path, content)
	if err != nil {
		if !errors.Is(err, errUnseen) {
			d.log.WithError(err).WithField("memory_path", e.path).Warn("a memory's content can't be written to the store's folder yet")
		}
		return false
	}
	sum := sha256.Sum256(content)
	d.record(e, hex.EncodeToString(sum[:]), st)
	return true
}

// CommitFile journals a change of fileID's file the engine has not seen
// yet (found by a look), before a remote change is merged into it; an
// error means it could not be journaled.
func (d *Dir) CommitFile(fileID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.byID[fileID]
	if e == nil || d.fo.ReadOnly || !d.started || e.rec == nil || d.asRecorded(e) {
		return nil
	}
	d.lookLocked(true)
	if err, ok := d.unjournaled[e.path]; ok && !isSkipped(err) {
		return err
	}
	return nil
}
