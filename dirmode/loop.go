package dirmode

import (
	"time"

	"golang.org/x/sys/unix"
)

// One goroutine, the loop, runs the looks that nobody asked for (an event,
// the rescan every interval), the downloads a look asked for (a folder
// removed, a read-only file changed) and the baseline's saves. It starts
// at Begin and ends at Freeze, which makes the last look itself.

// debounce is how long the loop waits after an event for more, before it
// looks: one look for a burst (an editor's save is several events).
const debounce = 20 * time.Millisecond

// saveEvery bounds how often the baseline is written while files change.
const saveEvery = time.Second

// Begin takes the folder up, after the engine's Open (the store listed,
// its journal replayed) and before its Start: it writes the marker, looks
// at what the folder holds against the baseline — a file edited, added or
// removed while no worker ran is journaled, with the conflict rules, and a
// file that holds the store's content already is not downloaded again —
// then starts the watch and the loop. Files still waiting for content are
// written as the engine fills them (Fill): the folder is ready when
// LazyCount is 0.
func (d *Dir) Begin() {
	d.mu.Lock()
	w, err := newWatcher(d.poke)
	if err != nil {
		d.log.WithError(err).Warn("the store's folder can't be watched (inotify): its changes are found by the rescan every interval")
	} else {
		d.events = w // before the look: its walk adds the watches
	}
	d.setRootOwner()
	d.writeMarker()
	d.lookLocked(true)
	d.started = true
	d.writeReplayed()
	d.baseline = nil
	d.dirty = true
	d.saveLocked()
	d.mu.Unlock()
	go d.loop()
}

// writeReplayed writes the changes replayed from the journal whose file
// the folder does not hold (nor held: the look took a removal of one it
// held as a delete). REQUIRES: d.mu held.
func (d *Dir) writeReplayed() {
	for _, p := range sortedPaths(d.byPath) {
		e := d.byPath[p]
		content := e.replayed
		e.replayed = nil
		if content == nil || e.rec != nil {
			continue
		}
		st, err := d.place(e, e.path, content)
		if err != nil {
			d.log.WithError(err).WithField("memory_path", e.path).Warn("a change left in the journal can't be written into the store's folder; it stays journaled")
			continue
		}
		d.record(e, e.sha, st)
	}
}

// removeLeftTmp removes the temporary files of writes a crash cut short
// (a start's look found them). REQUIRES: d.mu held.
func (d *Dir) removeLeftTmp(paths []string) {
	for _, p := range paths {
		dir, name := parentOf(p)
		if fd, err := openDir(d.root, dir); err == nil {
			unix.Unlinkat(fd, name, 0)
			unix.Close(fd)
		}
	}
}

// loop runs until Freeze.
func (d *Dir) loop() {
	defer close(d.done)
	rescan := time.NewTicker(d.opts.Rescan)
	defer rescan.Stop()
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	var lastSave time.Time
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
			soon.Reset(debounce)
			continue
		case <-rescan.C:
		case <-soon.C:
		}
		d.mu.Lock()
		if n := d.events.takeOverflows(); n > 0 {
			d.stats.Overflows += n
			d.log.WithField("overflows", n).Warn("the folder's watch overflowed (too many changes at once): the whole folder is looked at")
		}
		again := d.lookLocked(false)
		fetch := d.takeRestore()
		if d.dirty && time.Since(lastSave) >= saveEvery {
			d.saveLocked()
			lastSave = time.Now()
		} else if d.dirty {
			again = true
		}
		d.mu.Unlock()
		for _, id := range fetch {
			if err := d.fo.Fetcher.Fetch(id); err != nil {
				d.log.WithError(err).Warn("a file of the store can't be downloaded into its folder yet (retried)")
				again = true
				d.mu.Lock()
				d.restore[id] = true
				d.mu.Unlock()
			}
		}
		if again {
			soon.Reset(d.opts.Settle)
		}
	}
}

// takeRestore returns the files to download again. REQUIRES: d.mu held.
func (d *Dir) takeRestore() []string {
	var out []string
	for id := range d.restore {
		if e := d.byID[id]; e != nil && e.lazy {
			out = append(out, id)
		}
		delete(d.restore, id)
	}
	return out
}

// Look looks at the whole folder now and journals what changed (a pass
// asked for with SIGUSR1, a test): a change is taken once it reads the
// same twice.
func (d *Dir) Look() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started && !d.frozen {
		d.lookLocked(true)
	}
}

// Freeze makes the last look, stops the watch and the loop, and saves the
// baseline: the final sync reads the journal next. Changes made after it
// are not taken (the end leaves such a file in place).
func (d *Dir) Freeze() {
	d.mu.Lock()
	started := d.started && !d.frozen
	d.mu.Unlock()
	if !started {
		return
	}
	close(d.stop)
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookLocked(true)
	d.frozen = true
	if d.events != nil {
		d.events.close()
		d.events = nil
	}
	d.saveLocked()
}

// saveLocked writes the baseline, if the folder has one. REQUIRES: d.mu held.
func (d *Dir) saveLocked() {
	if d.bpth == "" {
		return
	}
	bl := &baseline{Version: 1, Store: d.fo.StoreID, Dir: d.opts.Dir, DirDev: d.rootDev, DirIno: d.rootIno}
	for _, p := range sortedPaths(d.byPath) {
		if e := d.byPath[p]; e.rec != nil {
			r := *e.rec
			r.FileID, r.Path = e.fileID, e.path
			bl.Files = append(bl.Files, r)
		}
	}
	if err := saveBaseline(d.bpth, d.root, bl); err != nil {
		d.log.WithError(err).Warn("the directory baseline can't be written: a crash now would make the next start take files it can't tell apart for conflicts (nothing is lost)")
		return
	}
	d.dirty = false
}
