package dirmode

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// A look walks the whole folder, plans what changed (plan.go) and takes
// it: each change is journaled, as the FUSE tree journals a close, before
// the entry records it; a change the journal can't take leaves the entry
// as it was, so the next look finds it again (and memfs status lists it
// meanwhile). A read-only store's changes are never journaled: the files
// are put back from the store instead (restoreReadOnly).

// lookLocked makes one look. explicit: asked for (a pass, the end, a
// merge), so a change is taken once it reads the same before and after;
// otherwise a change that no close announced must also have lasted
// Settle. It reports whether something was left for a later look.
//
// REQUIRES: d.mu held.
func (d *Dir) lookLocked(explicit bool) (again bool) {
	start := time.Now()
	defer func() {
		d.stats.Looks++
		d.stats.LastLook = time.Now()
		d.stats.LastLookMs = float64(time.Since(start).Microseconds()) / 1000
	}()
	if !d.checkRoot() {
		return true
	}
	d.looks++
	dk, err := walk(d.root, d.byPath, d.looks, d.watchDir)
	if err != nil {
		d.log.WithError(err).Error("the store's folder can't be read: its changes wait")
		return true
	}
	d.skipped = dk.skipped
	if !d.started {
		d.removeLeftTmp(dk.leftTmp) // a start: no write of ours is under way
	}
	if !d.checkMarker() {
		d.redownloadMissing(dk)
		return true
	}
	pl := planLook(d.byPath, dk)
	closed := d.events.takeClosed()
	t := taker{d: d, explicit: explicit, closed: closed}
	if d.fo.ReadOnly {
		d.restoreReadOnly(pl, dk)
		return len(d.restore) > 0
	}
	for _, e := range pl.present {
		d.setLazy(e, false)
	}
	t.takeMoves(pl.moves)
	for _, e := range pl.changed {
		t.takeChange(e)
	}
	for _, p := range pl.created {
		t.takeCreate(p)
	}
	for _, e := range pl.deleted {
		t.takeDelete(e)
	}
	return t.again
}

// taker takes the changes of one look.
type taker struct {
	d        *Dir
	explicit bool
	closed   map[string]bool
	again    bool
}

// read reads the file at p for a change, or leaves it for a later look:
// gone, unstable, or (not explicit) changed less than Settle ago without
// a close.
func (t *taker) read(p string) (content []byte, st unix.Stat_t, sha string, ok bool) {
	content, st, stable, err := readFile(t.d.root, p, store.MaxContentBytes)
	if err != nil {
		if isSkipped(err) {
			t.d.unjournaled[p] = err
		}
		return nil, st, "", false
	}
	if !stable || (!t.explicit && !t.closed[p] && time.Since(time.Unix(st.Ctim.Unix())) < t.d.opts.Settle) {
		t.again = true
		return nil, st, "", false
	}
	delete(t.d.unjournaled, p)
	sum := sha256.Sum256(content)
	return content, st, hex.EncodeToString(sum[:]), true
}

// takeChange takes a change of e's file where it stands.
func (t *taker) takeChange(e *entry) {
	d := t.d
	content, st, sha, ok := t.read(e.path)
	if !ok {
		return
	}
	if e.lazy && e.rec != nil && e.rec.matchesFile(st) {
		return // as last recorded, and the store changed since: Fill writes the store's
	}
	if sha == e.sha || (e.rec != nil && sha == e.rec.SHA && !e.lazy) {
		d.record(e, sha, st) // the same content (a touch, a chmod, an editor's save of the same bytes)
		return
	}
	base := ""
	switch {
	case e.rec != nil && e.rec.SHA != e.sha:
		base = e.rec.SHA // made on what the folder last had; the store's differs
	case e.rec == nil && !d.started:
		// Found at a start with no record: what both last agreed on is
		// not known (a write of ours a power loss cut short, a baseline
		// lost): the store's version wins, this one goes to the conflict log.
		base = fs.UnknownBase
	}
	if d.journal(base, fs.FileState{FileID: e.fileID, Path: e.path, Content: content}) {
		d.record(e, sha, st)
	}
}

