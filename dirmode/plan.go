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
//   - an entry's inode found at another path is a move there (a file its
//     target held goes as deleted, in the same change);
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

// planLook compares the folder with the entries.
func planLook(byPath map[string]*entry, d *disk) lookPlan {
	byIno := make(map[inoKey]*entry, len(byPath))
	for _, e := range byPath {
		if e.rec != nil {
			byIno[inoKey{e.rec.Dev, e.rec.Ino}] = e
		}
	}
	var pl lookPlan
	moved := map[*entry]bool{}
	movedTo := map[string]*entry{}
	paths := sortedPaths(d.files) // sorted once, for both walks over the files
	for _, p := range paths {
		st := d.files[p]
		o := byIno[inoKey{uint64(st.Dev), st.Ino}]
		if o == nil || o.path == p {
			continue
		}
		if at, ok := d.files[o.path]; ok && at.Ino == st.Ino && at.Dev == st.Dev {
			continue // one inode at two paths: a hard link, skipped by walk
		}
		moved[o], movedTo[p] = true, o
		pl.moves = append(pl.moves, move{e: o, to: p})
	}
	for i, m := range pl.moves {
		if r := byPath[m.to]; r != nil && !moved[r] {
			pl.moves[i].replaced = r
		}
	}
	replaced := map[*entry]bool{}
	for _, m := range pl.moves {
		if m.replaced != nil {
			replaced[m.replaced] = true
		}
	}
	for _, p := range paths {
		if movedTo[p] != nil {
			continue
		}
		st := d.files[p]
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
	for p, e := range byPath { // the deletes alone are sorted, below
		if moved[e] || replaced[e] {
			continue
		}
		if _, ok := d.files[p]; ok || e.rec == nil || under(p, d.blind) {
			continue
		}
		pl.deleted = append(pl.deleted, e)
	}
	sort.Slice(pl.deleted, func(i, j int) bool { return pl.deleted[i].path < pl.deleted[j].path })
	return pl
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
