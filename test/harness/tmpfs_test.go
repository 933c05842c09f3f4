package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSmallTmpfs mounts 1 MiB, fills it, frees it, and checks the mount
// is gone once the test that made it ended.
func TestSmallTmpfs(t *testing.T) {
	var dir string
	t.Run("mounted", func(t *testing.T) {
		dir = SmallTmpfs(t, "1m")
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.TMPFS_MAGIC || st.Blocks*uint64(st.Bsize) != 1<<20 {
			t.Fatalf("statfs %s: type %#x, %d bytes; want a tmpfs of 1 MiB", dir, st.Type, st.Blocks*uint64(st.Bsize))
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("stat %s: %v, %v; want mode 0700", dir, fi.Mode(), err)
		}
		// Each write is a new file: rewriting one would first free its
		// own blocks.
		write := func(name string) error { return os.WriteFile(filepath.Join(dir, name), make([]byte, 8<<10), 0o600) }
		if err := write("before"); err != nil {
			t.Fatalf("write before FillDisk: %v", err)
		}

		release := FillDisk(t, dir)
		if err := write("full"); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write on the filled disk: %v, want ENOSPC", err)
		}
		release()
		if err := write("after"); err != nil {
			t.Fatalf("write after release: %v", err)
		}
		release() // a second call does nothing
		var names []string
		if entries, err := os.ReadDir(dir); err == nil {
			for _, e := range entries {
				names = append(names, e.Name())
			}
		}
		if want := []string{"after", "before", "full"}; fmt.Sprint(names) != fmt.Sprint(want) {
			t.Fatalf("after release, %s holds %v, want %v (the filler removed)", dir, names, want)
		}
	})
	if dir != "" && IsMounted(dir) {
		t.Errorf("%s is still mounted after the test that mounted it ended", dir)
	}
}

// TestFillDiskRefusesARealDisk: a file system with more free space than
// the cap is taken for a real disk and not filled. It is a tmpfs larger
// than the cap, so that a broken guard fills memory for a moment, not the
// machine's disk.
func TestFillDiskRefusesARealDisk(t *testing.T) {
	dir := SmallTmpfs(t, fmt.Sprintf("%dm", fillCap>>20+64))
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		FillDisk(ft, dir)
	}()
	<-done
	if ft.fatal == "" {
		t.Fatalf("FillDisk filled a file system with over %d MiB free", fillCap>>20)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("FillDisk refused but left %d file(s) behind", len(entries))
	}
	t.Logf("FillDisk refused: %s", ft.fatal)
}

// fatalTB records a Fatalf and ends the goroutine, as testing does, but
// without failing the test: for checking that a helper refuses.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRootRefusal(t *testing.T) {
	for _, tc := range []struct {
		euid        int
		ci          string
		skip, fatal bool
	}{
		{0, "", false, false},
		{0, "true", false, false},
		{1000, "", true, false},
		{1000, "false", true, false},
		{1000, "true", false, true},
	} {
		reason, fatal := rootRefusal(tc.euid, tc.ci)
		if (reason != "" && !fatal) != tc.skip || fatal != tc.fatal {
			t.Errorf("rootRefusal(%d, %q) = %q, %v; want skip %v, fatal %v", tc.euid, tc.ci, reason, fatal, tc.skip, tc.fatal)
		}
	}
}
