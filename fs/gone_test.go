package fs

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// goneTimeout bounds waiting for Gone after an unmount from outside.
const goneTimeout = 10 * time.Second

// TestMountGone: Gone stays open while the tree is mounted and closes
// when someone else unmounts it: a plain umount, and an umount -l while a
// file in it is still open (the kernel keeps that FUSE connection until
// the file closes, so only the mount table shows the detach).
func TestMountGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		busy bool
	}{
		{"umount", false},
		{"umount -l of a busy mount", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needFUSE(t)
			tr, _ := newTestTree(t, Options{StoreID: mountStoreID})
			tr.Load([]File{{FileID: "f1", Path: "/a.md", Content: []byte("a\n")}})
			dir := t.TempDir()
			m, err := MountTree(dir, tr, MountOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if mounted, _ := IsMounted(dir); mounted {
					unix.Unmount(dir, unix.MNT_DETACH)
				}
			})
			gone := m.Gone()
			if m.Gone() != gone {
				t.Fatal("Gone returns a new channel on every call")
			}
			// The watcher has looked at the table once the mount answers a
			// lookup; the mount is there, so Gone must still be open.
			if _, err := os.Stat(dir + "/a.md"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-gone:
				t.Fatal("Gone is closed while the tree is mounted")
			default:
			}
			var held *os.File
			flags := 0
			if tc.busy {
				if held, err = os.Open(dir + "/a.md"); err != nil {
					t.Fatal(err)
				}
				defer held.Close()
				flags = unix.MNT_DETACH
				if err := unix.Unmount(dir, 0); err != unix.EBUSY {
					t.Fatalf("umount of a mount with an open file: %v, want EBUSY", err)
				}
			}
			if err := unix.Unmount(dir, flags); err != nil {
				t.Fatalf("unmount from outside: %v", err)
			}
			select {
			case <-gone:
			case <-time.After(goneTimeout):
				t.Fatalf("Gone was not closed within %s of the unmount", goneTimeout)
			}
			if held != nil {
				// The file still reads: the connection lives on for it.
				b := make([]byte, 16)
				if n, err := held.ReadAt(b, 0); string(b[:n]) != "a\n" {
					t.Errorf("the open file of the detached mount reads %q, %v", b[:n], err)
				}
				held.Close()
			}
			done := make(chan struct{})
			go func() { m.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(goneTimeout):
				t.Fatal("the server did not stop once the mount was gone and its files closed")
			}
		})
	}
}
