package fs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// The mount table the cases of TestCoversOf add to: the root, the memory
// root (made before the store's mount, and above it), and the store's
// read-only mount, id 40 on device 0:50.
const coversBase = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /mnt/memory rw,nosuid shared:10 - tmpfs tmpfs rw,mode=755
40 30 0:50 / /mnt/memory/notes ro,nosuid,nodev shared:20 - fuse.memfs memstore_notes ro,user_id=0,group_id=0
`

// TestCoversOf: which lines of a mount table cover a mount, one rule a
// row: mounts stacked over it or inside it (on it by parent id, or made
// after it at, below or above its path) do; its own line, mounts made
// before it, unrelated mounts and a sibling path sharing its prefix don't;
// its id reused by another device means it is gone.
func TestCoversOf(t *testing.T) {
	me := mountIdentity{id: 40, major: 0, minor: 50}
	for _, tc := range []struct {
		name  string
		table string // the lines after coversBase ("" for coversBase alone)
		base  string // replaces coversBase when set
		dir   string // the mount's path; /mnt/memory/notes when ""
		found bool
		want  string // the covers, topmost first: "id where on|path ..."
	}{
		{name: "our own mount alone", found: true},
		{name: "bind mount over the mount path",
			table: "41 40 8:1 /tmp/fake /mnt/memory/notes rw,relatime shared:1 - ext4 /dev/sda1 rw\n",
			found: true, want: "41 over on"},
		{name: "bind mount inside the mount",
			table: "41 40 8:1 /tmp/fake /mnt/memory/notes/sub rw,relatime shared:1 - ext4 /dev/sda1 rw\n",
			found: true, want: "41 inside on"},
		{name: "a mount inside what is mounted over it",
			table: "41 40 0:60 / /mnt/memory/notes rw - tmpfs none rw\n42 41 0:61 / /mnt/memory/notes/x rw - tmpfs x rw\n",
			found: true, want: "42 inside on, 41 over on"},
		{name: "a sibling path with a common prefix",
			table: "41 30 0:51 / /mnt/memory/notes2 ro,nosuid,nodev - fuse.memfs memstore_notes2 ro\n" +
				"42 41 8:1 /tmp/fake /mnt/memory/notes2/sub rw - ext4 /dev/sda1 rw\n",
			found: true},
		{name: "unrelated mounts made after it",
			table: "41 22 0:60 / /run/user/0 rw - tmpfs tmpfs rw\n42 30 0:61 / /mnt/memory/other ro - fuse.memfs memstore_other ro\n",
			found: true},
		{name: "a mount over a directory above the mount path",
			table: "41 22 0:60 / /mnt rw - tmpfs none rw\n",
			found: true, want: "41 over path"},
		{name: "a mount at the mount path on a mount above it",
			table: "41 22 0:60 / /mnt/memory rw - tmpfs none rw\n42 41 8:1 /tmp/fake /mnt/memory/notes rw - ext4 /dev/sda1 rw\n",
			found: true, want: "42 over path, 41 over path"},
		{name: "a mount made before it at its path, under it",
			base: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" +
				"30 22 0:40 / /mnt/memory rw - tmpfs tmpfs rw\n" +
				"35 30 8:1 /old /mnt/memory/notes rw - ext4 /dev/sda1 rw\n" +
				"40 35 0:50 / /mnt/memory/notes ro - fuse.memfs memstore_notes ro\n",
			found: true},
		{name: "a mount made before it inside its path, under it",
			base: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" +
				"36 22 8:1 /old /mnt/memory/notes/sub rw - ext4 /dev/sda1 rw\n" +
				"40 22 0:50 / /mnt/memory/notes ro - fuse.memfs memstore_notes ro\n",
			found: true},
		{name: "gone: not in the table",
			base: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 22 8:1 /tmp/fake /mnt/memory/notes rw - ext4 /dev/sda1 rw\n"},
		{name: "gone: its id reused by another mount at its path",
			base: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n40 22 0:52 / /mnt/memory/notes ro - fuse.memfs memstore_notes ro\n"},
		{name: "a mount path with a space, escaped in the table",
			base: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" +
				"40 22 0:50 / /mnt/memory/my\\040notes ro - fuse.memfs memstore_notes ro\n" +
				"41 40 8:1 /tmp/fake /mnt/memory/my\\040notes/a\\040b rw - ext4 /dev/sda1 rw\n" +
				"42 22 8:1 /tmp/fake /mnt/memory/my\\040notes2 rw - ext4 /dev/sda1 rw\n",
			dir: "/mnt/memory/my notes", found: true, want: "41 inside on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := coversBase + tc.table
			if tc.base != "" {
				table = tc.base + tc.table
			}
			infos, err := mountinfo.GetMountsFromReader(strings.NewReader(table), nil)
			if err != nil {
				t.Fatal(err)
			}
			dir := tc.dir
			if dir == "" {
				dir = "/mnt/memory/notes"
			}
			found, covers := coversOf(infos, me, dir)
			var got []string
			for _, c := range covers {
				on := "path"
				if c.on {
					on = "on"
				}
				got = append(got, fmt.Sprintf("%d %s %s", c.ID, c.Where(), on))
			}
			if found != tc.found || strings.Join(got, ", ") != tc.want {
				t.Errorf("coversOf = %v, %q; want %v, %q", found, strings.Join(got, ", "), tc.found, tc.want)
			}
		})
	}
}

// TestCoverFields: a cover carries the line's mount point, type and
// source, as memfs status shows them.
func TestCoverFields(t *testing.T) {
	infos, err := mountinfo.GetMountsFromReader(strings.NewReader(coversBase+
		"41 40 8:1 /tmp/fake /mnt/memory/notes rw,relatime shared:1 - ext4 /dev/sda1 rw\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, covers := coversOf(infos, mountIdentity{id: 40, major: 0, minor: 50}, "/mnt/memory/notes")
	want := Cover{MountInfo: MountInfo{Dir: "/mnt/memory/notes", FSType: "ext4", Source: "/dev/sda1", Options: "rw,relatime"}, ID: 41, Root: "/tmp/fake", on: true}
	if len(covers) != 1 || covers[0] != want {
		t.Errorf("covers = %+v, want [%+v]", covers, want)
	}
}
