package dirmode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
)

// Options configure a Dir beyond the fs.Options the engine gives it.
type Options struct {
	// Dir is the store's folder (it exists: Prepare made or accepted it).
	Dir string
	// StateDir keeps the baseline (required unless read-only).
	StateDir string
	// Rescan is how often the whole folder is looked at even without an
	// event (default 15 s, the sync interval).
	Rescan time.Duration
	// Settle is how long a change found without a close (a rescan, not an
	// inotify close) must have lasted before it is taken (default 500 ms):
	// a file still being written waits for the next look.
	Settle time.Duration
}

// Dir is the store as a plain folder on disk: a syncqueue.Local. One mutex
// guards its entries and every write it makes to the folder; a look (a
// walk of the folder and what it found changed) runs under it too, so a
// remote change and a local one are never decided on at once.
type Dir struct {
	opts Options
	fo   fs.Options
	log  logrus.FieldLogger
	bpth string // the baseline's path; "" when read-only without a state dir

	mu          sync.Mutex
	root        int // GUARDED_BY(mu): the folder, opened at New (re-opened if it is removed)
	rootDev     uint64
	rootIno     uint64
	byPath      map[string]*entry // GUARDED_BY(mu)
	byID        map[string]*entry // GUARDED_BY(mu)
	nlazy       int               // GUARDED_BY(mu)
	baseline    map[string]rec    // GUARDED_BY(mu): the records read at New, until Begin
	started     bool              // GUARDED_BY(mu): Begin ran: Apply writes to the folder
	frozen      bool              // GUARDED_BY(mu)
	skipped     map[string]string // GUARDED_BY(mu): never uploaded, by path
	unjournaled map[string]error  // GUARDED_BY(mu): changes the journal could not take (or too large)
	dirty       bool              // GUARDED_BY(mu): entries changed since the baseline was saved
	restore     map[string]bool   // GUARDED_BY(mu): read-only: file ids to fetch again
	stats       Stats             // GUARDED_BY(mu)
	warned      map[string]bool   // GUARDED_BY(mu): one warning per kind
	looks       uint64            // GUARDED_BY(mu): the looks made, numbering each (disk.gen)

	events *watcher
	stop   chan struct{}
	done   chan struct{}
	wake   chan struct{} // a look is asked for (an event, Look)
}

// Stats is what memfs status shows of a directory mount.
type Stats struct {
	Looks         int       `json:"looks"`
	LastLook      time.Time `json:"last_look,omitzero"`
	LastLookMs    float64   `json:"last_look_ms"`
	Overflows     int       `json:"watch_overflows"`
	Restored      int       `json:"read_only_restored"`
	Redownloads   int       `json:"redownloads"`
	MarkerProblem string    `json:"marker_problem,omitempty"`
	Watching      bool      `json:"watching"`
}

// New opens the folder opts.Dir as the local side of a store (a
// syncqueue.NewLocal, with the fs.Options the engine gives it).
func New(opts Options) func(fs.Options) (*Dir, error) {
	return func(fo fs.Options) (*Dir, error) { return open(opts, fo) }
}

func open(opts Options, fo fs.Options) (*Dir, error) {
	if err := fo.Validate(); err != nil {
		return nil, err
	}
	if opts.Rescan <= 0 {
		opts.Rescan = 15 * time.Second
	}
	if opts.Settle <= 0 {
		opts.Settle = 500 * time.Millisecond
	}
	real, err := filepath.EvalSymlinks(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("the store's folder %s: %w", opts.Dir, err)
	}
	opts.Dir = real
	d := &Dir{opts: opts, fo: fo, log: fo.Log.WithField("path", real), root: -1,
		byPath: map[string]*entry{}, byID: map[string]*entry{}, skipped: map[string]string{},
		unjournaled: map[string]error{}, restore: map[string]bool{}, warned: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := d.openRoot(); err != nil {
		return nil, err
	}
	if opts.StateDir != "" {
		d.bpth = BaselinePath(opts.StateDir, fo.StoreID)
		d.readBaseline()
	}
	return d, nil
}

// openRoot opens the folder and notes which it is.
func (d *Dir) openRoot() error {
	fd, err := unix.Open(d.opts.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the store's folder %s: %w", d.opts.Dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	if d.root >= 0 {
		unix.Close(d.root)
	}
	d.root, d.rootDev, d.rootIno = fd, uint64(st.Dev), st.Ino
	return nil
}

// readBaseline takes the records of the last run, if they are of this
// folder.
func (d *Dir) readBaseline() {
	d.baseline = map[string]rec{}
	bl, err := loadBaseline(d.bpth)
	switch {
	case errors.Is(err, errNoBaseline):
		return
	case err != nil:
		d.log.WithError(err).Error("the directory baseline can't be used: every file that differs from the store is kept in the conflict log and takes the store's version")
		return
	case bl.Store != d.fo.StoreID || bl.DirDev != d.rootDev || bl.DirIno != d.rootIno:
		return // another folder's (or another store's): not this one's history
	}
	for _, r := range bl.Files {
		d.baseline[r.Path] = r
	}
}

// Load records the store's memories; every one waits for its content
// (Fill), unless the folder holds it as recorded (found at Begin).
func (d *Dir) Load(files []fs.File) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range files {
		if f.Path == "/"+fs.MarkerName {
			d.log.WithField("memory_path", f.Path).Warn("a memory at the marker file's path is not shown")
			continue
		}
		if _, taken := d.byPath[f.Path]; taken {
			continue
		}
		e := &entry{fileID: f.FileID, path: f.Path, sha: f.SHA, lazy: true}
		if r, ok := d.baseline[f.Path]; ok {
			e.rec = &r
		}
		d.add(e)
	}
}

