package fs

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	logtest "github.com/sirupsen/logrus/hooks/test"
)

// journalOp is one call the tree made to its Journal.
type journalOp struct {
	Op      string // "put", "delete" or "sync"
	FileID  string
	Path    string
	Content string
}

func (o journalOp) String() string {
	switch o.Op {
	case "put":
		return fmt.Sprintf("putOp(%s, %s, %q)", o.FileID, o.Path, o.Content)
	case "delete":
		return fmt.Sprintf("delete(%s, %s)", o.FileID, o.Path)
	}
	return o.Op
}

// errJournal is what a recJournal told to fail returns.
var errJournal = errors.New("journal: disk full")

// recJournal is a Journal that records every call and can be told to fail.
type recJournal struct {
	mu         sync.Mutex
	ops        []journalOp
	failPut    func(fileID, path string) error // nil: succeed
	failDelete error
	failSync   error
}

var _ Journal = (*recJournal)(nil)

// Append records the states as put and delete ops, or none of them when
// any is told to fail: like the real journal, one append is all or nothing.
func (j *recJournal) Append(states ...FileState) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var ops []journalOp
	for _, s := range states {
		if s.Deleted {
			if j.failDelete != nil {
				return j.failDelete
			}
			ops = append(ops, journalOp{Op: "delete", FileID: s.FileID, Path: s.Path})
			continue
		}
		if j.failPut != nil {
			if err := j.failPut(s.FileID, s.Path); err != nil {
				return err
			}
		}
		ops = append(ops, journalOp{"put", s.FileID, s.Path, string(s.Content)})
	}
	j.ops = append(j.ops, ops...)
	return nil
}

func (j *recJournal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failSync != nil {
		return j.failSync
	}
	j.ops = append(j.ops, journalOp{Op: "sync"})
	return nil
}

// take returns the calls recorded since the last take.
func (j *recJournal) take() []journalOp {
	j.mu.Lock()
	defer j.mu.Unlock()
	ops := j.ops
	j.ops = nil
	return ops
}

func (j *recJournal) setFailPut(f func(fileID, path string) error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failPut = f
}

func (j *recJournal) setFailDelete(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failDelete = err
}

func (j *recJournal) setFailSync(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failSync = err
}

// wantOps fails t unless the journal recorded exactly want since the last take.
func wantOps(t *testing.T, j *recJournal, want ...journalOp) {
	t.Helper()
	got := j.take()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("journal calls:\n got %v\nwant %v", got, want)
	}
}

func putOp(id, p, content string) journalOp { return journalOp{"put", id, p, content} }
func deleteOp(id, p string) journalOp       { return journalOp{Op: "delete", FileID: id, Path: p} }

const testStoreID = "memstore_01TEST"

// newTestTree returns a tree with a recording journal (unless opts is
// read-only) and a silent logger; opts.StoreID defaults to
// testStoreID. Its invariants are checked when the test ends.
func newTestTree(t *testing.T, opts Options) (*Tree, *recJournal) {
	t.Helper()
	var j *recJournal
	if !opts.ReadOnly && opts.Journal == nil {
		j = &recJournal{}
		opts.Journal = j
	}
	if opts.StoreID == "" {
		opts.StoreID = testStoreID
	}
	if opts.Log == nil {
		l, _ := logtest.NewNullLogger()
		opts.Log = l
	}
	tr, err := NewTree(opts)
	if err != nil {
		t.Fatalf("NewTree: %v", err)
	}
	t.Cleanup(func() { checkTree(t, tr) })
	return tr, j
}

// checkTree verifies the tree's bookkeeping against its nodes: every
// reachable node is indexed by its inode number with the right parent,
// every reachable file by its file id and the file-id index holds nothing
// else, the file and byte counts match, and only open unlinked files
// linger.
func checkTree(t *testing.T, tr *Tree) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	checkFileIDIndex(t, tr)
	reach := map[uint64]bool{}
	var files int
	var bytes int64
	var walk func(n *node)
	walk = func(n *node) {
		reach[n.ino] = true
		if tr.byIno[n.ino] != n {
			t.Errorf("tree: %s (ino %d) is not indexed", n.path(), n.ino)
		}
		if !n.dir {
			if !n.marker {
				files++
				bytes += n.size()
			}
			return
		}
		subdirs := 0
		for name, c := range n.children {
			if c.parent != n || c.name != name {
				t.Errorf("tree: %s/%s has parent %v name %q", n.path(), name, c.parent != nil, c.name)
			}
			if c.dir {
				subdirs++
			}
			walk(c)
		}
		if n.subdirs != subdirs {
			t.Errorf("tree: %s counts %d subdirectories, holds %d", n.path(), n.subdirs, subdirs)
		}
	}
	walk(tr.root)
	if files != tr.files || bytes != tr.bytes {
		t.Errorf("tree: counts files=%d bytes=%d, but it holds %d files of %d bytes", tr.files, tr.bytes, files, bytes)
	}
	for ino, n := range tr.byIno {
		if !reach[ino] && (n.parent != nil || n.opens <= 0) {
			t.Errorf("tree: ino %d (%q, parent %v, opens %d) is indexed but unreachable", ino, n.name, n.parent != nil, n.opens)
		}
	}
}

