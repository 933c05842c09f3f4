package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memfs/memfs/store"
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

	var warns []string
	mtPoll(t, "the warning that FUSE can't mount", func() (bool, string) {
		warns = m.Lines("level=warning", "FUSE can't mount here")
		return len(warns) > 0, m.Output()
	})
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
	// The log (stderr) may trail the "mounted at" line (stdout): two pipes.
	mtPoll(t, "memfs mount says it wrote the store to a folder", func() (bool, string) {
		out := m.Output()
		return strings.Contains(out, "memory store written to its folder (directory mode)"), out
	})
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

// TestMountDirectoryEditedWhileKilled: memfs mount is killed (kill -9)
// and, while no memfs runs, the folder is edited (a file changed, one
// made, one removed) and the store changes too (one file the folder left
// as it was, one the folder changed as well). The next start of the same
// command takes the leftover folder up: the folder's changes go up; the
// store's change to an untouched file comes down with no conflict; where
// both changed, the store's version wins and the local one is in the
// conflict log.
func TestMountDirectoryEditedWhileKilled(t *testing.T) {
	files := map[string]string{"/edit.md": "edit v1\n", "/del.md": "del\n", "/remote.md": "remote v1\n", "/both.md": "both v1\n", "/keep.md": "keep\n"}
	e := newMtEnvIn(t, mtDirectory, files)
	before := e.memories()
	m := e.mount("--memory-sync-delete-delay", mtDeleteDelay)
	dir := m.Dir
	if got := mtMountFiles(t, dir); !maps.Equal(got, files) {
		t.Fatalf("the folder:\n%s", mtDiff(got, files))
	}
	// The kill comes once the baseline records every file the worker
	// wrote (it is saved at most once a second).
	mtWaitBaseline(t, e.stateDir, e.storeID, files)
	m.Kill()

	mtMustSh(t, dir, `echo "edit v2 (offline)" > edit.md && mkdir d && echo made offline > d/new.md && rm del.md && echo "both: local" > both.md`)
	for p, c := range map[string]string{"/remote.md": "remote v2 (store)\n", "/both.md": "both: store\n"} {
		if _, err := e.cl.UpdateMemory(context.Background(), e.storeID, before[p].ID, store.UpdateMemoryInput{Content: &c}); err != nil {
			t.Fatal(err)
		}
	}

	m2 := e.mount("--memory-sync-delete-delay", mtDeleteDelay) // the same command, on the leftover folder
	local := map[string]string{"/edit.md": "edit v2 (offline)\n", "/d/new.md": "made offline\n", "/remote.md": "remote v2 (store)\n", "/both.md": "both: store\n", "/keep.md": "keep\n"}
	// Before any pass: the store's change to the untouched file is down,
	// and both.md still holds the local edit, journaled against what
	// both sides last agreed on.
	pre := maps.Clone(local)
	pre["/both.md"] = "both: local\n"
	mtPoll(t, "the folder to hold the offline edits and the store's change to remote.md", func() (bool, string) {
		got := mtMountFiles(t, dir)
		return maps.Equal(got, pre), mtDiff(got, pre)
	})
	e.checkSynced(m2, pre, true)
	// The pass: the edits go up, both.md's is refused (made on what the
	// store no longer holds), and the store's version wins.
	mtCheckPass(t, m2.SyncNow(mtPassTimeout), map[string]int{"uploaded": 2, "left": 1}) // edit.md, d/new.md; del.md's delete waits
	m2.WaitOutput(1, "conflict: the store's version won", mtPollTimeout)
	mtPoll(t, "the store's both.md to win in the folder", func() (bool, string) {
		got := mtMountFiles(t, dir)
		return maps.Equal(got, local), mtDiff(got, local)
	})
	e.checkSynced(m2, pre, true) // the local both.md: in the conflict log now
	mtLetDeleteDelayPass()
	mtCheckPass(t, m2.SyncNow(mtPassTimeout), map[string]int{"failed": 0, "left": 0})
	e.waitStore(local)

	after := e.memories()
	for _, p := range []string{"/edit.md", "/remote.md", "/both.md", "/keep.md"} {
		if after[p].ID != before[p].ID {
			t.Errorf("%s: memory %s, want %s (kept)", p, after[p].ID, before[p].ID)
		}
	}
	e.checkOps("/edit.md", after["/edit.md"].ID, "created", "modified")
	e.checkOps("/remote.md", after["/remote.md"].ID, "created", "modified")
	e.checkOps("/both.md", after["/both.md"].ID, "created", "modified") // the store's edit; the local one lost
	e.checkOps("/keep.md", after["/keep.md"].ID, "created")
	cs := cvConflicts(t, e.stateDir)
	if len(cs) != 1 || cs[0].path != "/both.md" || !strings.HasPrefix(store.SHA256Hex("both: local\n"), cs[0].localSHA) {
		t.Fatalf("conflicts %+v, want the local /both.md alone", cs)
	}
	if got := cvShow(t, e.stateDir, cs[0].id); got != "both: local\n" {
		t.Errorf("the conflict of /both.md keeps %q, want the local version", got)
	}
	mtStop(t, m2)
	if got := e.contents(); !maps.Equal(got, local) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, local))
	}
}