// add indexes e. REQUIRES: d.mu held.
func (d *Dir) add(e *entry) {
	d.byPath[e.path], d.byID[e.fileID] = e, e
	if e.lazy {
		d.nlazy++
	}
}

// drop forgets e. REQUIRES: d.mu held.
func (d *Dir) drop(e *entry) {
	if d.byPath[e.path] == e {
		delete(d.byPath, e.path)
	}
	if d.byID[e.fileID] == e {
		delete(d.byID, e.fileID)
	}
	d.setLazy(e, false)
	d.dirty = true
}

// setLazy marks e waiting for content or not. REQUIRES: d.mu held.
func (d *Dir) setLazy(e *entry, lazy bool) {
	if e.lazy != lazy {
		if lazy {
			d.nlazy++
		} else {
			d.nlazy--
		}
		e.lazy = lazy
	}
}

// moveTo puts e at path p. REQUIRES: d.mu held.
func (d *Dir) moveTo(e *entry, p string) {
	if d.byPath[e.path] == e {
		delete(d.byPath, e.path)
	}
	e.path = p
	d.byPath[p] = e
	d.dirty = true
}

// At reports what stands at a store path: a file the engine knows, or a
// folder on disk. A regular file there that no look took yet (made since
// the last one) is taken first, so that a remote change at its path is
// merged with it as with any local change, instead of failing to replace
// it.
func (d *Dir) At(p string) (fileID string, isDir, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.byPath[p]; e != nil {
		return e.fileID, false, true
	}
	if p == "/" {
		return "", true, true
	}
	dir, name := parentOf(p)
	fd, err := openDir(d.root, dir)
	if err != nil {
		return "", false, false
	}
	defer unix.Close(fd)
	st, err := lstatAt(fd, name)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "", true, true
	}
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && d.started && !d.frozen && !d.fo.ReadOnly {
		d.lookLocked(true)
		if e := d.byPath[p]; e != nil {
			return e.fileID, false, true
		}
	}
	return "", false, false
}

// FileCount is the number of the store's files the folder holds.
func (d *Dir) FileCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byPath)
}

// Lazy lists the files still waiting for their content.
func (d *Dir) Lazy() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id, e := range d.byID {
		if e.lazy {
			out = append(out, id)
		}
	}
	return out
}

// LazyCount is how many files wait for their content: the mount is ready
// when none does.
func (d *Dir) LazyCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nlazy
}

// Unjournaled lists what the folder holds that is not uploaded: changes
// the journal could not take, files too large, and what is never
// uploaded (an *fs.Skipped: links, FIFOs, names no memory can have).
func (d *Dir) Unjournaled() map[string]error {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]error, len(d.unjournaled)+len(d.skipped))
	for p, why := range d.skipped {
		out[p] = &fs.Skipped{Reason: why}
	}
	for p, err := range d.unjournaled {
		out[p] = err
	}
	return out
}

// RetryUnjournaled looks at the folder again when a change could not be
// journaled, and reports how many still can't be.
func (d *Dir) RetryUnjournaled() (left int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	waiting := 0
	for _, e := range d.unjournaled {
		if !isSkipped(e) {
			waiting++
		}
	}
	if waiting == 0 || !d.started {
		return 0, nil
	}
	d.lookLocked(true)
	for _, e := range d.unjournaled {
		if !isSkipped(e) {
			left, err = left+1, e
		}
	}
	return left, err
}

