package fs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Permission tests: a memfs mount made by root behaves like a local
// folder (tmpfs, ext4) for users other than root. Each test mounts a tree
// with allow_other under a directory every user may enter, and acts as
// other users with setpriv(1), as the agent's tools would run.

// Users the tests act as (no passwd entry is needed for numbers).
const (
	userA, groupA = 65534, 65534 // nobody:nogroup
	userB, groupB = 4242, 4242
	sharedGroup   = 4343
)

// mountPermTree mounts a tree (recording journal) that other users may
// enter, under a 0755 directory, and unmounts it when the test ends.
func mountPermTree(t *testing.T, opts Options, files ...File) *testMount {
	t.Helper()
	needFUSE(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("needs setpriv (util-linux) to act as other users: %v", err)
	}
	base, err := os.MkdirTemp("", "memfs-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.StoreID = mountStoreID
	var tr *Tree
	var j *recJournal
	if opts.ReadOnly {
		tr, err = NewTree(opts)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		tr, j = newTestTree(t, opts)
	}
	tr.Load(files)
	m, err := MountTree(dir, tr, MountOptions{AllowOther: true})
	if err != nil {
		t.Fatalf("MountTree: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Unmount(ctx); err != nil {
			t.Errorf("Unmount: %v", err)
		}
	})
	return &testMount{dir: dir, tr: tr, j: j}
}

// as runs cmd in the mount's root as uid:gid with the supplementary
// groups given (none: --clear-groups), and returns its output.
func (m *testMount) as(t *testing.T, uid, gid int, groups []int, cmd string) (string, error) {
	t.Helper()
	args := []string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid)}
	if len(groups) == 0 {
		args = append(args, "--clear-groups")
	} else {
		gs := make([]string, len(groups))
		for i, g := range groups {
			gs[i] = fmt.Sprint(g)
		}
		args = append(args, "--groups="+strings.Join(gs, ","))
	}
	args = append(args, "sh", "-c", `cd "$MNT" || exit 99; `+cmd)
	c := exec.Command("setpriv", args...)
	c.Dir = "/"
	c.Env = append(os.Environ(), "MNT="+m.dir, "LC_ALL=C")
	out, err := c.CombinedOutput()
	return string(out), err
}

func (m *testMount) mustAs(t *testing.T, uid, gid int, groups []int, cmd string) string {
	t.Helper()
	out, err := m.as(t, uid, gid, groups, cmd)
	if err != nil {
		t.Fatalf("as %d:%d: %s: %v\n%s", uid, gid, cmd, err, out)
	}
	return strings.TrimSpace(out)
}

func (m *testMount) asFails(t *testing.T, uid, gid int, groups []int, cmd, msg string) {
	t.Helper()
	out, err := m.as(t, uid, gid, groups, cmd)
	if err == nil {
		t.Errorf("as %d:%d: %s succeeded, want %q\n%s", uid, gid, cmd, msg, out)
	} else if !strings.Contains(out, msg) {
		t.Errorf("as %d:%d: %s: %v, output %q, want %q", uid, gid, cmd, err, out, msg)
	}
}

// The first reproduction: a new entry belongs to its creator, with
// the creator's umask-applied mode, and the creator can use it.
func TestPermNewEntriesBelongToTheirCreator(t *testing.T) {
	m := mountPermTree(t, Options{})
	m.mustSh(t, "chmod 777 .")
	got := m.mustAs(t, userA, groupA, nil, `umask 077; echo hi > f; stat -c %u:%g:%a f; cat f; mkdir d; touch d/x; stat -c %u:%g:%a d d/x`)
	want := fmt.Sprintf("%d:%d:600\nhi\n%d:%d:700\n%d:%d:600", userA, groupA, userA, groupA, userA, groupA)
	if got != want {
		t.Fatalf("as nobody with umask 077:\n%s\nwant\n%s", got, want)
	}
	// Another user can't read, write or enter them.
	m.asFails(t, userB, groupB, nil, "cat f", "Permission denied")
	m.asFails(t, userB, groupB, nil, "touch d/y", "Permission denied")
	// And root's files are root's.
	if got := m.mustSh(t, "umask 022; echo r > r; stat -c %u:%g:%a r"); strings.TrimSpace(got) != "0:0:644" {
		t.Errorf("a file root creates: %s, want 0:0:644", got)
	}
}

