package dirmode

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
)

// tmpPrefix names the temporary files a write makes next to its target
// (write.go); a look never takes them for the agent's.
const tmpPrefix = ".memfs-tmp-"

// disk is what one look found in the folder.
type disk struct {
	files   map[string]fileStat    // regular files by store path
	dirs    map[string]unix.Stat_t // directories below the root, by store path
	skipped map[string]string      // what is never uploaded, by path, with why
	marker  *unix.Stat_t           // the marker file's stat, nil when missing
	leftTmp []string               // temporary files of a write a crash cut short
	blind   []string               // folders that could not be read, and hard links: nothing at or below them is gone
	known   map[string]*entry      // paths whose names are a memory's already
	gen     uint64                 // this look, marked on the entries it settled
	settled int                    // files as their entries recorded them (not in files)
	present []*entry               // settled, waiting for content the folder holds as recorded
}

// walk lists the folder below root. Files as their entry (in known)
// recorded them are only counted (disk.settle) and marked with gen, the
// look's number (non-zero when known is given); the others are listed. onDir is called with each directory's
// store path and an open descriptor of it (the root's first), for the
// watch. A name at a known path is not checked again.
func walk(root int, known map[string]*entry, gen uint64, onDir func(p string, fd int)) (*disk, error) {
	d := &disk{files: map[string]fileStat{}, dirs: map[string]unix.Stat_t{}, skipped: map[string]string{}, known: known, gen: gen}
	fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return d, d.walkDir(fd, "/", onDir)
}

// walkDir lists the directory fd (store path p) and the ones below it; it
// closes fd.
func (d *disk) walkDir(fd int, p string, onDir func(string, int)) error {
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if onDir != nil {
		onDir(p, fd)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		st, err := lstatAt(fd, name)
		if err != nil {
			continue // gone since the listing: the next look tells
		}
		cp := join(p, name)
		if p == "/" && name == fs.MarkerName {
			d.marker = &st
			continue
		}
		if strings.HasPrefix(name, tmpPrefix) {
			d.leftTmp = append(d.leftTmp, cp)
			continue
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if _, err := d.checkName(p, name, cp, isDir); err != nil {
			d.skipped[cp] = "its name can't be a memory path: " + err.Error()
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if d.settle(cp, st) {
				continue
			}
			if st.Nlink > 1 {
				d.skipped[cp] = "a hard link (the same file has another name, maybe outside the store): never uploaded"
				d.blind = append(d.blind, cp) // not gone either: a store file linked elsewhere stays the store's
				continue
			}
			d.files[cp] = statOf(st)
		case unix.S_IFDIR:
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil {
				d.dirs[cp] = st
				err = d.walkDir(sub, cp, onDir)
			}
			if err != nil {
				d.skipped[cp] = "a folder memfs can't read (" + err.Error() + "): its changes wait"
				d.blind = append(d.blind, cp)
			}
		case unix.S_IFLNK:
			d.skipped[cp] = "a symbolic link: never followed or uploaded"
		default:
			d.skipped[cp] = "not a regular file (a FIFO, socket or device): never uploaded"
		}
	}
	return nil
}

// settle reports a regular file at a known path that is as its entry
// recorded it (most of them, each look: all of them when idle), marking
// the entry seen in this look (gen) instead of keeping the file's stat.
func (d *disk) settle(p string, st unix.Stat_t) bool {
	e := d.known[p]
	if e == nil || e.rec == nil || st.Nlink > 1 || e.rec.SHA != e.sha || !e.rec.matches(statOf(st)) {
		return false
	}
	e.seen = d.gen
	d.settled++
	if e.lazy {
		d.present = append(d.present, e)
	}
	return true
}

// checkName is fs.CheckName, skipped for a file at a path a memory has.
func (d *disk) checkName(dir, name, p string, isDir bool) (string, error) {
	if !isDir && d.known[p] != nil {
		return p, nil
	}
	return fs.CheckName(dir, name, isDir)
}

// fileStat is what a look keeps of a file's stat: what tells a change.
type fileStat struct {
	ino, dev           uint64
	size, mtime, ctime int64
}

func statOf(st unix.Stat_t) fileStat {
	return fileStat{ino: st.Ino, dev: uint64(st.Dev), size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// join is the store path of name in the folder with store path dir.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
