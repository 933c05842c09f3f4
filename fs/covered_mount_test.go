package fs

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// coverTimeout bounds waiting for the mount-table watch to see a change.
const coverTimeout = 10 * time.Second

// TestMountCoveredWatch: on a real mount, the mount-table watch reports a
// bind mount over the mount path and one on a directory inside it, in
// Covered and to OnCover, and clears each once it is unmounted; Gone stays
// open all along. Once Unmount begins it reports nothing more (Unmount
// reports the covers it detaches).
func TestMountCoveredWatch(t *testing.T) {
	needFUSE(t)
	tr, _ := newTestTree(t, Options{StoreID: mountStoreID})
	treeMkdirAll(t, tr, "/sub")
	dir := t.TempDir()
	var mu sync.Mutex
	var calls [][]Cover
	m, err := MountTree(dir, tr, MountOptions{OnCover: func(c []Cover) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range []string{filepath.Join(dir, "sub"), dir, dir} {
			unix.Unmount(p, unix.MNT_DETACH) // a failed test's leftovers
		}
	})
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "fake.md"), []byte("forged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// waitCovers waits for Covered to be want ("where dir" of each).
	waitCovers := func(what string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(coverTimeout)
		for {
			var got []string
			for _, c := range m.Covered() {
				got = append(got, c.Where()+" "+c.Dir)
			}
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Covered is %q after %s, want %q", what, got, coverTimeout, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// waitCalls waits for OnCover to have been called n times (it is
	// called just after Covered changes) and returns the calls.
	waitCalls := func(n int) [][]Cover {
		t.Helper()
		deadline := time.Now().Add(coverTimeout)
		for {
			mu.Lock()
			got := slices.Clone(calls)
			mu.Unlock()
			if len(got) >= n || time.Now().After(deadline) {
				return got
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCovers("freshly mounted")

	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount over the mount: %v", err)
	}
	waitCovers("a bind mount over the mount path", "over "+dir)
	if err := unix.Unmount(dir, 0); err != nil { // the bind mount, on top
		t.Fatal(err)
	}
	waitCovers("the bind mount over it unmounted")

	sub := filepath.Join(dir, "sub")
	if err := unix.Mount(src, sub, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount inside the mount: %v", err)
	}
	waitCovers("a bind mount inside the mount", "inside "+sub)
	if err := unix.Unmount(sub, 0); err != nil {
		t.Fatal(err)
	}
	waitCovers("the bind mount inside it unmounted")
	select {
	case <-m.Gone():
		t.Fatal("Gone is closed while the tree is mounted")
	default:
	}

	var seen []int
	for _, c := range waitCalls(4) {
		seen = append(seen, len(c))
	}
	if !slices.Equal(seen, []int{1, 0, 1, 0}) {
		t.Errorf("OnCover was called with %d covers, want 1, 0, 1, 0 (one call per change)", seen)
	}

	// Unmount detaches a cover and reports it; the watch stays quiet.
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	waitCovers("a bind mount over the mount path before Unmount", "over "+dir)
	waitCalls(5)
	res, err := unmountWithin(t, m, 5*time.Second)
	if err != nil || len(res.Covers) != 1 {
		t.Fatalf("Unmount = %+v, %v; want the cover detached", res, err)
	}
	mu.Lock()
	n := len(calls)
	mu.Unlock()
	if n != 5 {
		t.Errorf("OnCover was called %d times in all, want 5: none after Unmount began", n)
	}
}