// The second reproduction: modes are exactly what was set (0
// stays 0), and the kernel enforces them for every user but root.
func TestPermModesAreHonoured(t *testing.T) {
	m := mountPermTree(t, Options{})
	m.mustSh(t, "chmod 777 .; echo secret > s; chmod 000 s")
	if got := strings.TrimSpace(m.mustSh(t, "stat -c %a s")); got != "0" {
		t.Fatalf("stat -c %%a after chmod 000: %s, want 0", got)
	}
	m.asFails(t, userA, groupA, nil, "cat s", "Permission denied")
	// 0400: the owner may read, not write; others nothing.
	m.mustSh(t, "echo mine > o; chown 65534:65534 o; chmod 0400 o")
	if got := m.mustAs(t, userA, groupA, nil, "cat o"); got != "mine" {
		t.Errorf("owner reads a 0400 file: %q", got)
	}
	m.asFails(t, userA, groupA, nil, "echo x >> o", "Permission denied")
	m.asFails(t, userB, groupB, nil, "cat o", "Permission denied")
	// 0640 with a shared group: the group may read, not write.
	m.mustSh(t, fmt.Sprintf("echo team > g; chown %d:%d g; chmod 0640 g", userA, sharedGroup))
	if got := m.mustAs(t, userB, groupB, []int{sharedGroup}, "cat g"); got != "team" {
		t.Errorf("group member reads a 0640 file: %q", got)
	}
	m.asFails(t, userB, groupB, []int{sharedGroup}, "echo x >> g", "Permission denied")
	// 0600: neither the group nor others read it.
	m.mustSh(t, fmt.Sprintf("echo private > six; chown %d:%d six; chmod 0600 six", userA, sharedGroup))
	m.asFails(t, userB, groupB, []int{sharedGroup}, "cat six", "Permission denied")
	if got := m.mustAs(t, userA, groupA, nil, "cat six"); got != "private" {
		t.Errorf("owner reads a 0600 file: %q", got)
	}
	// 0700 folder: only its owner lists or enters it.
	m.mustSh(t, fmt.Sprintf("mkdir p; echo in > p/f; chown -R %d:%d p; chmod 0700 p", userA, groupA))
	if got := m.mustAs(t, userA, groupA, nil, "ls p"); got != "f" {
		t.Errorf("owner lists a 0700 folder: %q", got)
	}
	m.asFails(t, userB, groupB, nil, "ls p", "Permission denied")
	m.asFails(t, userB, groupB, nil, "cat p/f", "Permission denied")
	// Root reads whatever the modes say.
	if got := strings.TrimSpace(m.mustSh(t, "cat s")); got != "secret" {
		t.Errorf("root reads a 000 file: %q", got)
	}
}

// chmod, chown and utimens follow POSIX rules for who may do what.
func TestPermChmodChownRules(t *testing.T) {
	m := mountPermTree(t, Options{})
	m.mustSh(t, fmt.Sprintf("chmod 777 .; echo a > a; chown %d:%d a", userA, groupA))
	// The owner may chmod and touch; another user may not.
	m.mustAs(t, userA, groupA, nil, "chmod 0604 a; touch -d 2001-02-03 a")
	if got := strings.TrimSpace(m.mustSh(t, "stat -c %a:%y a")); !strings.HasPrefix(got, "604:2001-02-03") {
		t.Errorf("after the owner's chmod and touch: %s", got)
	}
	m.asFails(t, userB, groupB, nil, "chmod 0777 a", "Operation not permitted")
	m.asFails(t, userB, groupB, nil, "touch -d 2001-02-03 a", "Permission denied") // as on ext4: its open fails first
	// Only root gives a file away; the owner may change its group only to
	// a group it is in.
	m.asFails(t, userA, groupA, nil, fmt.Sprintf("chown %d a", userB), "Operation not permitted")
	m.asFails(t, userA, groupA, nil, fmt.Sprintf("chgrp %d a", sharedGroup), "Operation not permitted")
	m.mustAs(t, userA, groupA, []int{sharedGroup}, fmt.Sprintf("chgrp %d a", sharedGroup))
	if got := strings.TrimSpace(m.mustSh(t, "stat -c %u:%g a")); got != fmt.Sprintf("%d:%d", userA, sharedGroup) {
		t.Errorf("after chgrp to a group the owner is in: %s", got)
	}
	// chown by root, and a write by a non-owner, clear setuid/setgid.
	m.mustSh(t, "echo s > suid; chmod 4755 suid; chown 65534 suid")
	if got := strings.TrimSpace(m.mustSh(t, "stat -c %a suid")); got != "755" {
		t.Errorf("chown kept the setuid bit: %s", got)
	}
	m.mustSh(t, "echo w > w; chmod 6777 w")
	m.mustAs(t, userB, groupB, nil, "echo more >> w")
	if got := strings.TrimSpace(m.mustSh(t, "stat -c %a w")); got != "777" {
		t.Errorf("a write by another user kept setuid/setgid: %s", got)
	}
}

