package dirmode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
)

var _ syncqueue.Local = (*Dir)(nil)

// recJournal records what a Dir journals, with the base each change was
// made against (AppendAgainst).
type recJournal struct {
	mu    sync.Mutex
	ops   []journaled
	fail  error // set: every Append fails with it
	calls int
}

type journaled struct {
	fs.FileState
	base string
}

func (j *recJournal) Append(states ...fs.FileState) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls++
	if j.fail != nil {
		return j.fail
	}
	for _, s := range states {
		j.ops = append(j.ops, journaled{FileState: s})
	}
	return nil
}

func (j *recJournal) AppendAgainst(base string, st fs.FileState) error {
	if err := j.Append(st); err != nil {
		return err
	}
	j.mu.Lock()
	j.ops[len(j.ops)-1].base = base
	j.mu.Unlock()
	return nil
}

func (j *recJournal) Sync() error { return nil }

// take returns what was journaled since the last call.
func (j *recJournal) take() []journaled {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.ops
	j.ops = nil
	return out
}

// store is the fake store content the fetcher fills files with.
type fakeStore struct {
	d     *Dir
	mu    sync.Mutex
	files map[string]string // file id → content
}

func (s *fakeStore) Fetch(id string) error {
	s.mu.Lock()
	c, ok := s.files[id]
	s.mu.Unlock()
	if !ok {
		return errors.New("no such memory")
	}
	s.d.Fill(id, []byte(c))
	return nil
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type dirEnv struct {
	t        *testing.T
	dir      string
	state    string
	j        *recJournal
	st       *fakeStore
	d        *Dir
	readOnly bool
}

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// newDirEnv makes a folder for store "memstore_t" holding files (path →
// content), as a fresh mount would: Load, Begin, every file filled.
func newDirEnv(t *testing.T, files map[string]string) *dirEnv {
	e := &dirEnv{t: t, dir: filepath.Join(t.TempDir(), "store"), state: t.TempDir()}
	e.open(files)
	return e
}

// open opens (or reopens) the folder over the store's files.
func (e *dirEnv) open(files map[string]string) {
	t := e.t
	if _, err := Prepare(e.dir, "memstore_t", e.state); err != nil {
		t.Fatal(err)
	}
	e.j = &recJournal{}
	e.st = &fakeStore{files: map[string]string{}}
	fo := fs.Options{StoreID: "memstore_t", Journal: e.j, Fetcher: e.st, Log: quietLog(), ReadOnly: e.readOnly}
	if e.readOnly {
		fo.Journal = nil
	}
	d, err := New(Options{Dir: e.dir, StateDir: e.state, Rescan: time.Hour})(fo)
	if err != nil {
		t.Fatal(err)
	}
	e.d, e.st.d = d, d
	var fl []fs.File
	for p, c := range files {
		id := "mem_" + strings.ReplaceAll(strings.Trim(p, "/"), "/", "_")
		e.st.files[id] = c
		fl = append(fl, fs.File{FileID: id, Path: p, Lazy: true, Size: int64(len(c)), SHA: sha(c)})
	}
	d.Load(fl)
	d.Begin()
	for _, id := range d.Lazy() {
		e.st.Fetch(id)
	}
	if n := d.LazyCount(); n != 0 {
		t.Fatalf("%d files still lazy after the fill", n)
	}
	t.Cleanup(func() { d.Freeze() })
}

func (e *dirEnv) path(p string) string { return filepath.Join(e.dir, p) }

func (e *dirEnv) write(p, content string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(e.path(p)), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.path(p), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *dirEnv) read(p string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.path(p))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// summary is a journal's changes as "path=content" or "path deleted",
// sorted.
func summary(ops []journaled) []string {
	var out []string
	for _, o := range ops {
		s := o.Path + "=" + string(o.Content)
		if o.Deleted {
			s = o.Path + " deleted"
		}
		if o.base != "" {
			s += " against " + o.base[:8]
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func wantOps(t *testing.T, got []journaled, want ...string) {
	t.Helper()
	g := summary(got)
	sort.Strings(want)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("journaled:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestDirWritesTheStoreWithMarkerAndModes(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/notes/b.md": "b\n"})
	if got := e.read("/notes/b.md"); got != "b\n" {
		t.Fatalf("b.md = %q", got)
	}
	if got := e.read(fs.MarkerName); got != string(fs.MarkerContent("memstore_t")) {
		t.Fatalf("marker = %q", got)
	}
	fi, err := os.Stat(e.path("/a.md"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("a.md mode %v, %v; want 0644", fi.Mode(), err)
	}
	if fi, _ := os.Stat(e.path("/notes")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("notes mode %v, want 0755", fi.Mode())
	}
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("writing the store journaled %v", summary(ops))
	}
}

func TestDirLookTakesEditsMovesCreatesAndDeletes(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n", "/c.md": "c\n", "/d.md": "d\n"})
	e.write("/a.md", "a2\n")
	if err := os.Rename(e.path("/b.md"), e.path("/moved/b.md")); err == nil {
		t.Fatal("rename into a missing folder worked")
	}
	os.Mkdir(e.path("/moved"), 0o755)
	if err := os.Rename(e.path("/b.md"), e.path("/moved/b.md")); err != nil {
		t.Fatal(err)
	}
	os.Remove(e.path("/c.md"))
	e.write("/new.md", "new\n")
	if err := os.Rename(e.path("/new.md"), e.path("/d.md")); err != nil { // over d: d goes
		t.Fatal(err)
	}
	e.write("/e.md", "e\n")
	e.d.Look()
	wantOps(t, e.j.take(), "/a.md=a2\n", "/moved/b.md=b\n", "/c.md deleted", "/d.md=new\n", "/e.md=e\n")
	if id, _, ok := e.d.At("/moved/b.md"); !ok || id != "mem_b.md" {
		t.Fatalf("the moved file is %q, %v; want mem_b.md (a move keeps the file)", id, ok)
	}
	e.d.Look()
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("a second look journaled %v", summary(ops))
	}
}

func TestDirMoveOverAFileDeletesItInTheSameChange(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
	if err := os.Rename(e.path("/a.md"), e.path("/b.md")); err != nil {
		t.Fatal(err)
	}
	e.d.Look()
	e.j.mu.Lock()
	calls := e.j.calls
	e.j.mu.Unlock()
	wantOps(t, e.j.take(), "/b.md=a\n", "/b.md deleted")
	if calls != 1 {
		t.Fatalf("%d appends; a move and the file it replaced go in one", calls)
	}
	if id, _, _ := e.d.At("/b.md"); id != "mem_a.md" {
		t.Fatalf("/b.md is %s, want mem_a.md", id)
	}
}

func TestDirNeverUploadsLinksFIFOsHardLinksOrBadNames(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret\n"), 0o600)
	os.Symlink(outside, e.path("/link.md"))
	os.Symlink(filepath.Dir(outside), e.path("/linkdir"))
	os.Link(e.path("/a.md"), e.path("/hard.md"))
	if err := mkfifo(e.path("/fifo")); err != nil {
		t.Fatal(err)
	}
	e.write(strings.Repeat("/d", 21)+".md", "deep\n")
	e.d.Look()
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("journaled %v", summary(ops))
	}
	u := e.d.Unjournaled()
	for _, p := range []string{"/link.md", "/linkdir", "/hard.md", "/a.md", "/fifo"} {
		var s *fs.Skipped
		if !errors.As(u[p], &s) {
			t.Errorf("%s: %v, want a Skipped with its reason", p, u[p])
		}
	}
	if len(u) != 6 || u["/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d"] == nil {
		t.Errorf("not uploaded: %v", u)
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret\n" {
		t.Fatalf("the link's target changed: %q", b)
	}
}

func TestDirRemoteChangeReplacesALinkNotItsTarget(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("target\n"), 0o600)
	os.Symlink(outside, e.path("/b.md"))
	e.d.Look()
	if err := e.d.Apply([]fs.Change{{FileID: "mem_b", Path: "/b.md", Content: []byte("remote\n")}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "target\n" {
		t.Fatalf("the link's target was written: %q", b)
	}
	fi, err := os.Lstat(e.path("/b.md"))
	if err != nil || !fi.Mode().IsRegular() || e.read("/b.md") != "remote\n" {
		t.Fatalf("b.md: %v %v", fi, err)
	}
}

func TestDirTooLargeWaitsWithItsReason(t *testing.T) {
	e := newDirEnv(t, map[string]string{})
	e.write("/big.md", strings.Repeat("x", 102401))
	e.d.Look()
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("journaled %v", summary(ops))
	}
	if err := e.d.Unjournaled()["/big.md"]; err == nil || !strings.Contains(err.Error(), "larger than a memory may be") {
		t.Fatalf("big.md: %v", err)
	}
	e.write("/big.md", "small now\n")
	e.d.Look()
	wantOps(t, e.j.take(), "/big.md=small now\n")
	if err := e.d.Unjournaled()["/big.md"]; err != nil {
		t.Fatalf("still listed: %v", err)
	}
}

func TestDirJournalFailureKeepsTheChangeForTheNextLook(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	e.j.mu.Lock()
	e.j.fail = errors.New("no space left on device")
	e.j.mu.Unlock()
	e.write("/a.md", "a2\n")
	e.d.Look()
	if u := e.d.Unjournaled()["/a.md"]; u == nil {
		t.Fatal("a change the journal refused is not listed")
	}
	if left, _ := e.d.RetryUnjournaled(); left != 1 {
		t.Fatalf("left %d, want 1", left)
	}
	e.j.mu.Lock()
	e.j.fail = nil
	e.j.mu.Unlock()
	if left, err := e.d.RetryUnjournaled(); left != 0 || err != nil {
		t.Fatalf("left %d, %v", left, err)
	}
	wantOps(t, e.j.take(), "/a.md=a2\n")
}

func TestDirApplyNeverReplacesAnUnseenChange(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	e.write("/a.md", "local\n") // no look yet
	err := e.d.Apply([]fs.Change{{FileID: "mem_a.md", Path: "/a.md", Content: []byte("remote\n")}})
	if !errors.Is(err, errUnseen) {
		t.Fatalf("Apply over an unseen change: %v", err)
	}
	if got := e.read("/a.md"); got != "local\n" {
		t.Fatalf("a.md = %q: the local change was replaced", got)
	}
	wantOps(t, e.j.take(), "/a.md=local\n")
	// Now seen: the store's version goes in.
	if err := e.d.Apply([]fs.Change{{FileID: "mem_a.md", Path: "/a.md", Content: []byte("remote\n")}}); err != nil {
		t.Fatal(err)
	}
	if got := e.read("/a.md"); got != "remote\n" {
		t.Fatalf("a.md = %q", got)
	}
	// And a file made where a remote create lands is seen first too.
	e.write("/b.md", "mine\n")
	if err := e.d.Apply([]fs.Change{{FileID: "mem_b", Path: "/b.md", Content: []byte("theirs\n")}}); !errors.Is(err, errUnseen) {
		t.Fatalf("Apply over a new local file: %v", err)
	}
	wantOps(t, e.j.take(), "/b.md=mine\n")
}

func TestDirCommitFileJournalsAChangeBeforeAMerge(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	if err := e.d.CommitFile("mem_a.md"); err != nil {
		t.Fatal(err)
	}
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("an unchanged file was journaled: %v", summary(ops))
	}
	e.write("/a.md", "a2\n")
	if err := e.d.CommitFile("mem_a.md"); err != nil {
		t.Fatal(err)
	}
	wantOps(t, e.j.take(), "/a.md=a2\n")
}

