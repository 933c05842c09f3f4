package journal

import (
	"errors"
	"os"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
)

// inode is the inode number of the file at path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// setSyncHook installs the fdatasync seam.
func setSyncHook(j *Journal, hook func(*os.File) error) {
	j.mu.Lock()
	j.testHookSync = hook
	j.mu.Unlock()
}

// After one failed fdatasync the journal does not trust its file: it
// writes everything pending from memory into a fresh file and goes on.
// The failing sync also scribbles zeros over the old file (the kernel
// dropping its pages), so a recovery that read any of it back would
// replay damage or lose a change.
func TestFailedSyncRecoversIntoFreshFile(t *testing.T) {
	dir := t.TempDir()
	opts, hook := testOpts()
	opts.CompactMinBytes = 1 << 30
	j := open(t, dir, opts)
	la := put(t, j, "a", "/a.md", "a1")
	eventually(t, "a to be synced", func() bool { return j.Stats().SyncedLSN >= la })
	oldIno := inode(t, journalPath(dir))

	var fails atomic.Int32
	fails.Store(1)
	setSyncHook(j, func(f *os.File) error {
		if fails.Add(-1) < 0 {
			return nil
		}
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		w, err := os.OpenFile(f.Name(), os.O_WRONLY, 0) // f is O_APPEND
		if err != nil {
			return err
		}
		defer w.Close()
		if _, err := w.WriteAt(make([]byte, fi.Size()-headerLen), headerLen); err != nil {
			return err
		}
		return syscall.EIO
	})
	lb := put(t, j, "b", "/b.md", "b1") // the group commit's fdatasync fails
	eventually(t, "b to be on stable storage", func() bool { return j.Stats().SyncedLSN >= lb })
	if s := j.Stats(); s.Fault != nil {
		t.Fatalf("the journal is still faulted after one failed fdatasync: %v", s.Fault)
	}
	if fails.Load() >= 0 {
		t.Fatal("the fdatasync seam was not called: the test did not inject its fault")
	}
	if ino := inode(t, journalPath(dir)); ino == oldIno {
		t.Fatal("the journal went on with the file whose fdatasync failed")
	}
	if !hasLog(hook, logrus.ErrorLevel, "I/O error on the journal") || !hasLog(hook, logrus.WarnLevel, "journal recovered") {
		t.Errorf("the fault and the recovery were not logged: %v", hook.AllEntries())
	}
	put(t, j, "c", "/c.md", "c1")
	if err := j.Sync(); err != nil {
		t.Fatalf("Sync after the recovery: %v", err)
	}
	closeJ(t, j)

	j = open(t, dir, opts)
	if d := j.Damage(); d != nil {
		t.Fatalf("the recovered journal replays as damaged: %+v", d)
	}
	want := map[string]string{"a": "a1", "b": "b1", "c": "c1"}
	if got := pendingContents(j); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay after the recovery: %v, want %v", got, want)
	}
}

// While fdatasync keeps failing the journal is faulted: changes are
// refused with the real errno, confirmations hold in memory; once it works
// again the journal recovers by itself and nothing is lost.
func TestFaultRefusesChangesUntilRecovered(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	la := put(t, j, "a", "/a.md", "a1")
	var failing atomic.Bool
	failing.Store(true)
	setSyncHook(j, func(*os.File) error {
		if failing.Load() {
			return syscall.EIO
		}
		return nil
	})
	lb := put(t, j, "b", "/b.md", "b1")
	eventually(t, "the journal to be faulted", func() bool { return j.Stats().Fault != nil })
	if f := j.Stats().Fault; f.ErrnoName() != "EIO" {
		t.Fatalf("fault %v names errno %q, want EIO", f, f.ErrnoName())
	}
	_, err := j.Put("c", "/c.md", []byte("c1"))
	var ioe *IOError
	if !errors.Is(err, syscall.EIO) || !errors.As(err, &ioe) || errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put while faulted: %v, want an *IOError wrapping EIO", err)
	}
	if err := j.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync while faulted: %v, want EIO", err)
	}
	if err := j.Confirm("a", la, "mem_a", "sha-a1", "/a.md"); err != nil {
		t.Fatalf("Confirm while faulted: %v (it must hold in memory)", err)
	}
	if s := j.Stats(); s.NoSpace || s.Pending != 1 {
		t.Fatalf("while faulted: %+v, want b alone pending and no claim of a full disk", s)
	}

	failing.Store(false)
	eventually(t, "the journal to recover", func() bool { return j.Stats().Fault == nil })
	if s := j.Stats(); s.SyncedLSN < lb || s.Unsaved {
		t.Fatalf("after the recovery: %+v, want everything synced and saved", s)
	}
	put(t, j, "c", "/c.md", "c1")
	closeJ(t, j)
	j = open(t, dir, opts)
	want := map[string]string{"b": "b1", "c": "c1"}
	if got := pendingContents(j); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay: %v, want %v (a confirmed while faulted)", got, want)
	}
}

// A write that fails with EIO leaves the file in an unknown state too:
// the change is refused with EIO, and the journal goes on in a fresh
// file. A full disk (ENOSPC) is not a fault: it only refuses the change.
func TestFailedWriteRecoversIntoFreshFile(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	put(t, j, "a", "/a.md", "a1")
	oldIno := inode(t, journalPath(dir))
	var fail atomic.Value
	fail.Store(syscall.ENOSPC)
	j.mu.Lock()
	j.testHookWrite = func(b []byte) error {
		if b == nil { // a compaction or a recovery
			return nil
		}
		if errno := fail.Swap(syscall.Errno(0)).(syscall.Errno); errno != 0 {
			return errno
		}
		return nil
	}
	j.mu.Unlock()
	if _, err := j.Put("b", "/b.md", []byte("b1")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put with a full disk: %v, want ENOSPC", err)
	}
	if s := j.Stats(); s.Fault != nil || inode(t, journalPath(dir)) != oldIno {
		t.Fatalf("a full disk faulted the journal: %+v", s)
	}
	fail.Store(syscall.EIO)
	_, err := j.Put("b", "/b.md", []byte("b1"))
	var ioe *IOError
	if !errors.As(err, &ioe) || ioe.ErrnoName() != "EIO" || ioe.Op != "write" {
		t.Fatalf("Put with a failing write: %v, want an *IOError of the write naming EIO", err)
	}
	eventually(t, "the journal to recover", func() bool { return j.Stats().Fault == nil })
	if inode(t, journalPath(dir)) == oldIno {
		t.Fatal("the journal went on with the file whose write failed")
	}
	put(t, j, "b", "/b.md", "b1")
	closeJ(t, j)
	j = open(t, dir, opts)
	want := map[string]string{"a": "a1", "b": "b1"}
	if got := pendingContents(j); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay: %v, want %v", got, want)
	}
}

// Close on a journal still faulted makes one last attempt, and returns the
// I/O error when that fails too; the next Open replays the old file.
func TestCloseWhileFaulted(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	put(t, j, "a", "/a.md", "a1")
	setSyncHook(j, func(*os.File) error { return syscall.EIO })
	eventually(t, "the journal to be faulted", func() bool { return j.Stats().Fault != nil })
	ctx := t.Context()
	if err := j.Close(ctx); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close while faulted: %v, want EIO", err)
	}
	j = open(t, dir, opts)
	if got := pendingContents(j); !reflect.DeepEqual(got, map[string]string{"a": "a1"}) {
		t.Fatalf("replay: %v", got)
	}
}