// A setgid folder gives new entries its group, and new folders its
// setgid bit; a sticky folder keeps users from removing others' files.
func TestPermSetgidAndStickyFolders(t *testing.T) {
	m := mountPermTree(t, Options{})
	m.mustSh(t, fmt.Sprintf("mkdir g; chgrp %d g; chmod 2777 g; mkdir k; chmod 1777 k", sharedGroup))
	got := m.mustAs(t, userA, groupA, nil, "umask 022; touch g/f; mkdir g/d; stat -c %g:%a g/f g/d")
	if want := fmt.Sprintf("%d:644\n%d:2755", sharedGroup, sharedGroup); got != want {
		t.Errorf("entries in a setgid folder:\n%s\nwant\n%s", got, want)
	}
	m.mustAs(t, userA, groupA, nil, "echo a > k/a")
	m.asFails(t, userB, groupB, nil, "rm -f k/a", "Operation not permitted")
	m.asFails(t, userB, groupB, nil, "mv k/a k/b", "Operation not permitted")
	m.mustAs(t, userA, groupA, nil, "rm k/a")
}

// --uid, --gid, --file-mode, --dir-mode and --umask set what files loaded
// from the store look like; a read-only store's files are never writable,
// whatever the modes say.
func TestPermOwnershipOptions(t *testing.T) {
	files := []File{{FileID: "mem_a", Path: "/a.md", Content: []byte("a\n")}, {FileID: "mem_b", Path: "/d/b.md", Content: []byte("b\n")}}
	m := mountPermTree(t, Options{Owner: Ownership{UID: userA, GID: groupA, FileMode: 0o666, DirMode: 0o777, Umask: 0o027}}, files...)
	got := m.mustSh(t, "stat -c %u:%g:%a . a.md d d/b.md .anthropic-memory-store")
	want := fmt.Sprintf("%[1]d:%[2]d:750\n%[1]d:%[2]d:640\n%[1]d:%[2]d:750\n%[1]d:%[2]d:640\n%[1]d:%[2]d:444", userA, groupA)
	if strings.TrimSpace(got) != want {
		t.Fatalf("stat of loaded entries:\n%s\nwant\n%s", got, want)
	}
	m.mustAs(t, userA, groupA, nil, "echo mine >> a.md; touch d/new")
	m.asFails(t, userB, groupB, nil, "cat a.md", "can't cd") // the root is 0750: others can't enter
	ro := mountPermTree(t, Options{ReadOnly: true, Owner: Ownership{UID: userA, GID: groupA, FileMode: 0o666, DirMode: 0o777}}, files...)
	ro.asFails(t, userA, groupA, nil, "echo x >> a.md", "Read-only file system")
	ro.asFails(t, userA, groupA, nil, "touch new", "Read-only file system")
	ro.asFails(t, userA, groupA, nil, "chmod 000 a.md", "Read-only file system")
	if got := ro.mustAs(t, userB, groupB, nil, "cat a.md"); got != "a" {
		t.Errorf("a read-only store's file: %q", got)
	}
}

// POSIX edges: a name over 255 bytes is ENAMETOOLONG wherever a path is
// taken, a folder's link count counts its subfolders.
func TestPermPosixEdges(t *testing.T) {
	m := mountPermTree(t, Options{}, File{FileID: "mem_a", Path: "/a.md", Content: []byte("a")})
	long := strings.Repeat("a", 256)
	for _, cmd := range []string{"stat " + long, "cat " + long, "rm " + long, "mkdir " + long, "mv a.md " + long, "touch " + long} {
		m.shFails(t, cmd, "File name too long")
	}
	m.mustSh(t, "mkdir -p x/y x/z; touch x/f")
	if got := strings.TrimSpace(m.mustSh(t, "stat -c %h x x/y . ")); got != "4\n2\n3" {
		t.Errorf("link counts of x (2 subfolders), x/y, the root (1 subfolder): %q", got)
	}
}