// takeMoves takes the moves of a look (and the files they replaced,
// deleted with them) in one change, so that no state between two of them
// (a swap's: two files at one path) is journaled.
func (t *taker) takeMoves(moves []move) {
	d := t.d
	var states []fs.FileState
	type read struct {
		m   move
		sha string
		st  unix.Stat_t
	}
	var taken []read
	for _, m := range moves {
		content, st, sha, ok := t.read(m.to)
		if !ok {
			continue
		}
		states = append(states, fs.FileState{FileID: m.e.fileID, Path: m.to, Content: content})
		if m.replaced != nil {
			states = append(states, fs.FileState{FileID: m.replaced.fileID, Path: m.replaced.path, Deleted: true})
		}
		taken = append(taken, read{m, sha, st})
	}
	if len(states) == 0 || !d.journal("", states...) {
		return
	}
	for _, r := range taken {
		if r.m.replaced != nil {
			d.drop(r.m.replaced)
		}
	}
	for _, r := range taken {
		d.moveTo(r.m.e, r.m.to)
		d.record(r.m.e, r.sha, r.st)
	}
}

// takeCreate takes a new file.
func (t *taker) takeCreate(p string) {
	d := t.d
	if d.byPath[p] != nil {
		t.again = true // its path is still another's (a move not taken yet)
		return
	}
	content, st, sha, ok := t.read(p)
	if !ok {
		return
	}
	e := &entry{fileID: fs.NewFileID(), path: p}
	if d.journal("", fs.FileState{FileID: e.fileID, Path: p, Content: content}) {
		d.add(e)
		d.record(e, sha, st)
	}
}

// takeDelete takes a removed file.
func (t *taker) takeDelete(e *entry) {
	if t.d.journal("", fs.FileState{FileID: e.fileID, Path: e.path, Deleted: true}) {
		t.d.drop(e)
	}
}

// record notes that e's file holds sha with stat st, as both the folder
// and the engine now have it. REQUIRES: d.mu held.
func (d *Dir) record(e *entry, sha string, st unix.Stat_t) {
	r := recOf(e.fileID, e.path, sha, st)
	e.rec, e.sha = &r, sha
	d.setLazy(e, false)
	d.dirty = true
}

// journal appends states (made against base, when set) and reports
// whether the journal took them; when it did not, each path is listed
// with the error until a later look journals it.
//
// REQUIRES: d.mu held.
func (d *Dir) journal(base string, states ...fs.FileState) bool {
	var err error
	if bj, ok := d.fo.Journal.(fs.BaseJournal); ok && base != "" && len(states) == 1 {
		err = bj.AppendAgainst(base, states[0])
	} else {
		err = d.fo.Journal.Append(states...)
	}
	for _, st := range states {
		if err != nil {
			d.unjournaled[st.Path] = err
		} else {
			delete(d.unjournaled, st.Path)
		}
	}
	if err != nil {
		d.log.WithError(err).WithField("files", len(states)).Warn("a change in the store's folder could not be journaled yet: it is looked at again, and memfs status lists it")
	}
	return err == nil
}

// checkRoot makes sure the folder is still the one opened. A folder
// removed (or replaced) is made again and the store downloaded into it
// again: nothing is deleted in the store. REQUIRES: d.mu held.
func (d *Dir) checkRoot() bool {
	var st unix.Stat_t
	err := unix.Lstat(d.opts.Dir, &st)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && uint64(st.Dev) == d.rootDev && st.Ino == d.rootIno {
		return true
	}
	switch {
	case isNotExist(err):
		if err := unix.Mkdir(d.opts.Dir, 0o700); err != nil {
			d.log.WithError(err).Error("the store's folder was removed and can't be made again: nothing is synced until it can")
			return false
		}
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
	default:
		d.warnOnce("root-replaced", d.log.WithError(err), "the store's folder was replaced by something that is not a folder: nothing is synced until it is a folder again")
		return false
	}
	if err := d.openRoot(); err != nil {
		d.log.WithError(err).Error("the store's folder can't be opened: nothing is synced")
		return false
	}
	delete(d.warned, "root-replaced")
	d.setRootOwner()
	for _, e := range d.byPath {
		e.rec = nil
		d.setLazy(e, true)
		d.restore[e.fileID] = true
	}
	d.stats.Redownloads++
	d.writeMarker()
	d.log.WithField("memories", len(d.byPath)).Error("the store's folder was removed or replaced: the store is downloaded into it again, and nothing is deleted in the store")
	d.poke()
	return true
}

