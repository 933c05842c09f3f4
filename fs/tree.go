package fs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// Attr describes a node for the kernel.
type Attr struct {
	Ino   uint64
	Dir   bool
	Size  int64
	Mode  uint32 // permission bits only
	UID   uint32
	GID   uint32
	Mtime time.Time
	Atime time.Time
	Ctime time.Time
	Nlink uint32
}

// Options configure a Tree.
type Options struct {
	// StoreID is written into the marker file.
	StoreID string
	// ReadOnly refuses every change with ErrReadOnly.
	ReadOnly bool
	// Journal receives local changes (required unless ReadOnly).
	Journal Journal
	// MaxFiles caps the files of the tree (default store.MaxMemoriesLimit,
	// the highest cap a store can have: the mount does not know its store's
	// own cap, which the store enforces at upload, where a refused file
	// waits in the journal; a lower default would refuse every create in a
	// store larger than it).
	MaxFiles int
	// Owner owns the entries loaded from the store and the root, with
	// its modes (default: root, 0644 and 0755).
	Owner Ownership
	// Log receives warnings (default: logrus's standard logger).
	Log logrus.FieldLogger
	// Fetcher brings the content of files loaded Lazy (required when any is).
	Fetcher Fetcher
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if !o.ReadOnly && o.Journal == nil {
		return errors.New("fs: a writable tree needs a Journal")
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = store.MaxMemoriesLimit
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	return o.Owner.Validate()
}

// node is a file or directory of the tree. Every field is GUARDED_BY(Tree.mu).
type node struct {
	ino      uint64
	fileID   string // files: identity in the journal
	parent   *node  // nil for the root and for unlinked nodes
	name     string
	dir      bool
	children map[string]*node // directories; changed only by link and unlink
	subdirs  int              // directories: children that are directories (Nlink in O(1))
	marker   bool             // the read-only marker file
	content  []byte           // files
	shared   bool             // content is shared (Load, Fill, Apply): copied before any change, never written in place
	dirty    bool             // content changed since it was last journaled
	edits    uint64           // counts local changes of content (write, setSize): tells a journal write whether its snapshot is still current
	lazy     bool             // content not fetched yet (tree_lazy.go)
	lazySize int64            // the store's size of a lazy file
	mode     uint32
	uid, gid uint32
	mtime    time.Time
	atime    time.Time
	ctime    time.Time
	opens    int  // open file handles; an unlinked node lives while > 0
	tooLarge bool // warned that it was asked to grow past a memory's limit
}

// Tree is the local state of one mounted store: directories and files with
// their content, in memory. The FUSE nodes serve it; the sync engine
// loads it and (later) applies remote changes to it.
//
// Locking: two mutexes, taken in this order: jmu, then mu.
//
// mu guards every node and every field marked GUARDED_BY(mu). Methods
// hold it for their in-memory work only: never across the journal's
// write(2), never into the kernel (invalidations are queued and sent by
// the notifier goroutine, notify.go), never while fetching content.
//
// jmu is the journal's turn. Every operation that writes to the journal
// (close, unlink, rename, truncate by path, CommitFile,
// RetryUnjournaled) or changes which file is where (create, mkdir,
// rmdir, Load, Apply, Freeze) holds it from its decision to its last
// in-memory update; it gives up mu only for the journal write itself
// (appendUnlocked). So:
//
//   - records reach the journal in the order the tree decided them, and
//     two records for the same file are never reordered: both writers
//     hold jmu, one after the other;
//   - a close, unlink or rename still returns only once its record is
//     journaled, and an unlink or rename changes the tree only after it
//     is (a journal failure leaves the tree as it was), as before;
//   - what a writer decided on (which node is at which name, which node a
//     rename replaces) can't change while it writes: only jmu holders
//     change it;
//   - what can change meanwhile is a file's content, through a write or
//     truncate on an open handle (mu only): the writer marks the content
//     it journals shared, so the change copies it rather than writing
//     into the bytes being journaled, and compares node.edits after the
//     write: a file changed meanwhile stays dirty, for its next close.
//
// Lookups, getattr, readdir, reads and writes take only mu, and so never
// wait behind a journal write; an operation that holds jmu sees the tree
// and the journal in step. One that takes only mu (At) may see the tree
// as it was before a record being written: as it would have, had it run
// just before that operation.
type Tree struct {
	opts Options
	log  logrus.FieldLogger

	jmu     sync.Mutex // the journal's turn; taken before mu
	mu      sync.Mutex
	root    *node
	byIno   map[uint64]*node // GUARDED_BY(mu)
	byID    map[string]*node // GUARDED_BY(mu): linked files by file id (tree_index.go)
	nextIno uint64           // GUARDED_BY(mu)
	files   int              // GUARDED_BY(mu): regular files, marker excluded
	bytes   int64            // GUARDED_BY(mu)
	frozen  bool             // GUARDED_BY(mu): teardown started; refuse changes
	badUTF8 map[string]bool  // GUARDED_BY(mu): paths warned about
	// tooDeepLogged: the depth limit's ENAMETOOLONG was explained once. GUARDED_BY(mu).
	tooDeepLogged bool
	// unjournaled holds the files whose close could not be journaled (a
	// full state dir, an I/O error on the journal), with why: they keep
	// their new content, dirty, and RetryUnjournaled journals them once
	// the journal takes them. GUARDED_BY(mu).
	unjournaled map[uint64]error
	// lazy holds the files whose content is not fetched yet, by file id.
	// GUARDED_BY(mu).
	lazy map[string]*node

	// notify is set once mounted: changes applied by the sync engine queue
	// kernel invalidations there (see notify.go). GUARDED_BY(mu).
	notify *notifier
}

// lockJournal takes the journal's turn, then the tree's lock: for an
// operation that journals, or changes which file is where.
func (t *Tree) lockJournal() {
	t.jmu.Lock()
	t.mu.Lock()
}

func (t *Tree) unlockJournal() {
	t.mu.Unlock()
	t.jmu.Unlock()
}

// appendUnlocked appends states to the journal with mu given up for the
// write and taken again after it. The caller holds jmu: what it decided
// on is as it left it, but for file contents changed meanwhile (see Tree).
//
// REQUIRES: t.jmu and t.mu held.
func (t *Tree) appendUnlocked(states ...FileState) error {
	t.mu.Unlock()
	defer t.mu.Lock()
	return t.opts.Journal.Append(states...)
}

// appendSharedUnlocked is appendUnlocked through a SharingJournal.
//
// REQUIRES: t.jmu and t.mu held.
func (t *Tree) appendSharedUnlocked(sj SharingJournal, states ...FileState) ([][]byte, error) {
	t.mu.Unlock()
	defer t.mu.Lock()
	return sj.AppendShared(states...)
}

// invalidate queues an invalidation when the tree is mounted.
func (t *Tree) invalidate(path string, content bool) {
	if t.notify != nil {
		t.notify.push(invalidation{path: path, content: content})
	}
}

// RootIno is the inode number of the mount's root.
const RootIno = 1

// NewTree returns an empty tree holding only the marker file.
func NewTree(opts Options) (*Tree, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	now := time.Now()
	t := &Tree{opts: opts, log: opts.Log, byIno: map[uint64]*node{}, byID: map[string]*node{}, nextIno: RootIno, badUTF8: map[string]bool{}, unjournaled: map[uint64]error{}, lazy: map[string]*node{}}
	t.root = t.newNode(nil, "", true, opts.Owner.dirMode(), now)
	m := t.newNode(t.root, MarkerName, false, 0o444, now)
	m.marker = true
	m.content = MarkerContent(opts.StoreID)
	return t, nil
}

// newNode links a new node under parent (nil: unlinked/root).
func (t *Tree) newNode(parent *node, name string, dir bool, mode uint32, now time.Time) *node {
	n := &node{ino: t.nextIno, parent: parent, name: name, dir: dir, mode: mode,
		uid: t.opts.Owner.UID, gid: t.opts.Owner.GID, mtime: now, atime: now, ctime: now}
	t.nextIno++
	if dir {
		n.children = map[string]*node{}
	}
	t.byIno[n.ino] = n
	if parent != nil {
		parent.link(name, n)
		parent.mtime, parent.ctime = now, now
	}
	return n
}

// Load fills the tree with the store's memories (at mount, before the
// kernel sees anything). A memory at the marker's path, or one whose path
// collides with another as file and directory, is skipped with a warning.
func (t *Tree) Load(files []File) {
	t.lockJournal()
	defer t.unlockJournal()
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if err := t.loadOne(f); err != nil {
			t.log.WithFields(logrus.Fields{"path": f.Path, "store": t.opts.StoreID}).WithError(err).Warn("memory skipped: the mount can't show it")
		}
	}
}

