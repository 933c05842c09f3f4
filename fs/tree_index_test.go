package fs

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

// fetcherFunc is a Fetcher made of a function.
type fetcherFunc func(fileID string) error

func (f fetcherFunc) Fetch(fileID string) error { return f(fileID) }

// TestTreeFileIDIndexModel runs random sequences of remote changes (put,
// move, replace, delete, a change continuing another file through
// Origin), local operations (create and close, rename of files and
// directories, unlink, rmdir, CommitFile) and lazy fills over a small set
// of paths, and checks after every step that the index by file id holds
// every linked file under its id and nothing else (checkFileIDIndex).
func TestTreeFileIDIndexModel(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runIndexModel(t, seed, 300) })
	}
}

func runIndexModel(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	var tr *Tree
	tr, _ = newTestTree(t, Options{Fetcher: fetcherFunc(func(id string) error {
		tr.Fill(id, []byte("fetched "+id))
		return nil
	})})
	paths := []string{"/x", "/y", "/a/x", "/a/y", "/b/x", "/a/c/x", "/a/c/y", "/a", "/b", "/a/c"}
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	var files []File
	for i := 0; i < 4; i++ {
		files = append(files, File{FileID: fmt.Sprintf("m%d", i), Path: paths[i+2], Content: []byte("v0"),
			Lazy: i%2 == 0, Size: int64(len("fetched m") + 1)})
	}
	tr.Load(files)
	nextID := 10
	ids := func() []string { // the ids in the tree now, and some that are not
		tr.mu.Lock()
		defer tr.mu.Unlock()
		out := []string{"m0", "m1", "m7", "local-none"}
		for _, n := range tr.byIno {
			if !n.dir && !n.marker && n.parent != nil {
				out = append(out, n.fileID)
			}
		}
		sort.Strings(out)
		return out
	}
	for step := 0; step < steps; step++ {
		var did string
		switch op := rng.Intn(10); op {
		case 0, 1: // a remote put: new file, update, move or replacement
			c := Change{FileID: pick(ids()), Path: pick(paths), Content: []byte(fmt.Sprintf("r%d", step))}
			if rng.Intn(3) == 0 {
				c.FileID = fmt.Sprintf("m%d", nextID)
				nextID++
			}
			did = fmt.Sprintf("apply %+v", c)
			_ = tr.Apply([]Change{c}) // an impossible change is skipped
		case 2: // a remote change continuing another file (Origin)
			c := Change{FileID: fmt.Sprintf("m%d", nextID), Origin: pick(ids()), Path: pick(paths), Content: []byte("o")}
			nextID++
			did = fmt.Sprintf("apply %+v", c)
			_ = tr.Apply([]Change{c})
		case 3: // a remote delete
			id := pick(ids())
			did = "apply delete " + id
			_ = tr.Apply([]Change{{FileID: id, Deleted: true}})
		case 4: // a local create, write and close
			p := pick(paths)
			did = "create " + p
			if dir, name, ok := modelParent(tr, p, true); ok {
				if a, err := tr.Create(dir, name, 0o644, testOwner); err == nil {
					if tr.Open(a.Ino, true, false) == nil {
						_, _ = tr.Write(a.Ino, []byte("local"), 0)
						_ = tr.Commit(a.Ino)
						tr.Release(a.Ino)
					}
				}
			}
		case 5, 6: // a local rename, of a file or a directory
			from, to := pick(paths), pick(paths)
			did = "rename " + from + " " + to
			od, on, ok1 := modelParent(tr, from, false)
			nd, nn, ok2 := modelParent(tr, to, true)
			if ok1 && ok2 {
				_ = tr.Rename(od, on, nd, nn, uint32(rng.Intn(2)))
			}
		case 7: // a local unlink or rmdir
			p := pick(paths)
			did = "remove " + p
			if d, name, ok := modelParent(tr, p, false); ok {
				if rng.Intn(2) == 0 {
					_ = tr.Unlink(d, name)
				} else {
					_ = tr.Rmdir(d, name)
				}
			}
		case 8: // the engine commits a file before a merge
			id := pick(ids())
			did = "commit " + id
			_ = tr.CommitFile(id)
		case 9: // a lazy file's content arrives
			tr.mu.Lock()
			var lazy []string
			for id := range tr.lazy {
				lazy = append(lazy, id)
			}
			tr.mu.Unlock()
			sort.Strings(lazy)
			if len(lazy) > 0 {
				id := pick(lazy)
				did = "fill " + id
				tr.Fill(id, []byte("fetched "+id))
			}
		}
		tr.mu.Lock()
		checkFileIDIndex(t, tr)
		tr.mu.Unlock()
		if t.Failed() {
			t.Fatalf("seed %d, step %d: after %s", seed, step, did)
		}
	}
}

// modelParent resolves the directory of p (made when mkdir) and its last
// name, without failing the test: ok is false when it can't be resolved.
func modelParent(tr *Tree, p string, mkdir bool) (dir uint64, name string, ok bool) {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	dir = RootIno
	for _, s := range segs[:len(segs)-1] {
		a, err := tr.Lookup(dir, s)
		if err != nil && mkdir {
			a, err = tr.Mkdir(dir, s, 0o755, testOwner)
		}
		if err != nil || !a.Dir {
			return 0, "", false
		}
		dir = a.Ino
	}
	return dir, segs[len(segs)-1], true
}
