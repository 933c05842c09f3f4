package test

import (
	"bytes"
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue"
)

// --- checks -------------------------------------------------------------------

// checkMount walks the mount and compares it with the model: the same
// directories, the same files with the same bytes (and sizes), and the
// marker file.
func (r *rnd) checkMount(where string) {
	r.t.Helper()
	gotFiles := map[string][]byte{}
	gotDirs := map[string]bool{}
	marker := false
	err := filepath.WalkDir(r.root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == r.root {
			return nil
		}
		rel := strings.TrimPrefix(p, r.root+"/")
		if d.IsDir() {
			gotDirs[rel] = true
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file (%v)", rel, d.Type())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == fs.MarkerName {
			marker = true
			if want := rndMarkerPrefix + r.storeID; string(b) != want {
				return fmt.Errorf("the marker reads %q, want %q", b, want)
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() != int64(len(b)) {
			return fmt.Errorf("%s: size %d but %d bytes read", rel, info.Size(), len(b))
		}
		gotFiles[rel] = b
		return nil
	})
	if err != nil {
		r.fail("%s: walking the mount: %v", where, err)
	}
	if !marker {
		r.fail("%s: the marker file %s is missing", where, fs.MarkerName)
	}
	if diff := rndDiff(r.m.files, gotFiles, r.m.dirs, gotDirs); diff != "" {
		r.fail("%s: the mount differs from the model (- model, + mount):\n%s", where, diff)
	}
}

// syncAndCheckStore drives the flusher until a pass makes no progress
// (bounded), then checks the sync invariant (checkInvariant). With exact,
// nothing may be left pending and the store must hold exactly the model's
// files, byte for byte.
func (r *rnd) syncAndCheckStore(where string, exact bool) {
	r.t.Helper()
	if len(r.m.files) == 0 {
		// Every file of a store gone at once is treated as an accident:
		// nothing is deleted and the files come back (docs/sync.md,
		// "Deletes": the wipe guard). This test
		// does not model that, so it keeps one file.
		p := "keep.md"
		r.record(len(r.ops)+1, "keep", "create "+p, 0)
		if err := os.WriteFile(r.abs(p), []byte("kept\n"), 0o644); err != nil {
			r.fail("create %s: %v", p, err)
		}
		r.m.files[p] = []byte("kept\n")
		r.checkMount(where)
	}
	ctx, cancel := context.WithTimeout(r.ctx, rndOpTimeout)
	defer cancel()
	var res syncqueue.SyncResult
	pass, prev := 1, -1
	for ; pass <= rndMaxPasses; pass++ {
		res = r.mnt.Engine().SyncNow(ctx, true, true)
		if res.Left == 0 || (res.Uploaded+res.Deleted+res.Conflicts == 0 && res.Left == prev) {
			break
		}
		prev = res.Left
	}
	if pass > rndMaxPasses {
		r.fail("%s: the flusher still makes progress after %d passes (last pass: %+v)", where, rndMaxPasses, res)
	}
	if exact && res.Left != 0 {
		r.fail("%s: %d changes still pending with every file valid (last pass: %+v): %+v", where, res.Left, res, r.mnt.Engine().Status().Pending)
	}
	r.passes[pass]++
	r.ops = append(r.ops, fmt.Sprintf("-- sync %s: %d pass(es), %d left", where, pass, res.Left))
	r.checkInvariant(ctx, where)
	if exact {
		r.checkStoreBytes(ctx, where)
	}
	r.checkMount(where + ", after the sync")
}

// rndPendingList describes the pending changes of a status, one a line.
func rndPendingList(st syncqueue.Status) string {
	var b strings.Builder
	for _, c := range st.Pending {
		fmt.Fprintf(&b, "\n  %s %s (memory %q): %s %s", c.Op, c.Path, c.MemoryID, c.Reason, c.Error)
	}
	return b.String()
}

// rndLastingReasons are the reasons a change may still wait once the store
// is reachable and the state dir has room: it heals when the file changes
// (content that is not UTF-8) or when what blocks its path moves.
var rndLastingReasons = map[string]bool{syncqueue.ReasonNotUTF8: true, syncqueue.ReasonPath: true}

// checkInvariant checks the sync invariant (docs/sync.md) after a sync: every file of
// the mount is in the store with its content, or pending with a reason
// status shows (and a lasting one: nothing transient is left once the
// store is back); every memory of the store is a file of the mount, or the
// memory of a pending change (its file moved, changed or went, and waits);
// and the conflict log holds exactly the local versions the store won.
func (r *rnd) checkInvariant(ctx context.Context, where string) {
	r.t.Helper()
	st := r.mnt.Engine().Status()
	pending := map[string]syncqueue.PendingChange{}
	ofMemory := map[string]bool{}
	for _, c := range st.Pending {
		if !rndLastingReasons[c.Reason] {
			r.fail("%s: %s of %s waits because %q (%s): not a reason that lasts once the store and the disk are back\nstatus: %s", where, c.Op, c.Path, c.Reason, c.Error, rndPendingList(st))
		}
		p := strings.TrimPrefix(c.Path, "/")
		pending[p] = c
		if c.MemoryID != "" {
			ofMemory[c.MemoryID] = true
		}
		if c.Reason == syncqueue.ReasonNotUTF8 && utf8.Valid(r.m.files[p]) {
			r.fail("%s: status says %s is not UTF-8, the model's content is", where, c.Path)
		}
	}
	mems, err := r.cl.AllMemories(ctx, r.storeID, store.ListMemoriesOptions{})
	if err != nil {
		r.fail("%s: list the store: %v", where, err)
	}
	stored := map[string]store.Memory{}
	for _, m := range mems {
		p := strings.TrimPrefix(m.Path, "/")
		if _, dup := stored[p]; dup {
			r.fail("%s: two memories at %s", where, m.Path)
		}
		stored[p] = m
	}
	for _, p := range r.m.sortedFiles() {
		c := r.m.files[p]
		if m, ok := stored[p]; ok && m.ContentSHA256 == store.SHA256Hex(string(c)) {
			continue
		}
		if _, ok := pending[p]; ok {
			continue
		}
		r.fail("%s: /%s (%d bytes %s) is not in the store with its content (store: %v) and nothing is pending for it: a stranded edit\nstatus: %s",
			where, p, len(c), rndPreview(c), stored[p].ContentSHA256 != "", rndPendingList(st))
	}
	for p, m := range stored {
		if c, ok := r.m.files[p]; ok && m.ContentSHA256 == store.SHA256Hex(string(c)) {
			continue
		}
		if ofMemory[m.ID] {
			continue
		}
		r.fail("%s: the store holds /%s (%s) where the mount has something else, and no pending change of the mount is about it\nstatus: %s", where, p, m.ID, rndPendingList(st))
	}
	r.checkConflicts(where)
}

// checkConflicts compares the conflict log of the mount's state dir with
// the local versions the model expects the store to have won.
func (r *rnd) checkConflicts(where string) {
	r.t.Helper()
	log := syncqueue.OpenConflictLog(r.stateDir, syncqueue.ConflictRetention{})
	all, err := log.List()
	if err != nil {
		r.fail("%s: list the conflict log: %v", where, err)
	}
	var got []string
	for _, c := range all {
		if c.StoreID != r.storeID {
			continue
		}
		_, content, err := log.Get(c.ID)
		if err != nil {
			r.fail("%s: read conflict %s: %v", where, c.ID, err)
		}
		got = append(got, fmt.Sprintf("%s %q", c.Path, content))
	}
	var want []string
	for _, c := range r.conflicts[r.stateDir] {
		want = append(want, fmt.Sprintf("/%s %q", c.path, c.content))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		r.fail("%s: the conflict log holds %v, want %v", where, got, want)
	}
}

// checkStoreBytes checks, byte for byte in the full view, that the store
// holds exactly the model's files.
func (r *rnd) checkStoreBytes(ctx context.Context, where string) {
	r.t.Helper()
	mems, err := r.cl.AllMemories(ctx, r.storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		r.fail("%s: list the store: %v", where, err)
	}
	got := map[string][]byte{}
	for _, m := range mems {
		if m.Content == nil {
			r.fail("%s: the full view of %s has no content", where, m.Path)
		}
		got[strings.TrimPrefix(m.Path, "/")] = []byte(*m.Content)
	}
	if diff := rndDiff(r.m.files, got, nil, nil); diff != "" {
		r.fail("%s: the store differs from the model (- model, + store):\n%s", where, diff)
	}
}

// heal overwrites every file that is not UTF-8 with text: the waits it
// caused must then end by themselves.
func (r *rnd) heal(i int) {
	r.t.Helper()
	for _, p := range r.m.sortedFiles() {
		if !utf8.Valid(r.m.files[p]) {
			r.create(i, "heal", p, false, []byte("made valid\n"))
		}
	}
	r.checkMount("after making every file valid")
}

// rndImpliedDirs is the directories a set of files needs.
func rndImpliedDirs(files map[string][]byte) map[string]bool {
	dirs := map[string]bool{}
	for p := range files {
		for d := rndParent(p); d != ""; d = rndParent(d) {
			dirs[d] = true
		}
	}
	return dirs
}

// rndDiff describes how got differs from want (at most 20 lines); ""
// when equal. Dirs are compared only when wantDirs is not nil.
func rndDiff(want, got map[string][]byte, wantDirs, gotDirs map[string]bool) string {
	var lines []string
	keys := map[string]bool{}
	for p := range want {
		keys[p] = true
	}
	for p := range got {
		keys[p] = true
	}
	sorted := make([]string, 0, len(keys))
	for p := range keys {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	for _, p := range sorted {
		w, inW := want[p]
		g, inG := got[p]
		switch {
		case !inG:
			lines = append(lines, fmt.Sprintf("- file %s (%d bytes)", p, len(w)))
		case !inW:
			lines = append(lines, fmt.Sprintf("+ file %s (%d bytes) %s", p, len(g), rndPreview(g)))
		case !bytes.Equal(w, g):
			at := 0
			for at < min(len(w), len(g)) && w[at] == g[at] {
				at++
			}
			lines = append(lines, fmt.Sprintf("~ file %s: %d bytes %s, want %d bytes %s (first difference at byte %d)",
				p, len(g), rndPreview(g), len(w), rndPreview(w), at))
		}
	}
	if wantDirs != nil {
		for _, d := range rndSortedKeys(wantDirs) {
			if !gotDirs[d] {
				lines = append(lines, "- dir "+d)
			}
		}
		for _, d := range rndSortedKeys(gotDirs) {
			if !wantDirs[d] {
				lines = append(lines, "+ dir "+d)
			}
		}
	}
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("... and %d more", len(lines)-20))
	}
	return strings.Join(lines, "\n")
}

func rndSortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func rndPreview(b []byte) string {
	if len(b) > 24 {
		return fmt.Sprintf("%q...", b[:24])
	}
	return fmt.Sprintf("%q", b)
}

func rndLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