// checkMarker reads the marker file: missing or altered, it is written
// again, and this look takes nothing (the store is not synced while the
// marker is wrong). REQUIRES: d.mu held.
func (d *Dir) checkMarker() bool {
	want := fs.MarkerContent(d.fo.StoreID)
	got, _, _, err := readFile(d.root, "/"+fs.MarkerName, int64(len(want))+16)
	problem := ""
	switch {
	case isNotExist(err):
		problem = "missing"
	case err != nil || string(got) != string(want):
		problem = "altered"
	}
	if problem == "" {
		if d.stats.MarkerProblem != "" {
			d.log.Info("the marker file is back: the store's folder is synced again")
			d.stats.MarkerProblem = ""
		}
		return true
	}
	if d.stats.MarkerProblem != problem {
		d.log.WithField("marker", fs.MarkerName).Error("the marker file of the store's folder is " + problem + ": this look takes no change from the folder; the marker is written again, and files gone with it are downloaded again (nothing is deleted in the store)")
	}
	d.stats.MarkerProblem = problem
	d.writeMarker()
	return false
}

// redownloadMissing marks every file gone from the folder for download
// again (the marker went with them: taken for a wipe, not deletes).
// REQUIRES: d.mu held.
func (d *Dir) redownloadMissing(dk *disk) {
	for p, e := range d.byPath {
		if _, ok := dk.files[p]; !ok && e.rec != nil {
			e.rec = nil
			d.setLazy(e, true)
			d.restore[e.fileID] = true
		}
	}
	if len(d.restore) > 0 {
		d.poke()
	}
}

// restoreReadOnly puts back what changed in a read-only store's folder:
// a changed, moved or removed file is downloaded again, a new one
// removed, each with a warning; all are counted. REQUIRES: d.mu held.
func (d *Dir) restoreReadOnly(pl lookPlan, dk *disk) {
	n := 0
	put := func(e *entry, why string) {
		d.log.WithField("memory_path", e.path).Warn("a file of a read-only store was " + why + ": it is put back from the store, and nothing is uploaded")
		e.rec = nil
		d.setLazy(e, true)
		d.restore[e.fileID] = true
		n++
	}
	for _, e := range pl.present {
		d.setLazy(e, false)
	}
	for _, m := range pl.moves {
		d.removeStray(m.to)
		put(m.e, "moved")
		if m.replaced != nil {
			put(m.replaced, "replaced")
		}
	}
	for _, e := range pl.changed {
		if !(e.lazy && e.rec == nil) {
			put(e, "changed")
		}
	}
	for _, e := range pl.deleted {
		put(e, "removed")
	}
	for _, p := range append(pl.created, sortedPaths(dk.skipped)...) {
		d.log.WithField("memory_path", p).Warn("a file was added to a read-only store's folder: it is removed, and nothing is uploaded")
		d.removeStray(p)
		n++
	}
	d.skipped = map[string]string{}
	d.stats.Restored += n
	if n > 0 {
		d.poke()
	}
}

// removeStray removes what stands at p (never following a link): a file
// that must not be in a read-only store's folder. REQUIRES: d.mu held.
func (d *Dir) removeStray(p string) {
	dir, name := parentOf(p)
	fd, err := openDir(d.root, dir)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if err := unix.Unlinkat(fd, name, 0); err != nil {
		unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
	}
}

// poke asks the loop for a look (and the restores it holds).
func (d *Dir) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
