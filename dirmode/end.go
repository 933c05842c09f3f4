package dirmode

import (
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
)

// End clears the folder after the final sync (Freeze first): every file
// it holds as recorded is removed — its content is in the store, or in
// the journal for the next mount — with the folders left empty. What else
// it holds (a file changed after the last look, one never uploaded: a
// link, a name no memory can have) stays, and so do the marker and the
// baseline, for the next start of this store here, which takes it up.
// It returns the paths left; none means the folder is empty (the caller
// removes it if it made it) and the baseline is gone.
func (d *Dir) End() (left []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root < 0 {
		return nil
	}
	for _, p := range sortedPaths(d.byPath) {
		e := d.byPath[p]
		if e.rec != nil && d.asRecorded(e) {
			d.removeRecorded(e)
			e.rec = nil
			d.dirty = true
		}
	}
	dk, err := walk(d.root, nil, 0, nil)
	if err != nil {
		d.log.WithError(err).Warn("the store's folder can't be read at its end: left as it is")
		return []string{d.opts.Dir}
	}
	for p := range dk.files {
		left = append(left, p)
	}
	for p := range dk.skipped {
		left = append(left, p)
	}
	dirs := sortedPaths(dk.dirs)
	slices.Reverse(dirs) // a folder's folders before it
	for _, p := range dirs {
		if !d.pruneIfEmpty(p) {
			if !hasPrefixIn(p, left) {
				left = append(left, p+"/")
			}
		}
	}
	if len(left) > 0 {
		d.saveLocked()
		return left
	}
	unix.Unlinkat(d.root, fs.MarkerName, 0)
	if d.bpth != "" {
		if err := removeBaseline(d.bpth); err != nil {
			d.log.WithError(err).Warn("the directory baseline can't be removed")
		}
	}
	unix.Close(d.root)
	d.root = -1
	return nil
}

// pruneIfEmpty removes the folder at p and the empty ones above it, and
// reports whether p is gone. REQUIRES: d.mu held.
func (d *Dir) pruneIfEmpty(p string) bool {
	d.prune(p)
	parent, name := parentOf(p)
	fd, err := openDir(d.root, parent)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	_, err = lstatAt(fd, name)
	return isNotExist(err)
}

// hasPrefixIn reports whether a path of paths is below the folder dir.
func hasPrefixIn(dir string, paths []string) bool {
	for _, p := range paths {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}
