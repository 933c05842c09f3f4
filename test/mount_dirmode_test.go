package test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// mtPaused runs f with memfs mount stopped (SIGSTOP, every thread seen
// stopped in /proc), and lets it go on after (SIGCONT), even if f fails
// the test. What f does to the folder lands between two looks, as it
// would on a machine slow enough, whatever this machine's speed: no look
// sees it half done.
func mtPaused(t *testing.T, m *harness.Mount, f func()) {
	t.Helper()
	m.Signal(syscall.SIGSTOP)
	defer m.Signal(syscall.SIGCONT)
	mtPoll(t, "memfs mount to be stopped", func() (bool, string) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", m.Pid()))
		if err != nil || len(tasks) == 0 {
			return false, fmt.Sprintf("no tasks (%v)", err)
		}
		for _, p := range tasks {
			b, err := os.ReadFile(p)
			if err != nil {
				return false, err.Error()
			}
			// pid (comm) STATE ...: comm may hold spaces, STATE follows the last ')'.
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) == 0 || (f[0] != "T" && f[0] != "t") {
				return false, p + ": " + s
			}
		}
		return true, ""
	})
	f()
}

// mtSetSysctl writes value to the /proc/sys file p and returns a func
// that puts the old value back (also run at the test's end).
func mtSetSysctl(t *testing.T, p, value string) (restore func()) {
	t.Helper()
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		t.Fatalf("set %s to %s: %v", p, value, err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := os.WriteFile(p, old, 0o644); err != nil {
				t.Errorf("put %s back to %s: %v", p, strings.TrimSpace(string(old)), err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}

// TestMountDirectoryWatchOverflow: the folder's inotify queue overflows
// (16 events at most, set just for the mount's inotify_init: the queue's
// size is fixed then) under ~200 changes made while memfs mount could not
// read it: every change still reaches the store, and the log says the
// watch overflowed.
func TestMountDirectoryWatchOverflow(t *testing.T) {
	mtRequireRoot(t, "the inotify queue's size is a sysctl")
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("/old/%02d.md", i)] = fmt.Sprintf("old %d\n", i)
	}
	e := newMtEnvIn(t, mtDirectory, files)
	restore := mtSetSysctl(t, "/proc/sys/fs/inotify/max_queued_events", "16")
	m := e.mount("--memory-sync-delete-delay", mtDeleteDelay)
	restore() // "mounted" is printed after the watch began: its queue is 16 long

	// A folder the worker made (old/, at its first download) is watched
	// from the look after it: a pass's look makes sure every folder is,
	// so that the changes below do reach the queue (and overflow it).
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 0, "left": 0})
	want := maps.Clone(files)
	mtPaused(t, m, func() {
		// 160 new files, 30 edits, 10 deletes: 200 changes, ~500 events.
		mtMustSh(t, m.Dir, `mkdir -p new/a new/b &&
			i=0; while [ $i -lt 160 ]; do echo "new $i" > new/$((i % 2 == 0 ? 0 : 1))-$i.md; i=$((i+1)); done &&
			i=0; while [ $i -lt 30 ]; do echo "edited $i" > old/$(printf %02d $i).md; i=$((i+1)); done &&
			i=30; while [ $i -lt 40 ]; do rm old/$i.md; i=$((i+1)); done`)
	})
	for i := range 160 {
		want[fmt.Sprintf("/new/%d-%d.md", i%2, i)] = fmt.Sprintf("new %d\n", i)
	}
	for i := range 30 {
		want[fmt.Sprintf("/old/%02d.md", i)] = fmt.Sprintf("edited %d\n", i)
	}
	for i := 30; i < 40; i++ {
		delete(want, fmt.Sprintf("/old/%02d.md", i))
	}
	if got := mtMountFiles(t, m.Dir); !maps.Equal(got, want) {
		t.Fatalf("the folder after the changes:\n%s", mtDiff(got, want))
	}
	m.WaitOutput(1, "the folder's watch overflowed", mtPollTimeout)

	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 190, "deleted": 0, "failed": 0, "left": 10})
	e.checkSynced(m, want, true)
	mtLetDeleteDelayPass()
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 10, "failed": 0, "left": 0})
	e.waitStore(want)
	mtStop(t, m)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, want))
	}
}