func (t *Tree) loadOne(f File) error {
	if f.Path == "/"+MarkerName {
		return errors.New("its path is the marker file's")
	}
	if store.ValidatePath(f.Path) != nil {
		return errors.New("its path is not a valid memory path")
	}
	segs := strings.Split(f.Path[1:], "/")
	dir := t.root
	mtime := f.Mtime
	if mtime.IsZero() {
		mtime = time.Now()
	}
	for _, s := range segs[:len(segs)-1] {
		if len(s) > MaxNameBytes {
			return ErrNameTooLong
		}
		c, ok := dir.children[s]
		if !ok {
			c = t.newNode(dir, s, true, t.opts.Owner.dirMode(), mtime)
		} else if !c.dir {
			return errors.New("a parent of it is a file")
		}
		dir = c
	}
	name := segs[len(segs)-1]
	if len(name) > MaxNameBytes {
		return ErrNameTooLong
	}
	if _, ok := dir.children[name]; ok {
		return errors.New("its path is taken")
	}
	if f.Lazy && t.opts.Fetcher == nil {
		return errors.New("it has no content and the tree no fetcher")
	}
	n := t.newNode(dir, name, false, t.opts.Owner.fileMode(), mtime)
	n.fileID, n.content, n.shared = f.FileID, f.Content, true
	t.indexFile(n)
	if f.Lazy {
		n.lazy, n.lazySize, n.content = true, f.Size, nil
		t.lazy[f.FileID] = n
	}
	t.files++
	t.bytes += n.size()
	return nil
}

