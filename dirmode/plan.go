package dirmode

import (
	"sort"
	"strings"
)

// What a look found, decided apart from reading or writing anything: each
// regular file of the folder against the entries (what the worker last
// wrote or took there). The rules:
//
//   - a file whose stat (inode, size, mtime, ctime) is its entry's record
//     is unchanged;
//   - an entry's inode found at another path with its size and mtime is a
//     move there (a file its target held goes as deleted, in the same
//     change); a file moved and written between two looks is a delete and
//     a new file, and so is an inode the filesystem reused;
//   - a file at an entry's path, moved there or not, whose stat differs is
//     a change of that entry's file (an editor's save by rename keeps the
//     file);
//   - a file at a path no entry has is a new file;
//   - an entry whose file is gone, and did not move, is a delete — only
//     when it was ever on disk (a file still waiting for its content is not
//     gone), and not below a folder the look could not read.

// entry is one file of the store as the folder holds it.
type entry struct {
	fileID string
	path   string
	sha    string // the content the engine holds for it (the store's, or the last local change)
	rec    *rec   // what was last written or taken at path; nil: nothing of ours on disk yet
	lazy   bool   // its content is still to be written (fs's Lazy)
	// replayed is the content of a change replayed from the journal at
	// Open, until Begin: written then if the folder lost the file (a
	// clean end removes what the journal still holds).
	replayed []byte
	seen     uint64 // the last look that found it as recorded (disk.gen)
}

// move is an entry's file found at another path.
type move struct {
	e        *entry
	to       string
	replaced *entry // the entry the target held, now gone
}

// lookPlan is what a look has to read and record.
type lookPlan struct {
	changed []*entry // same path, stat differs (or a file where one waits for content)
	moves   []move
	created []string // paths with no entry
	deleted []*entry
	present []*entry // waiting for content the folder holds as recorded
}

type inoKey struct{ dev, ino uint64 }

// planLook compares the folder with the entries. Most files are as
// recorded (an idle rescan: all of them): the walk settled those, and
// only the rest is matched here.
func planLook(byPath map[string]*entry, d *disk) lookPlan {
	pl := lookPlan{present: d.present}
	if d.settled == len(byPath) && len(d.files) == 0 {
		pl.sort()
		return pl // every file as recorded, and nothing else
	}
	var open []*entry // entries not settled: changed, moved or gone
	for _, e := range byPath {
		if e.seen != d.gen || d.gen == 0 {
			open = append(open, e)
		}
	}
	pl.planRest(byPath, d, d.files, open)
	pl.sort()
	return pl
}

// planRest plans the files and entries the first pass did not settle.
func (pl *lookPlan) planRest(byPath map[string]*entry, d *disk, rest map[string]fileStat, open []*entry) {
	byIno := make(map[inoKey]*entry, len(open))
	for _, e := range open {
		if e.rec != nil {
			byIno[inoKey{e.rec.Dev, e.rec.Ino}] = e
		}
	}
	moved := map[*entry]bool{}
	movedTo := map[string]*entry{}
	for p, st := range rest {
		o := byIno[inoKey{st.dev, st.ino}]
		if o == nil || o.path == p || o.rec.Size != st.size || o.rec.Mtime != st.mtime {
			continue // not a move: a rename changes neither (an inode reused by a new file does)
		}
		if at, ok := d.files[o.path]; ok && at.ino == st.ino && at.dev == st.dev {
			continue // one inode at two paths: a hard link, skipped by walk
		}
		moved[o], movedTo[p] = true, o
		pl.moves = append(pl.moves, move{e: o, to: p})
	}
	replaced := map[*entry]bool{}
	for i, m := range pl.moves {
		if r := byPath[m.to]; r != nil && !moved[r] {
			pl.moves[i].replaced = r
			replaced[r] = true
		}
	}
	for p, st := range rest {
		if movedTo[p] != nil {
			continue
		}
		e := byPath[p]
		switch {
		case e == nil || moved[e]:
			pl.created = append(pl.created, p)
		case e.rec != nil && e.rec.matches(st) && e.rec.SHA == e.sha:
			if e.lazy {
				pl.present = append(pl.present, e) // a start: its content is there already
			}
		default:
			pl.changed = append(pl.changed, e)
		}
	}
	for _, e := range open {
		if moved[e] || replaced[e] {
			continue
		}
		if _, ok := d.files[e.path]; ok || e.rec == nil || under(e.path, d.blind) || (d.gen != 0 && e.seen == d.gen) {
			continue
		}
		pl.deleted = append(pl.deleted, e)
	}
}

// sort puts each list in path order: a look takes changes in the same
// order whatever the maps' (the walk's) order.
func (pl *lookPlan) sort() {
	byEntry := func(l []*entry) {
		sort.Slice(l, func(i, j int) bool { return l[i].path < l[j].path })
	}
	byEntry(pl.changed)
	byEntry(pl.deleted)
	byEntry(pl.present)
	sort.Strings(pl.created)
	sort.Slice(pl.moves, func(i, j int) bool { return pl.moves[i].to < pl.moves[j].to })
}

// under reports whether p is one of dirs or below one.
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func sortedPaths[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
