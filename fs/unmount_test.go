package fs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unmountHang bounds waiting for an Unmount that should return at once: a
// hang (go-fuse's Server.Unmount waits for ever for a connection nothing
// ended), not slowness.
const unmountHang = 30 * time.Second

// unmountWithin runs UnmountReport with a context of ctxTimeout and fails
// the test if it has not returned within unmountHang.
func unmountWithin(t *testing.T, m *Mount, ctxTimeout time.Duration) (Unmounted, error) {
	t.Helper()
	type result struct {
		res Unmounted
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
		defer cancel()
		res, err := m.UnmountReport(ctx)
		ch <- result{res, err}
	}()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-time.After(unmountHang):
		t.Fatalf("Unmount of %s did not return within %s", m.Dir, unmountHang)
		return Unmounted{}, nil
	}
}

// TestUnmountCovered: with directories bind-mounted over the mount point
// and over a directory in the mount, Unmount detaches
// them (reporting each), then unmounts the mount itself, not lazily, and
// the FUSE server ends; the directories that were mounted are untouched.
func TestUnmountCovered(t *testing.T) {
	needFUSE(t)
	tr, _ := newTestTree(t, Options{StoreID: mountStoreID})
	treeMkdirAll(t, tr, "/sub")
	dir := t.TempDir()
	m, err := MountTree(dir, tr, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "keep.txt"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Unmount(dir, unix.MNT_DETACH) // a failed test's leftovers
	})
	if err := unix.Mount(src, filepath.Join(dir, "sub"), "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount into the mount: %v", err)
	}
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount over the mount: %v", err)
	}

	res, err := unmountWithin(t, m, 10*time.Second)
	if err != nil {
		t.Fatalf("Unmount: %v", err)
	}
	if res.Lazy || res.Outside || res.Lingering {
		t.Errorf("Unmount reported %+v, want an unmount of its own, not lazy", res)
	}
	var covers []string
	for _, c := range res.Covers {
		covers = append(covers, c.Dir)
	}
	if len(covers) != 2 || covers[0] != dir || covers[1] != filepath.Join(dir, "sub") {
		t.Errorf("Unmount detached %q, want %s then %s/sub", covers, dir, dir)
	}
	if mounts := mountsAt(t, dir); len(mounts) > 0 {
		t.Errorf("still mounted at or under %s: %v", dir, mounts)
	}
	select {
	case <-m.ended:
	default:
		t.Error("the FUSE server still runs after Unmount returned")
	}
	if b, err := os.ReadFile(filepath.Join(src, "keep.txt")); err != nil || string(b) != "keep\n" {
		t.Errorf("the directory that was bind-mounted changed: %q, %v", b, err)
	}
}

// TestUnmountOutside: a mount already unmounted from outside is reported
// so, and nothing else is touched: a directory mounted at the path since
// stays mounted.
func TestUnmountOutside(t *testing.T) {
	needFUSE(t)
	tr, _ := newTestTree(t, Options{StoreID: mountStoreID})
	dir := t.TempDir()
	m, err := MountTree(dir, tr, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatalf("umount from outside: %v", err)
	}
	m.Wait()
	src := t.TempDir()
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount at the old mount point: %v", err)
	}
	t.Cleanup(func() {
		unix.Unmount(dir, unix.MNT_DETACH)
	})
	res, err := unmountWithin(t, m, 10*time.Second)
	if err != nil || !res.Outside || res.Lazy || len(res.Covers) > 0 {
		t.Errorf("Unmount after an umount from outside: %+v, %v; want Outside only", res, err)
	}
	if mounted, _ := IsMounted(dir); !mounted {
		t.Errorf("Unmount took down the bind mount someone made at %s after the umount", dir)
	}
}

// mountsAt lists the mount points at or under dir.
func mountsAt(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := Mounts()
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, mi := range mounts {
		if d := filepath.Clean(mi.Dir); d == dir || len(d) > len(dir) && d[:len(dir)+1] == dir+"/" {
			at = append(at, d)
		}
	}
	return at
}

// TestGoneByID: the gone watch knows the mount by its id, not by its
// path. A bind mount over it leaves it in place; detached from outside
// while a directory in it is held open (so its FUSE server goes on) and
// another mount made at the same path, it has gone, though the path is a
// mount point still: the table watch alone can tell, and does.
func TestGoneByID(t *testing.T) {
	needFUSE(t)
	tr, _ := newTestTree(t, Options{StoreID: mountStoreID})
	dir := t.TempDir()
	m, err := MountTree(dir, tr, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Unmount(dir, unix.MNT_DETACH) // a failed test's leftovers
		unix.Unmount(dir, unix.MNT_DETACH)
	})
	held, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	gone := m.Gone()
	src := t.TempDir()
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount over the mount: %v", err)
	}
	if placeOf(t, m).gone {
		t.Fatal("a bind mount over the mount made it count as gone")
	}
	if err := unix.Unmount(dir, 0); err != nil { // the cover
		t.Fatal(err)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil { // ours
		t.Fatal(err)
	}
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount at the path: %v", err)
	}
	if mounted, err := IsMounted(dir); err != nil || !mounted {
		t.Fatalf("IsMounted(%s) = %v, %v after the bind mount", dir, mounted, err)
	}
	if !placeOf(t, m).gone {
		t.Fatal("the mount, unmounted from outside, counts as there while another mount stands at its path")
	}
	select {
	case <-gone:
	case <-time.After(unmountHang):
		t.Fatalf("Gone did not report the unmount within %s", unmountHang)
	}
}

// placeOf is where m stands in the mount table now.
func placeOf(t *testing.T, m *Mount) mountPlace {
	t.Helper()
	p, err := m.place()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
