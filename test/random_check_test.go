package test

import (
	"bytes"
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

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

// syncAndCheckStore drives the flusher until nothing is pending (bounded),
// then checks the store holds exactly the model's files: by path and
// content_sha256 in the basic view, or (full, and whenever the shas
// differ) byte for byte in the full view.
func (r *rnd) syncAndCheckStore(where string, full bool) {
	r.t.Helper()
	if len(r.m.files) == 0 {
		// Every file of a store gone at once is treated as an accident:
		// nothing is deleted and the files come back (sync.md). This test
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
	pass := 1
	for ; pass <= rndMaxPasses; pass++ {
		res = r.mnt.Engine().SyncNow(ctx, true, true)
		if res.Left == 0 {
			break
		}
	}
	if res.Left != 0 {
		r.fail("%s: %d changes still pending after %d flusher passes (last pass: %+v)", where, res.Left, rndMaxPasses, res)
	}
	r.passes[pass]++
	r.ops = append(r.ops, fmt.Sprintf("-- sync %s: %d pass(es)", where, pass))
	if !full && r.storeMatchesSHA(ctx, where) {
		r.checkMount(where + ", after the sync")
		return
	}
	mems, err := r.cl.AllMemories(ctx, r.storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		r.fail("%s: list the store: %v", where, err)
	}
	got := map[string][]byte{}
	for _, m := range mems {
		if m.Content == nil {
			r.fail("%s: the full view of %s has no content", where, m.Path)
		}
		if _, dup := got[m.Path]; dup {
			r.fail("%s: two memories at %s", where, m.Path)
		}
		got[strings.TrimPrefix(m.Path, "/")] = []byte(*m.Content)
	}
	if diff := rndDiff(r.m.files, got, nil, nil); diff != "" {
		r.fail("%s: the store differs from the model (- model, + store):\n%s", where, diff)
	}
	r.checkMount(where + ", after the sync")
}

// storeMatchesSHA lists the store in the basic view (paths and shas: a
// full listing of files up to 100 KiB, decoded after every few steps, is
// most of this test's time under -race) and reports whether it holds
// exactly the model's paths with the model's content_sha256.
func (r *rnd) storeMatchesSHA(ctx context.Context, where string) bool {
	r.t.Helper()
	mems, err := r.cl.AllMemories(ctx, r.storeID, store.ListMemoriesOptions{})
	if err != nil {
		r.fail("%s: list the store: %v", where, err)
	}
	if len(mems) != len(r.m.files) {
		return false
	}
	for _, m := range mems {
		c, ok := r.m.files[strings.TrimPrefix(m.Path, "/")]
		if !ok || m.ContentSHA256 != store.SHA256Hex(string(c)) || m.ContentSizeBytes != int64(len(c)) {
			return false
		}
	}
	return true
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
