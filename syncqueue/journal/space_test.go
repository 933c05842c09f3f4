package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// An append of several changes is one write: when it fails, none of them
// is in the journal, in memory or on disk.
func TestAppendIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	j.SetBase("mem_dst", "mem_dst", "sha-dst")
	put(t, j, "src", "/src.md", "source")
	before, size := j.Pending(), j.Stats().FileBytes
	j.mu.Lock()
	j.testHookWrite = func([]byte) error { return syscall.ENOSPC }
	j.mu.Unlock()
	_, err := j.Append(Change{FileID: "mem_dst", Path: "/dst.md", Deleted: true}, Change{FileID: "src", Path: "/dst.md", Content: []byte("source")})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append with a failing write: %v, want ENOSPC", err)
	}
	if got := j.Pending(); !reflect.DeepEqual(got, before) {
		t.Fatalf("a failed append changed the state:\n got %+v\nwant %+v", got, before)
	}
	if s := j.Stats(); s.FileBytes != size {
		t.Fatalf("a failed append changed the file: %d bytes, want %d", s.FileBytes, size)
	}
	j.mu.Lock()
	j.testHookWrite = nil
	j.mu.Unlock()
	if _, err := j.Append(Change{FileID: "a", Path: "/a"}, Change{FileID: "a", Path: "/b"}); err == nil {
		t.Fatal("Append of one file twice was accepted")
	}
	lsns, err := j.Append(Change{FileID: "mem_dst", Path: "/dst.md", Deleted: true}, Change{FileID: "src", Path: "/dst.md", Content: []byte("source")})
	if err != nil || len(lsns) != 2 || lsns[1] != lsns[0]+1 {
		t.Fatalf("Append: %v, %v", lsns, err)
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	p := pendingByID(j)
	if d := p["mem_dst"]; !d.Deleted || d.Origin != "mem_dst" || d.BaseSHA != "sha-dst" {
		t.Fatalf("replayed delete: %+v", d)
	}
	if s := p["src"]; s.Path != "/dst.md" || string(s.Content) != "source" {
		t.Fatalf("replayed rename: %+v", s)
	}
}

// A change is refused, with nothing written, when the directory would not
// keep room for a compaction of the pending state after it; the journal
// compacts first when its history takes the room.
func TestAppendKeepsRoomForACompaction(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	content := bytes.Repeat([]byte("x"), 10<<10)
	for i := range 20 {
		put(t, j, "f", "/f", string(content[:len(content)-i])) // history: 20 records of one file
	}
	history := j.Stats().FileBytes
	// A disk of budget bytes holding nothing but the journal: room for the
	// next record and a compaction of the pending state only once the
	// file's history is compacted away.
	budget := int64(200 << 10)
	j.testHookAvail = func() int64 { return budget - j.size }
	if _, err := j.Put("g", "/g", content); err != nil {
		t.Fatalf("Put with room for it after a compaction: %v", err)
	}
	if s := j.Stats(); s.FileBytes >= history {
		t.Fatalf("the journal was not compacted to make room: %d bytes, was %d", s.FileBytes, history)
	}
	// Now the pending state itself (two 10 KiB files) leaves no room.
	budget = 100 << 10
	size := j.Stats().FileBytes
	_, err := j.Put("h", "/h", content)
	var errno syscall.Errno
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &errno) || errno != syscall.ENOSPC {
		t.Fatalf("Put without room: %v, want ErrNoSpace, and ENOSPC for errors.Is and errors.As (the errno the filesystem answers)", err)
	}
	if s := j.Stats(); s.FileBytes != size {
		t.Fatalf("a refused Put changed the file: %d bytes, was %d", s.FileBytes, size)
	}
	if _, ok := j.Lookup("h"); ok {
		t.Fatal("a refused Put is pending")
	}
	if !j.Stats().NoSpace {
		t.Fatal("Stats().NoSpace is false after a refusal")
	}
	budget = 1 << 30
	put(t, j, "h", "/h", "fits now")
	if j.Stats().NoSpace {
		t.Fatal("Stats().NoSpace still true after a change was written")
	}
}