func TestDirRemoteDeleteAndMove(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/x/a.md": "a\n", "/b.md": "b\n"})
	if err := e.d.Apply([]fs.Change{{FileID: "mem_x_a.md", Deleted: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.path("/x")); !os.IsNotExist(err) {
		t.Fatalf("the folder a remote delete emptied is still there: %v", err)
	}
	if err := e.d.Apply([]fs.Change{{FileID: "mem_b.md", Path: "/y/b.md", Content: []byte("b2\n")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.path("/b.md")); !os.IsNotExist(err) {
		t.Fatal("a remote move left the old file")
	}
	if got := e.read("/y/b.md"); got != "b2\n" {
		t.Fatalf("y/b.md = %q", got)
	}
	e.d.Look()
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("remote changes came back as local ones: %v", summary(ops))
	}
}

// A restart on the folder a killed process left: what changed while
// nothing ran is journaled, against what both sides last agreed on.
func TestDirStartTakesUpWhatChangedWhileNothingRan(t *testing.T) {
	files := map[string]string{"/edit.md": "e\n", "/gone.md": "g\n", "/same.md": "s\n", "/remote.md": "r\n", "/both.md": "b\n"}
	e := newDirEnv(t, files)
	e.d.Freeze() // the baseline is saved; the folder stays, as after a kill -9
	e.write("/edit.md", "e2\n")
	os.Remove(e.path("/gone.md"))
	e.write("/new.md", "n\n")
	e.write("/both.md", "local\n")
	files["/remote.md"], files["/both.md"] = "r2\n", "b2\n" // the store changed meanwhile
	// A memory new to the store, at a path where the folder holds a file
	// it has no record of (a write of ours a power loss cut short): who
	// wrote it is not known, so the store's version wins.
	files["/unrecorded.md"] = "store\n"
	e.write("/unrecorded.md", "half")
	e.open(files)
	wantOps(t, e.j.take(), "/edit.md=e2\n", "/gone.md deleted", "/new.md=n\n", "/both.md=local\n against "+sha("b\n")[:8],
		"/unrecorded.md=half against "+fs.UnknownBase[:8])
	if got := e.read("/remote.md"); got != "r2\n" {
		t.Fatalf("remote.md = %q: a change made in the store while nothing ran did not come down", got)
	}
	if got := e.read("/same.md"); got != "s\n" {
		t.Fatalf("same.md = %q", got)
	}
}

func TestDirStartWithADamagedBaselineMakesDifferencesConflicts(t *testing.T) {
	files := map[string]string{"/a.md": "a\n", "/b.md": "b\n"}
	e := newDirEnv(t, files)
	e.d.Freeze()
	e.write("/a.md", "local\n")
	bp := BaselinePath(e.state, "memstore_t")
	b, err := os.ReadFile(bp)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 0x20
	os.WriteFile(bp, b, 0o600)
	e.open(files)
	wantOps(t, e.j.take(), "/a.md=local\n against "+fs.UnknownBase[:8])
	if m, _ := filepath.Glob(bp + ".damaged-*"); len(m) != 1 {
		t.Fatalf("the damaged baseline was not set aside: %v", m)
	}
}

func TestDirPrepareRefusesAFolderItDidNotMake(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.md"), []byte("x"), 0o644)
	if _, err := Prepare(dir, "memstore_t", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Prepare of a folder with someone's files: %v", err)
	}
	os.WriteFile(filepath.Join(dir, fs.MarkerName), fs.MarkerContent("memstore_t"), 0o444)
	if _, err := Prepare(dir, "memstore_t", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no baseline") {
		t.Fatalf("Prepare of a folder with a marker but no baseline here: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(b) != "x" {
		t.Fatal("a refused folder was changed")
	}
}

func TestDirFolderRemovedIsDownloadedAgainNothingDeleted(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/n/b.md": "b\n"})
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	e.d.Look()
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("a removed folder was journaled: %v", summary(ops))
	}
	for _, id := range e.d.takeRestoreNow() {
		e.st.Fetch(id)
	}
	if e.read("/a.md") != "a\n" || e.read("/n/b.md") != "b\n" || e.read(fs.MarkerName) == "" {
		t.Fatal("the folder was not written again")
	}
	if e.d.Stats().Redownloads != 1 {
		t.Fatalf("stats %+v", e.d.Stats())
	}
}

func TestDirMarkerMissingTakesNothingAndRestores(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
	os.Remove(e.path(fs.MarkerName))
	os.Remove(e.path("/a.md"))
	e.write("/b.md", "b2\n")
	e.d.Look()
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("a look without the marker journaled %v", summary(ops))
	}
	if s := e.d.Stats(); s.MarkerProblem != "missing" {
		t.Fatalf("stats %+v", s)
	}
	for _, id := range e.d.takeRestoreNow() {
		e.st.Fetch(id)
	}
	if e.read("/a.md") != "a\n" {
		t.Fatal("a file gone with the marker was not downloaded again")
	}
	e.d.Look() // the marker is back: the edit is taken
	wantOps(t, e.j.take(), "/b.md=b2\n")
	if s := e.d.Stats(); s.MarkerProblem != "" {
		t.Fatalf("stats %+v", s)
	}
}

func TestDirReadOnlyRestoresWhatChanged(t *testing.T) {
	e := &dirEnv{t: t, dir: filepath.Join(t.TempDir(), "store"), state: t.TempDir(), readOnly: true}
	e.open(map[string]string{"/a.md": "a\n", "/b.md": "b\n", "/c.md": "c\n"})
	if fi, _ := os.Stat(e.path("/a.md")); fi.Mode().Perm() != 0o444 {
		t.Fatalf("a read-only store's file has mode %v", fi.Mode())
	}
	os.Chmod(e.path("/a.md"), 0o644)
	e.write("/a.md", "changed by root\n")
	os.Remove(e.path("/b.md"))
	e.write("/added.md", "x\n")
	e.d.Look()
	for _, id := range e.d.takeRestoreNow() {
		e.st.Fetch(id)
	}
	if e.read("/a.md") != "a\n" || e.read("/b.md") != "b\n" {
		t.Fatal("not restored")
	}
	if fi, _ := os.Stat(e.path("/a.md")); fi.Mode().Perm() != 0o444 {
		t.Fatalf("restored with mode %v", fi.Mode())
	}
	if _, err := os.Stat(e.path("/added.md")); !os.IsNotExist(err) {
		t.Fatal("a file added to a read-only store stays")
	}
	if n := e.d.Stats().Restored; n != 3 {
		t.Fatalf("restored %d, want 3", n)
	}
}

func TestDirEndRemovesWhatIsSyncedAndKeepsTheRest(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/n/b.md": "b\n"})
	os.Symlink("/etc/passwd", e.path("/link"))
	e.d.Freeze()
	left := e.d.End()
	if strings.Join(left, ",") != "/link" {
		t.Fatalf("left %v, want the link only", left)
	}
	if _, err := os.Stat(e.path("/a.md")); !os.IsNotExist(err) {
		t.Fatal("a synced file stays")
	}
	if _, err := os.Stat(e.path(fs.MarkerName)); err != nil {
		t.Fatal("the marker went although files stay")
	}
	os.Remove(e.path("/link"))
	e2 := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	e2.d.Freeze()
	if left := e2.d.End(); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
	if names, _ := readNames(e2.dir); len(names) != 0 {
		t.Fatalf("the folder holds %v after a clean end", names)
	}
	if _, err := os.Stat(BaselinePath(e2.state, "memstore_t")); !os.IsNotExist(err) {
		t.Fatal("the baseline stays after a clean end")
	}
}

func TestDirSwapIsOneChange(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
	os.Rename(e.path("/a.md"), e.path("/tmp.md"))
	os.Rename(e.path("/b.md"), e.path("/a.md"))
	os.Rename(e.path("/tmp.md"), e.path("/b.md"))
	e.d.Look()
	e.j.mu.Lock()
	calls := e.j.calls
	e.j.mu.Unlock()
	wantOps(t, e.j.take(), "/a.md=b\n", "/b.md=a\n")
	if calls != 1 {
		t.Fatalf("%d appends for one swap", calls)
	}
	if id, _, _ := e.d.At("/a.md"); id != "mem_b.md" {
		t.Fatalf("/a.md is %s", id)
	}
}

// Two stores' folders are looked at at once (a session mounts up to 8):
// a look's numbering is its folder's own (under -race, a shared counter
// is a data race).
func TestDirLooksOfTwoFoldersAtOnce(t *testing.T) {
	a := newDirEnv(t, map[string]string{"/a.md": "a\n"})
	b := newDirEnv(t, map[string]string{"/b.md": "b\n"})
	var wg sync.WaitGroup
	for _, e := range []*dirEnv{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				e.d.Look()
			}
		}()
	}
	wg.Wait()
	a.write("/a.md", "a2\n")
	a.d.Look()
	b.d.Look()
	wantOps(t, a.j.take(), "/a.md=a2\n")
	if ops := b.j.take(); len(ops) != 0 {
		t.Fatalf("the other folder journaled %v", summary(ops))
	}
}

func TestDirStartRemovesTemporaryFilesACrashLeft(t *testing.T) {
	e := newDirEnv(t, map[string]string{"/n/a.md": "a\n"})
	e.d.Freeze()
	e.write("/n/"+tmpPrefix+"0123", "half a write")
	e.open(map[string]string{"/n/a.md": "a\n"})
	if _, err := os.Stat(e.path("/n/" + tmpPrefix + "0123")); !os.IsNotExist(err) {
		t.Fatalf("a temporary file a crash left is still there: %v", err)
	}
	if ops := e.j.take(); len(ops) != 0 {
		t.Fatalf("journaled %v", summary(ops))
	}
	if !e.d.Stats().Watching {
		t.Fatal("the folder is not watched after the start")
	}
}
