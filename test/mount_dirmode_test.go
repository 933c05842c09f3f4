package test

import (
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// Directory mode alone (--mount-mode directory, README "Mount modes"):
// what only a plain folder can meet — memfs mount choosing it by itself
// where FUSE can't mount, a watch that overflows, a folder edited while
// no memfs ran, root writing past a read-only store's modes, a planted
// symbolic link, the folder or its marker removed. The tests that make
// sense in both modes run in both (mtModes).

// TestMountAutoWithoutFUSE: --mount-mode auto, in a mount namespace where
// /dev/fuse is /dev/null (it opens, and no mount works with it), writes
// the store into its mount path as a folder, after one warning that says
// why (FUSE can't mount) and what changes; the store's files are in the
// folder, and an edit reaches the store.
func TestMountAutoWithoutFUSE(t *testing.T) {
	mtRequireRoot(t, "unshare -m and mount --bind /dev/null /dev/fuse hide FUSE from memfs mount")
	for _, tool := range []string{"unshare", "mount", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (util-linux), and CI=true: this test hides /dev/fuse in a mount namespace with it", tool)
			}
			t.Skipf("%s is not installed (util-linux): %v", tool, err)
		}
	}
	files := map[string]string{"/a.md": "a\n", "/d/b.md": "b\n"}
	e := newMtEnvIn(t, "", files) // mode "": e.mount passes no --mount-mode; auto is given below
	o := e.opts("--mount-mode", "auto")
	o.Directory = true
	// unshare's new mount namespace is private: the bind mount stays in
	// it. sh execs memfs, so the process's pid is memfs's.
	o.Prefix = []string{"unshare", "-m", "sh", "-c", `mount --bind /dev/null /dev/fuse && exec "$0" "$@"`}
	m := harness.StartMount(t, o)
	if m.Dir != e.dir {
		t.Fatalf("memfs mount says it wrote the store at %s, want %s", m.Dir, e.dir)
	}

	warns := m.Lines("level=warning", "FUSE can't mount here")
	t.Logf("the warning: %s", strings.Join(warns, "\n"))
	if len(warns) != 1 {
		t.Fatalf("%d warnings that FUSE can't mount, want one:\n%s", len(warns), m.Output())
	}
	for _, s := range []string{
		"written into its mount path as a plain folder (directory mode)", // what it does instead
		"inotify watch and a rescan",                                     // what changes
		"a read-only store is protected by file modes only",
		"conflict log",
		"--mount-mode fuse", // how to refuse it
		"error=",            // why: the failed trial mount
	} {
		if !strings.Contains(warns[0], s) {
			t.Errorf("the warning does not say %q:\n%s", s, warns[0])
		}
	}
	if !strings.Contains(m.Output(), "memory store written to its folder (directory mode)") {
		t.Errorf("memfs mount does not say it wrote the store to a folder:\n%s", m.Output())
	}
	if got := mtMountFiles(t, m.Dir); !maps.Equal(got, files) {
		t.Fatalf("the folder does not hold the store's files:\n%s", mtDiff(got, files))
	}
	if got := mtMustSh(t, m.Dir, "cat .anthropic-memory-store"); got != "version 1\n"+e.storeID {
		t.Errorf("marker = %q", got)
	}

	mtMustSh(t, m.Dir, "echo edited > a.md && echo new > d/new.md")
	want := map[string]string{"/a.md": "edited\n", "/d/b.md": "b\n", "/d/new.md": "new\n"}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 2, "failed": 0, "left": 0})
	e.waitStore(want)
	mtStop(t, m)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, want))
	}
	if _, err := os.Lstat(m.Dir); !os.IsNotExist(err) {
		t.Errorf("the folder memfs mount made is still there after the end (%v)", err)
	}
}