// On a real, full file system: the journal refuses what it can't keep,
// confirmations still take effect (in memory), and once there is room
// again the journal saves its state and shrinks by itself.
func TestFullDiskRecoversByItself(t *testing.T) {
	disk := harness.SmallTmpfs(t, "2m")
	dir := filepath.Join(disk, "store")
	opts, _ := testOpts()
	j := open(t, dir, opts)
	content := bytes.Repeat([]byte("y"), 50<<10)
	var lsns []uint64
	var refused error
	for i := range 100 {
		lsn, err := j.Put(fmt.Sprint("f", i), fmt.Sprintf("/f%d", i), content)
		if err != nil {
			refused = err
			break
		}
		lsns = append(lsns, lsn)
	}
	if !errors.Is(refused, syscall.ENOSPC) || len(lsns) == 0 {
		t.Fatalf("after %d puts of 50 KiB on a 2 MiB disk: %v, want ENOSPC", len(lsns), refused)
	}
	// Someone else takes the rest of the disk: not even a confirmation
	// fits. The store confirms everything meanwhile.
	release := harness.FillDisk(t, disk)
	for i, lsn := range lsns {
		if err := j.Confirm(fmt.Sprint("f", i), lsn, fmt.Sprint("mem_", i), "sha", fmt.Sprintf("/f%d", i)); err != nil {
			t.Fatalf("Confirm on a full disk: %v", err)
		}
	}
	if s := j.Stats(); s.Pending != 0 {
		t.Fatalf("after confirming on a full disk: %+v, want nothing pending", s)
	}
	// Space comes back: the journal saves and shrinks by itself.
	release()
	eventually(t, "the journal to save and shrink once there was room", func() bool {
		s := j.Stats()
		return !s.Unsaved && s.FileBytes <= testEmptyLen
	})
	put(t, j, "after", "/after", "written once there was room")
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := pendingContents(j); !reflect.DeepEqual(got, map[string]string{"after": "written once there was room"}) {
		t.Fatalf("replay after the recovery: %v", got)
	}
}

// With nothing pending and no room even for journal.tmp, the journal is
// cut back to its header in place.
func TestFullDiskEmptyJournalCutInPlace(t *testing.T) {
	disk := harness.SmallTmpfs(t, "1m")
	dir := filepath.Join(disk, "store")
	opts, _ := testOpts()
	opts.CompactMinBytes = 1 << 30 // only the empty-journal rule compacts
	j := open(t, dir, opts)
	lsn := put(t, j, "f", "/f", string(bytes.Repeat([]byte("z"), 100<<10)))
	release := harness.FillDisk(t, disk)
	if err := j.Confirm("f", lsn, "mem_f", "sha", "/f"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the journal to be cut back on a full disk", func() bool {
		s := j.Stats()
		return s.FileBytes <= testEmptyLen && !s.Unsaved
	})
	release()
	closeJ(t, j)
	j = open(t, dir, opts)
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("pending after reopening: %+v", p)
	}
}

// A confirmation that can't be written takes effect in memory; the state
// is saved by a compaction as soon as one can be written.
func TestUnwrittenConfirmationIsSavedLater(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.CompactMinBytes = 1 << 30
	j := open(t, dir, opts)
	la := put(t, j, "a", "/a", "a1")
	put(t, j, "b", "/b", "b1")
	var full atomic.Bool // the "disk" is full: appends and compactions fail
	full.Store(true)
	j.mu.Lock()
	j.testHookWrite = func([]byte) error {
		if full.Load() {
			return syscall.ENOSPC
		}
		return nil
	}
	j.mu.Unlock()
	if err := j.Confirm("a", la, "mem_a", "sha-a1", "/a"); err != nil {
		t.Fatalf("Confirm with a failing write: %v", err)
	}
	if s := j.Stats(); !s.Unsaved || s.Pending != 1 {
		t.Fatalf("after an unwritten confirmation: %+v, want unsaved with one pending", s)
	}
	if b, ok := j.Base("a"); !ok || b.MemoryID != "mem_a" {
		t.Fatalf("the unwritten confirmation did not take effect: base %+v", b)
	}
	full.Store(false)
	eventually(t, "the unsaved state to be compacted into the file", func() bool { return !j.Stats().Unsaved })
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := pendingContents(j); !reflect.DeepEqual(got, map[string]string{"b": "b1"}) {
		t.Fatalf("replay after saving: %v, want only b pending", got)
	}
}

// Inspect reads a journal without touching it: a live holder is named,
// damage is counted, not salvaged.
func TestInspectChangesNothing(t *testing.T) {
	data, offs, _ := threeRecords(t)
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	put(t, j, "a", "/a", "x")
	del(t, j, "a", "/a")
	j.SetBase("m", "m", "s")
	del(t, j, "m", "/m")
	put(t, j, "n", "/n", "y")
	info, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.LockedBy != os.Getpid() || info.Pending != 2 || info.Deletes != 1 || info.FileBytes != j.Stats().FileBytes || info.Lost != 0 {
		t.Fatalf("Inspect of a live journal: %+v", info)
	}
	closeJ(t, j)
	if info, _ := Inspect(dir); info.LockedBy != 0 {
		t.Fatalf("Inspect after Close: %+v", info)
	}
	damaged := bytes.Clone(data)
	damaged[offs[1]+16] ^= 1
	ddir := withJournal(t, damaged)
	info, err = Inspect(ddir)
	if err != nil || info.Lost == 0 || info.Pending != 1 {
		t.Fatalf("Inspect of a damaged journal: %+v, %v", info, err)
	}
	if got, _ := os.ReadFile(journalPath(ddir)); !bytes.Equal(got, damaged) {
		t.Fatal("Inspect changed the damaged journal")
	}
	if names, _ := filepath.Glob(filepath.Join(ddir, "*")); len(names) != 1 {
		t.Fatalf("Inspect left files behind: %v", names)
	}
}
