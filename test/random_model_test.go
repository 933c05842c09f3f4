package test

import (
	"maps"
	"sort"
	"strings"
	"syscall"
)

// The model of the randomized test: what the mount must show, and how
// paths and contents are picked.

// rndModel is what the mount must show: files by relative path ("a/b"), and
// directories (the root is implicit).
type rndModel struct {
	files map[string][]byte
	dirs  map[string]bool
}

type rndKind int

const (
	rndNone rndKind = iota
	rndFile
	rndDir
)

func (m *rndModel) kind(p string) rndKind {
	if p == "" {
		return rndDir
	}
	if _, ok := m.files[p]; ok {
		return rndFile
	}
	if m.dirs[p] {
		return rndDir
	}
	return rndNone
}

// resolveDir is the errno of resolving p as a directory to create in or
// look up in: ENOENT if a component is missing, ENOTDIR if one is a file
// (the first offending component decides, as in the kernel's walk).
func (m *rndModel) resolveDir(p string) syscall.Errno {
	if p == "" {
		return 0
	}
	segs := strings.Split(p, "/")
	for i := range segs {
		switch m.kind(strings.Join(segs[:i+1], "/")) {
		case rndNone:
			return syscall.ENOENT
		case rndFile:
			return syscall.ENOTDIR
		}
	}
	return 0
}

func (m *rndModel) sortedFiles() []string {
	out := make([]string, 0, len(m.files))
	for p := range m.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// sortedDirs lists the directories, root ("") first.
func (m *rndModel) sortedDirs() []string {
	out := []string{""}
	for p := range m.dirs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (m *rndModel) empty(dir string) bool {
	pre := dir + "/"
	for p := range m.files {
		if strings.HasPrefix(p, pre) {
			return false
		}
	}
	for p := range m.dirs {
		if strings.HasPrefix(p, pre) {
			return false
		}
	}
	return true
}

// move renames src to dst (a file, or a directory with its subtree).
func (m *rndModel) move(src, dst string) {
	if c, ok := m.files[src]; ok {
		delete(m.files, src)
		m.files[dst] = c
		return
	}
	delete(m.dirs, dst) // an empty directory replaced
	delete(m.dirs, src)
	m.dirs[dst] = true
	pre := src + "/"
	for _, p := range m.sortedFiles() {
		if rest, ok := strings.CutPrefix(p, pre); ok {
			m.files[dst+"/"+rest] = m.files[p]
			delete(m.files, p)
		}
	}
	for p := range maps.Clone(m.dirs) {
		if rest, ok := strings.CutPrefix(p, pre); ok {
			delete(m.dirs, p)
			m.dirs[dst+"/"+rest] = true
		}
	}
}

// rndDepth is the number of segments of p ("" is 0).
func rndDepth(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// subtreeDepth is how many levels a directory's subtree adds below it.
func (m *rndModel) subtreeDepth(dir string) int {
	d, pre := 0, dir+"/"
	for p := range m.dirs {
		if strings.HasPrefix(p, pre) {
			d = max(d, rndDepth(p)-rndDepth(dir))
		}
	}
	return d
}

func rndJoin(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func rndParent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// --- picking paths and contents ---------------------------------------------

func (r *rnd) pct(p int) bool { return r.rng.IntN(100) < p }

func rndPick[T any](r *rnd, xs []T) T { return xs[r.rng.IntN(len(xs))] }

// pickDir picks a directory to work in: usually an existing one (root
// included), sometimes a missing one (ENOENT) or a file (ENOTDIR).
func (r *rnd) pickDir(maxDepth int) string {
	switch {
	case r.pct(7):
		return rndJoin(rndPick(r, r.m.sortedDirs()), "nodir")
	case r.pct(4) && len(r.m.files) > 0:
		return rndPick(r, r.m.sortedFiles())
	}
	var ds []string
	for _, d := range r.m.sortedDirs() {
		if rndDepth(d) <= maxDepth {
			ds = append(ds, d)
		}
	}
	return rndPick(r, ds)
}

// pickFile picks a path for a file operation: usually an existing file,
// else any name in some directory (missing, or a directory).
func (r *rnd) pickFile() string {
	if len(r.m.files) > 0 && r.pct(80) {
		return rndPick(r, r.m.sortedFiles())
	}
	return rndJoin(r.pickDir(rndMaxDepth), rndPick(r, rndNames))
}

// pickNewPath picks a path to create: a fresh name while the tree is
// small, else (mostly) an existing path.
func (r *rnd) pickNewPath(limit int, count int) string {
	if count >= limit && r.pct(85) {
		all := append(r.m.sortedFiles(), r.m.sortedDirs()[1:]...)
		return rndPick(r, all)
	}
	return rndJoin(r.pickDir(2), rndPick(r, rndNames))
}

// content returns ASCII text (valid UTF-8 whatever the offset it is
// written at), sometimes identical to other files', and now and then with
// a byte that is not UTF-8.
func (r *rnd) content(maxLen int) []byte {
	if r.pct(20) {
		return []byte(rndPick(r, rndPalette))
	}
	n := r.rng.IntN(maxLen + 1)
	if r.pct(5) {
		n = r.rng.IntN(8192) + 1
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz ABC0123456789\n"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.rng.IntN(len(alphabet))]
	}
	if n > 0 && r.pct(3) {
		// Not UTF-8: the file stays local, its upload waits until it is
		// made valid.
		b[r.rng.IntN(n)] = 0xff
	}
	return b
}
