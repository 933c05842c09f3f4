package syncqueue

import (
	"sync"
	"testing"

	"github.com/memfs/memfs/fs"
)

// recordingLocal is a local side that is not the FUSE tree itself: it
// keeps one and records what the engine loads and applies, as a second
// implementation of Local would see it.
type recordingLocal struct {
	*fs.Tree
	mu      sync.Mutex
	loaded  []fs.File
	applied []fs.Change
}

func (r *recordingLocal) Load(files []fs.File) {
	r.mu.Lock()
	r.loaded = append(r.loaded, files...)
	r.mu.Unlock()
	r.Tree.Load(files)
}

func (r *recordingLocal) Apply(changes []fs.Change) error {
	r.mu.Lock()
	r.applied = append(r.applied, changes...)
	r.mu.Unlock()
	return r.Tree.Apply(changes)
}

// appliedAt reports whether a change putting content at path was applied.
func (r *recordingLocal) appliedAt(path, content string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.applied {
		if c.Path == path && !c.Deleted && string(c.Content) == content {
			return true
		}
	}
	return false
}

// TestEngineLocalOption: the engine builds its local side with
// EngineOptions.Local, loads the listing into it, brings remote changes
// to it through Apply, and uploads what is journaled through the journal
// it was given; Tree is nil when the local side is not a FUSE tree.
func TestEngineLocalOption(t *testing.T) {
	e := mgSetup(t, map[string]string{"/a.md": "alpha\n", "/d/b.md": "beta\n"})
	var rec *recordingLocal
	var got fs.Options
	e.start(func(o *EngineOptions) {
		o.Local = func(opts fs.Options) (Local, error) {
			got = opts
			tr, err := fs.NewTree(opts)
			if err != nil {
				return nil, err
			}
			rec = &recordingLocal{Tree: tr}
			return rec, nil
		}
	})
	if rec == nil {
		t.Fatal("Open did not build the local side with EngineOptions.Local")
	}
	if e.eng.Tree() != nil {
		t.Errorf("Tree() = %p, want nil for a local side that is not an *fs.Tree", e.eng.Tree())
	}
	if got.Journal == nil || got.Fetcher == nil || got.StoreID != e.storeID || got.ReadOnly {
		t.Errorf("the local side's options: journal %v, fetcher %v, store %q, read-only %v; want a journal, a fetcher, %q, writable",
			got.Journal != nil, got.Fetcher != nil, got.StoreID, got.ReadOnly, e.storeID)
	}
	rec.mu.Lock()
	paths := map[string]bool{}
	for _, f := range rec.loaded {
		paths[f.Path] = f.Lazy
	}
	rec.mu.Unlock()
	if len(paths) != 2 || !paths["/a.md"] || !paths["/d/b.md"] {
		t.Errorf("loaded %v, want /a.md and /d/b.md, lazy", paths)
	}

	e.tree = rec.Tree // the helpers make local changes through the tree
	e.waitContent()
	e.remotePut("/a.md", "alpha from elsewhere\n")
	eventually(t, "the remote change applied to the local side", func() bool {
		return rec.appliedAt("/a.md", "alpha from elsewhere\n")
	})
	e.mustWrite("/d/b.md", "beta, edited here\n")
	if res := e.sync(false, false); res.Uploaded != 1 {
		t.Errorf("pass uploaded %d, want 1 (%+v)", res.Uploaded, res)
	}
	if got := e.storeContents()["/d/b.md"]; got != "beta, edited here\n" {
		t.Errorf("the store holds %q at /d/b.md, want the local edit", got)
	}
}