// mtWaitBaseline polls the directory baseline of storeID in stateDir
// (dirmode/baseline.go: a checksum line, then JSON) until it records
// every path of files with its content's sha256.
func mtWaitBaseline(t *testing.T, stateDir, storeID string, files map[string]string) {
	t.Helper()
	p := filepath.Join(stateDir, "directories", storeID, "baseline")
	mtPoll(t, "the directory baseline to record every file", func() (bool, string) {
		b, err := os.ReadFile(p)
		if err != nil {
			return false, err.Error()
		}
		_, body, _ := strings.Cut(string(b), "\n")
		var bl struct {
			Files []struct {
				Path string `json:"path"`
				SHA  string `json:"sha256"`
			} `json:"files"`
		}
		if err := json.Unmarshal([]byte(body), &bl); err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		for _, f := range bl.Files {
			got[f.Path] = f.SHA
		}
		for path, c := range files {
			if got[path] != store.SHA256Hex(c) {
				return false, fmt.Sprintf("%s: %q recorded, want the sha256 of %q\n%s", path, got[path], c, body)
			}
		}
		return true, ""
	})
}

// TestMountDirectoryKilledBeforeBaselineSaved: the baseline is saved at
// most once a second, so a kill -9 can leave a file the worker wrote
// without its record. Made so here (the record taken out of the baseline
// the kill left), the store then changes that file: at the next start the
// folder's copy, the store's old content, must not be taken for a local
// edit that overwrites the store's change: the store keeps its version,
// which comes down.
func TestMountDirectoryKilledBeforeBaselineSaved(t *testing.T) {
	files := map[string]string{"/remote.md": "remote v1\n", "/keep.md": "keep\n"}
	e := newMtEnvIn(t, mtDirectory, files)
	id := e.memories()["/remote.md"].ID
	m := e.mount()
	mtWaitBaseline(t, e.stateDir, e.storeID, files)
	m.Kill()
	mtDropFromBaseline(t, e.stateDir, e.storeID, "/remote.md")
	v2 := "remote v2 (store)\n"
	if _, err := e.cl.UpdateMemory(context.Background(), e.storeID, id, store.UpdateMemoryInput{Content: &v2}); err != nil {
		t.Fatal(err)
	}

	m2 := e.mount()
	mtCheckPass(t, m2.SyncNow(mtPassTimeout), map[string]int{"left": 0})
	want := map[string]string{"/remote.md": v2, "/keep.md": "keep\n"}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store's change was overwritten by the folder's old copy:\n%s", mtDiff(got, want))
	}
	mtPoll(t, "the store's remote.md in the folder", func() (bool, string) {
		got := mtMountFiles(t, m2.Dir)
		return maps.Equal(got, want), mtDiff(got, want)
	})
	// The folder's copy may be kept as a conflict (memfs can't tell it
	// from an edit made on an older version): only as that, nothing else.
	for _, c := range cvConflicts(t, e.stateDir) {
		if got := cvShow(t, e.stateDir, c.id); c.path != "/remote.md" || got != "remote v1\n" {
			t.Errorf("conflict %+v keeps %q, want none but the folder's old /remote.md", c, got)
		}
	}
	mtStop(t, m2)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, want))
	}
}