// path is n's store path ("/a/b"); "" for an unlinked node.
func (n *node) path() string {
	if n.parent == nil {
		if n.name == "" {
			return "/"
		}
		return ""
	}
	var segs []string
	for c := n; c.parent != nil; c = c.parent {
		segs = append(segs, c.name)
	}
	var b strings.Builder
	for i := len(segs) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(segs[i])
	}
	return b.String()
}

func (n *node) attr() Attr {
	a := Attr{Ino: n.ino, Dir: n.dir, Size: n.size(), Mode: n.mode, UID: n.uid, GID: n.gid,
		Mtime: n.mtime, Atime: n.atime, Ctime: n.ctime, Nlink: 1}
	if n.dir {
		// 2 + one ".." in each subdirectory, as find and ls expect;
		// counted as children come and go, since the kernel asks for a
		// directory's attributes after every create in it
		// (default_permissions), and counting them then made each create
		// cost the size of its directory.
		a.Size = 4096
		a.Nlink = 2 + uint32(n.subdirs)
	}
	if n.parent == nil && n.name != "" {
		a.Nlink = 0 // unlinked, still open: fstat says so (NlinkZero, FstatDeleted)
	}
	return a
}

// link makes c the child name of directory d, replacing any child of
// that name, and keeps d's count of subdirectories.
func (d *node) link(name string, c *node) {
	d.unlink(name)
	d.children[name] = c
	if c.dir {
		d.subdirs++
	}
}

// unlink removes the child name of directory d, if any.
func (d *node) unlink(name string) {
	if c, ok := d.children[name]; ok {
		if c.dir {
			d.subdirs--
		}
		delete(d.children, name)
	}
}

// get returns the live node with ino.
func (t *Tree) get(ino uint64) (*node, error) {
	n, ok := t.byIno[ino]
	if !ok {
		return nil, ErrNotExist
	}
	return n, nil
}

func (t *Tree) dirNode(ino uint64) (*node, error) {
	n, err := t.get(ino)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, ErrNotDir
	}
	return n, nil
}

// writable refuses changes on a read-only or frozen tree.
func (t *Tree) writable() error {
	if t.opts.ReadOnly || t.frozen {
		return ErrReadOnly
	}
	return nil
}

// Freeze starts teardown: from now on every change (opens for writing,
// creates, renames, deletes, mkdir) fails with EROFS. Writes through
// handles already open still land and are journaled at close.
func (t *Tree) Freeze() {
	t.lockJournal()
	defer t.unlockJournal()
	t.frozen = true
}

// NewFileID is a new local file's id, until the store names it.
func NewFileID() string { return newFileID() }

func newFileID() string {
	var b [10]byte
	rand.Read(b[:])
	return "local-" + hex.EncodeToString(b[:])
}

// validUTF8 reports whether content may be uploaded, warning once per path
// when it may not.
func (t *Tree) checkUTF8(n *node, p string) error {
	if utf8.Valid(n.content) {
		delete(t.badUTF8, p)
		return nil
	}
	if !t.badUTF8[p] {
		t.badUTF8[p] = true
		t.log.WithFields(logrus.Fields{"store": t.opts.StoreID, "path": p}).Warn("file content is not valid UTF-8: kept locally, not uploaded until it is")
	}
	return ErrNotUTF8
}