// checkFileIDIndex verifies the index by file id (tree_index.go): every
// file reachable from the root (the marker aside) is found by its file id,
// and the index holds nothing else. tr.mu is held.
func checkFileIDIndex(t *testing.T, tr *Tree) {
	t.Helper()
	want := map[string]*node{}
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children {
			switch {
			case c.dir:
				walk(c)
			case c.marker:
			case want[c.fileID] != nil:
				t.Errorf("index: %s and %s have the same file id %q", want[c.fileID].path(), c.path(), c.fileID)
			default:
				want[c.fileID] = c
			}
		}
	}
	walk(tr.root)
	for id, n := range want {
		if got := tr.byFileID(id); got != n {
			t.Errorf("index: file %s (id %q) is not found by its id (found %v)", n.path(), id, got != nil)
		}
	}
	for id, n := range tr.byID {
		if want[id] != n {
			t.Errorf("index: holds %q for a node that is not a linked file with that id (%q, parent %v, id %q)", id, n.name, n.parent != nil, n.fileID)
		}
	}
}

// treeSnapshot lists the tree: path → content, "/" suffix for directories.
func treeSnapshot(tr *Tree) map[string]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string]string{}
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children {
			if c.dir {
				out[c.path()+"/"] = ""
				walk(c)
			} else {
				out[c.path()] = string(c.content)
			}
		}
	}
	walk(tr.root)
	return out
}

// wantTree fails t unless the tree holds exactly want (as from treeSnapshot;
// the marker file is always expected and need not be listed).
func wantTree(t *testing.T, tr *Tree, want map[string]string) {
	t.Helper()
	w := map[string]string{"/" + MarkerName: "version 1\n" + tr.opts.StoreID}
	for k, v := range want {
		w[k] = v
	}
	got := treeSnapshot(tr)
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("tree:\n got %q\nwant %q", got, w)
	}
}

// inoOf resolves a store path to its inode number.
func inoOf(t *testing.T, tr *Tree, p string) uint64 {
	t.Helper()
	ino := uint64(RootIno)
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s == "" {
			continue
		}
		a, err := tr.Lookup(ino, s)
		if err != nil {
			t.Fatalf("lookup %s: segment %q: %v", p, s, err)
		}
		ino = a.Ino
	}
	return ino
}

// parentAndName splits p and resolves its parent.
func parentAndName(t *testing.T, tr *Tree, p string) (uint64, string) {
	t.Helper()
	i := strings.LastIndex(p, "/")
	return inoOf(t, tr, p[:i]), p[i+1:]
}

// treeMkdirAll makes every directory of p (which is a directory path).
func treeMkdirAll(t *testing.T, tr *Tree, p string) uint64 {
	t.Helper()
	ino := uint64(RootIno)
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s == "" {
			continue
		}
		a, err := tr.Lookup(ino, s)
		if errors.Is(err, ErrNotExist) {
			a, err = tr.Mkdir(ino, s, 0o755, testOwner)
		}
		if err != nil {
			t.Fatalf("mkdir %s: segment %q: %v", p, s, err)
		}
		ino = a.Ino
	}
	return ino
}

// treeWriteFile creates p (and its directories) like open(O_CREAT|O_TRUNC),
// write, close would, and returns its inode number.
func treeWriteFile(t *testing.T, tr *Tree, p, content string) uint64 {
	t.Helper()
	i := strings.LastIndex(p, "/")
	dir := treeMkdirAll(t, tr, p[:i])
	a, err := tr.Lookup(dir, p[i+1:])
	if errors.Is(err, ErrNotExist) {
		a, err = tr.Create(dir, p[i+1:], 0o644, testOwner)
	}
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	if err := tr.Open(a.Ino, true, true); err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer tr.Release(a.Ino)
	if _, err := tr.Write(a.Ino, []byte(content), 0); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	if err := tr.Commit(a.Ino); err != nil && (utf8.ValidString(content) || !errors.Is(err, ErrNotUTF8)) {
		t.Fatalf("close %s: %v", p, err)
	}
	return a.Ino
}

// treeFileID returns the journal identity of the file at p.
func treeFileID(t *testing.T, tr *Tree, p string) string {
	t.Helper()
	ino := inoOf(t, tr, p)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.byIno[ino].fileID
}

// treeRead reads a file's whole content through Tree.Read.
func treeRead(t *testing.T, tr *Tree, ino uint64) string {
	t.Helper()
	buf := make([]byte, 200<<10)
	n, err := tr.Read(ino, buf, 0)
	if err != nil {
		t.Fatalf("read ino %d: %v", ino, err)
	}
	return string(buf[:n])
}

// testOwner is the caller of the tree operations the unit tests make.
var testOwner = Owner{UID: 1000, GID: 1000}