// Stats is what the folder's watch and looks have done.
func (d *Dir) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Watching = d.events != nil
	return s
}

// Path is the folder (symbolic links resolved).
func (d *Dir) Path() string { return d.opts.Dir }

// warnOnce logs msg once per key. REQUIRES: d.mu held.
func (d *Dir) warnOnce(key string, log logrus.FieldLogger, msg string) {
	if d.warned[key] {
		return
	}
	d.warned[key] = true
	log.Warn(msg)
}

func isSkipped(err error) bool {
	var s *fs.Skipped
	return errors.As(err, &s)
}

// errTooLarge is why a file over a memory's limit is not uploaded.
func errTooLarge(size int64) error {
	return &fs.Skipped{Reason: fmt.Sprintf("larger than a memory may be (%d bytes, at most 102,400): not uploaded until it is smaller", size)}
}

// Prepare makes sure dir can be the folder of storeID: created (0700) when
// missing, an empty directory accepted, and a directory that is not empty
// accepted only when it is this state dir's copy of the store (its marker
// names the store and the state dir holds its baseline) — a kill -9
// leaves one behind, and the next start takes it up. Anything else is
// refused and left as found. It reports whether it created dir.
func Prepare(dir, storeID, stateDir string) (created bool, err error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return false, fmt.Errorf("create the store's folder %s: %w", dir, err)
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		if fi, err = os.Stat(dir); err != nil {
			return false, fmt.Errorf("the store's folder %s is a symbolic link to nothing: %w", dir, err)
		}
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("something already exists at %s and it is not a directory; remove it or pick another path", dir)
	}
	names, err := readNames(dir)
	if err != nil {
		return false, err
	}
	if len(names) == 0 {
		return false, nil
	}
	return false, TakeUp(dir, storeID, stateDir)
}

// TakeUp checks that the folder dir, not empty, is this state dir's copy
// of storeID: its marker names the store and stateDir holds a baseline
// made of it.
func TakeUp(dir, storeID, stateDir string) error {
	refuse := func(why string) error {
		return fmt.Errorf("the folder %s is not empty and %s; memfs uses only an empty folder or its own copy of the store (a previous run's, with its marker and this state dir's baseline)", dir, why)
	}
	m, err := os.ReadFile(filepath.Join(dir, fs.MarkerName))
	if err != nil || string(m) != string(fs.MarkerContent(storeID)) {
		return refuse("holds no marker file of store " + storeID)
	}
	if stateDir == "" {
		return refuse("there is no state dir to hold its baseline")
	}
	b, err := os.ReadFile(BaselinePath(stateDir, storeID))
	if err != nil {
		return refuse(fmt.Sprintf("the state dir %s has no baseline of it (%v)", stateDir, err))
	}
	bl, err := decodeBaseline(b)
	if err != nil {
		return nil // ours by its marker; the damage is logged at the mount, and differing files are conflicts
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	if bl.DirDev != uint64(st.Dev) || bl.DirIno != st.Ino {
		return refuse(fmt.Sprintf("the state dir's baseline is of another folder (%s)", bl.Dir))
	}
	return nil
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return names, err
}

// Left is a folder a previous run left (a kill -9, a power loss): the
// state dir holds its baseline, and the folder its marker.
type Left struct {
	StoreID string
	Dir     string
}

// LeftFolders lists the folders stateDir holds baselines of that still
// exist with their store's marker: a start (memfs replay, a worker's)
// takes up what changed in them while no worker ran.
func LeftFolders(stateDir string) []Left {
	ents, _ := os.ReadDir(filepath.Join(stateDir, "directories"))
	var out []Left
	for _, e := range ents {
		b, err := os.ReadFile(BaselinePath(stateDir, e.Name()))
		if err != nil {
			continue
		}
		bl, err := decodeBaseline(b)
		if err != nil || bl.Store != e.Name() || TakeUp(bl.Dir, bl.Store, stateDir) != nil {
			continue
		}
		out = append(out, Left{StoreID: bl.Store, Dir: bl.Dir})
	}
	return out
}

// LeftFolder is the folder of storeID a previous run left, if any.
func LeftFolder(stateDir, storeID string) (string, bool) {
	for _, l := range LeftFolders(stateDir) {
		if l.StoreID == storeID {
			return l.Dir, true
		}
	}
	return "", false
}