// mtDropFromBaseline rewrites the directory baseline of storeID without
// the record of path p (a checksum line, then JSON; dirmode/baseline.go).
func mtDropFromBaseline(t *testing.T, stateDir, storeID, p string) {
	t.Helper()
	bp := filepath.Join(stateDir, "directories", storeID, "baseline")
	b, err := os.ReadFile(bp)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(b), "\n")
	var bl map[string]any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber() // inodes and nanoseconds, exactly
	if err := dec.Decode(&bl); err != nil {
		t.Fatal(err)
	}
	files, _ := bl["files"].([]any)
	var kept []any
	for _, f := range files {
		if r, _ := f.(map[string]any); r["path"] != p {
			kept = append(kept, f)
		}
	}
	if len(kept) == len(files) {
		t.Fatalf("the baseline holds no record of %s:\n%s", p, body)
	}
	bl["files"] = kept
	nb, err := json.Marshal(bl)
	if err != nil {
		t.Fatal(err)
	}
	magic := head[:strings.LastIndexByte(head, ' ')+1] // "memfs-directory-baseline 1 "
	sum := sha256.Sum256(nb)
	if err := os.WriteFile(bp, []byte(magic+hex.EncodeToString(sum[:])+"\n"+string(nb)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMountDirectoryReadOnlyRestored: a read-only store's folder, changed
// by root past its modes — a file written, one made writable (chmod +w),
// one added, one removed — is put back from the store at the next look
// (a SIGUSR1 pass), each with a warning; nothing is uploaded.
func TestMountDirectoryReadOnlyRestored(t *testing.T) {
	mtRequireRoot(t, "root's writes past the modes are what a read-only store's folder must undo")
	files := map[string]string{"/w.md": "written\n", "/c.md": "chmod\n", "/r.md": "removed\n", "/d/k.md": "kept\n"}
	e := newMtEnvIn(t, mtDirectory, files)
	ids := map[string]string{}
	for p, m := range e.memories() {
		ids[p] = m.ID
	}
	m := e.mount("--read-only")
	if got := mtMustSh(t, m.Dir, "stat -c '%a %U' w.md c.md r.md d/k.md d"); got != "444 root\n444 root\n444 root\n444 root\n555 root\n" {
		t.Errorf("modes and owners: %q, want the worker's (root), write bits off", got)
	}
	mtMustSh(t, m.Dir, "echo root was here > w.md && chmod +w c.md && echo added > added.md && rm r.md")
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "deleted": 0, "failed": 0, "left": 0})
	mtPoll(t, "the folder to be the store's again", func() (bool, string) {
		got := mtMountFiles(t, m.Dir)
		modes, _, _ := mtSh(t, m.Dir, "stat -c %a w.md c.md r.md d/k.md 2>&1")
		return maps.Equal(got, files) && modes == "444\n444\n444\n444\n", mtDiff(got, files) + "modes: " + modes
	})
	for _, w := range []struct{ path, says string }{
		{"/w.md", "a file of a read-only store was changed: it is put back from the store, and nothing is uploaded"},
		{"/c.md", "a file of a read-only store was changed: it is put back from the store, and nothing is uploaded"},
		{"/r.md", "a file of a read-only store was removed: it is put back from the store, and nothing is uploaded"},
		{"/added.md", "a file was added to a read-only store's folder: it is removed, and nothing is uploaded"},
	} {
		if n := len(m.Lines("level=warning", w.says, "memory_path="+w.path+" ")); n != 1 {
			t.Errorf("%d warnings %q for %s, want 1:\n%s", n, w.says, w.path, m.Output())
		}
	}
	if ms := stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir); len(ms.Sync.Pending) != 0 || !ms.Sync.ReadOnly {
		t.Errorf("memfs status: read_only %v, pending %+v; want read-only, nothing pending", ms.Sync.ReadOnly, ms.Sync.Pending)
	}
	mtStop(t, m)
	if got := e.contents(); !maps.Equal(got, files) {
		t.Errorf("the store changed:\n%s", mtDiff(got, files))
	}
	for p, id := range ids {
		e.checkOps(p, id, "created")
	}
}

// TestMountDirectorySymlink: a symbolic link planted in the folder,
// pointing outside it (to a file, to a folder), is neither followed nor
// uploaded: its target is unchanged, the store holds nothing of it, and
// memfs status lists it as not uploaded. A remote change at the link's
// path replaces the link itself, never its target; one below the linked
// folder is not written through it.
func TestMountDirectorySymlink(t *testing.T) {
	e := newMtEnvIn(t, mtDirectory, map[string]string{"/a.md": "a\n"})
	outside := t.TempDir()
	target := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(target, []byte("outside the store\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	targetDir := filepath.Join(outside, "dir")
	if err := os.Mkdir(targetDir, 0o700); err != nil {
		t.Fatal(err)
	}
	m := e.mount()
	if err := os.Symlink(target, filepath.Join(m.Dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(targetDir, filepath.Join(m.Dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 0, "left": 0})
	want := map[string]string{"/a.md": "a\n"}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store holds something of the links:\n%s", mtDiff(got, want))
	}
	notUp := map[string]string{}
	for _, c := range stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir).Sync.Pending {
		notUp[c.Path] = c.Op + ": " + c.Reason + " " + c.Error
	}
	for _, p := range []string{"/link.md", "/linkdir"} {
		if !strings.Contains(notUp[p], "a symbolic link: never followed or uploaded") {
			t.Errorf("memfs status does not list %s as a link not uploaded: %v", p, notUp)
		}
	}

	// The store gets a file at the link's path, and one below the linked
	// folder's.
	for _, p := range []string{"/link.md", "/linkdir/x.md"} {
		if _, err := e.cl.CreateMemory(context.Background(), e.storeID, p, "from the store: "+p+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	mtPoll(t, "link.md to be the store's file", func() (bool, string) {
		fi, err := os.Lstat(filepath.Join(m.Dir, "link.md"))
		if err != nil || !fi.Mode().IsRegular() {
			return false, fmt.Sprintf("%v %v", fi, err)
		}
		b, err := os.ReadFile(filepath.Join(m.Dir, "link.md"))
		return err == nil && string(b) == "from the store: /link.md\n", string(b)
	})
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 0, "left": 0})
	if b, err := os.ReadFile(target); err != nil || string(b) != "outside the store\n" {
		t.Errorf("the link's target holds %q (%v), want it unchanged", b, err)
	}
	if names, err := os.ReadDir(targetDir); err != nil || len(names) != 0 {
		t.Errorf("the linked folder holds %v (%v): a remote change was written through the link", names, err)
	}
	if fi, err := os.Lstat(filepath.Join(m.Dir, "linkdir")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("linkdir: %v %v, want the planted link left as it is", fi, err)
	}
	want = map[string]string{"/a.md": "a\n", "/link.md": "from the store: /link.md\n", "/linkdir/x.md": "from the store: /linkdir/x.md\n"}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store:\n%s", mtDiff(got, want))
	}
	// The end: the planted link, never uploaded by design, is no change
	// lost: it stays in the folder (with the marker), and the exit is 0.
	m.Signal(syscall.SIGINT)
	if code := m.Wait(mtExitTimeout); code != 0 {
		t.Errorf("memfs mount exited %d after SIGINT, want 0: the planted link, never to be uploaded, is counted as a change the journal could not take:\n%s",
			code, strings.Join(m.Lines("level=error"), "\n"))
	}
	if fi, err := os.Lstat(filepath.Join(m.Dir, "linkdir")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("after the end linkdir is %v (%v), want the planted link left in the folder", fi, err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "outside the store\n" {
		t.Errorf("after the end the link's target holds %q (%v), want it unchanged", b, err)
	}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, want))
	}
}

// TestMountDirectoryFolderRemoved: the store's folder removed while
// mounted (rm -rf) is made again and downloaded again at the next look,
// and nothing is deleted in the store; so with the marker removed, with
// files gone with it: the marker is written again, the files come back.
// The removals are made while memfs mount is stopped, so that no look
// sees them half done.
func TestMountDirectoryFolderRemoved(t *testing.T) {
	files := map[string]string{"/a.md": "a\n", "/d/b.md": "b\n", "/d/e/c.md": "c\n", "/f.md": "f\n"}
	e := newMtEnvIn(t, mtDirectory, files)
	m := e.mount("--memory-sync-delete-delay", mtDeleteDelay)
	dir := m.Dir
	back := func(what string) {
		t.Helper()
		mtPoll(t, "the store's files back in the folder after "+what, func() (bool, string) {
			got := mtMountFiles(t, dir)
			marker, err := os.ReadFile(filepath.Join(dir, ".anthropic-memory-store"))
			return maps.Equal(got, files) && err == nil && string(marker) == "version 1\n"+e.storeID, mtDiff(got, files) + fmt.Sprintf("marker %q %v", marker, err)
		})
	}
	twoPasses := func() {
		t.Helper()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "failed": 0})
		mtLetDeleteDelayPass()
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"deleted": 0, "failed": 0})
		if got := e.contents(); !maps.Equal(got, files) {
			t.Fatalf("the store lost memories:\n%s", mtDiff(got, files))
		}
	}

	mtPaused(t, m, func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	})
	twoPasses()
	back("rm -rf of the folder")
	m.WaitOutput(1, "the store's folder was removed or replaced", mtPollTimeout)
	e.checkSynced(m, files, true)

	mtPaused(t, m, func() {
		mtMustSh(t, dir, "rm .anthropic-memory-store a.md && rm -r d")
	})
	twoPasses()
	back("the marker removed with files")
	m.WaitOutput(1, "the marker file of the store's folder is missing", mtPollTimeout)
	e.checkSynced(m, files, true)

	mtStop(t, m)
	if got := e.contents(); !maps.Equal(got, files) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, files))
	}
}
