package test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/test/harness"
)

// These tests run real `memfs serve` and real `memfs mount` processes:
// people's shell commands go through the kernel's FUSE mount, the mount
// process talks to the server over loopback HTTP, and the tests check the
// store with the Go client. The sync interval is 60 s everywhere and the
// quiet trigger off (harness.Main), so the only sync passes are the ones a
// test asks for with SIGUSR1 (and the final one at SIGINT): what each pass
// does is deterministic.

// TestMountShellFlows: what a person does in a shell on the mount reaches
// the store, and Ctrl-C ends it cleanly; in both modes.
func TestMountShellFlows(t *testing.T) { mtInModes(t, testMountShellFlows) }

func testMountShellFlows(t *testing.T, mode string) {
	e := newMtEnvIn(t, mode, map[string]string{
		"/keep.md":                     "keep\n",
		"/notes/todo.md":               "- buy milk\n- call Bob\n",
		"/notes/ideas.md":              "idea: fuse\n",
		"/projects/alpha/readme.md":    "# alpha\nneedle in alpha\n",
		"/projects/alpha/notes/log.md": "day 1\n",
		"/old/a.md":                    "old a\n",
		"/old/deep/b.md":               "needle in old\n",
	})
	before := e.memories()
	m := e.mount("--memory-sync-delete-delay", mtDeleteDelay)
	dir := m.Dir

	if got := mtMustSh(t, dir, "ls"); got != "keep.md\nnotes\nold\nprojects\n" {
		t.Errorf("ls = %q", got)
	}
	if got := mtMustSh(t, dir, "ls -a"); !strings.Contains(got, ".anthropic-memory-store\n") {
		t.Errorf("ls -a does not show the marker file: %q", got)
	}
	if got := mtMustSh(t, dir, "cat .anthropic-memory-store"); got != "version 1\n"+e.storeID {
		t.Errorf("marker = %q", got)
	}
	if got := mtMustSh(t, dir, "cat notes/todo.md"); got != "- buy milk\n- call Bob\n" {
		t.Errorf("cat notes/todo.md = %q", got)
	}
	if got := mtMustSh(t, dir, "grep -r needle . | sort"); got != "./old/deep/b.md:needle in old\n./projects/alpha/readme.md:needle in alpha\n" {
		t.Errorf("grep -r = %q", got)
	}
	// sed -i writes a temporary file and renames it over the target.
	mtMustSh(t, dir, "sed -i 's/milk/oat milk/' notes/todo.md")
	if got := mtMustSh(t, dir, "cat notes/todo.md"); got != "- buy oat milk\n- call Bob\n" {
		t.Errorf("after sed -i: %q", got)
	}
	// An editor's save: write a temporary file, rename it over the target.
	mtMustSh(t, dir, `printf 'idea: fuse\nidea: journal\n' > notes/.ideas.md.swp && mv -f notes/.ideas.md.swp notes/ideas.md`)
	mtMustSh(t, dir, "cp -r projects/alpha projects/beta")
	mtMustSh(t, dir, "rm -r old")
	mtMustSh(t, dir, "echo fresh > notes/new.md && mkdir empty")
	want := map[string]string{
		"/keep.md":                     "keep\n",
		"/notes/todo.md":               "- buy oat milk\n- call Bob\n",
		"/notes/ideas.md":              "idea: fuse\nidea: journal\n",
		"/notes/new.md":                "fresh\n",
		"/projects/alpha/readme.md":    "# alpha\nneedle in alpha\n",
		"/projects/alpha/notes/log.md": "day 1\n",
		"/projects/beta/readme.md":     "# alpha\nneedle in alpha\n",
		"/projects/beta/notes/log.md":  "day 1\n",
	}
	if got := mtMountFiles(t, dir); !maps.Equal(got, want) {
		t.Fatalf("the mount does not show what the shell did:\n%s", mtDiff(got, want))
	}

	// First pass: the uploads; the deletes are only noted (a delete needs
	// a later pass to confirm it).
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 5, "deleted": 0, "failed": 0, "left": 2})
	if got := e.contents(); got["/old/a.md"] != "old a\n" || got["/old/deep/b.md"] != "needle in old\n" {
		t.Errorf("a delete was sent by the pass that first saw it:\n%s", mtDiff(got, want))
	}
	e.checkSynced(m, want, true)
	mtLetDeleteDelayPass()
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "deleted": 2, "failed": 0, "left": 0})
	e.waitStore(want)

	after := e.memories()
	for _, p := range []string{"/notes/todo.md", "/notes/ideas.md"} {
		if after[p].ID != before[p].ID {
			t.Errorf("%s: memory id %s after the save, want %s (kept)", p, after[p].ID, before[p].ID)
		}
		e.checkOps(p, after[p].ID, "created", "modified")
	}
	for _, p := range []string{"/projects/beta/readme.md", "/projects/beta/notes/log.md", "/notes/new.md"} {
		e.checkOps(p, after[p].ID, "created")
	}
	if got := mtMustSh(t, dir, "ls"); got != "empty\nkeep.md\nnotes\nprojects\n" {
		t.Errorf("ls after the syncs = %q (the empty directory stays local)", got)
	}

	// Written and renamed after the last pass: Ctrl-C's final sync
	// uploads them; the renamed file keeps its memory.
	mtMustSh(t, dir, "echo last > notes/last.md && mv keep.md kept.md")
	want["/notes/last.md"] = "last\n"
	delete(want, "/keep.md")
	want["/kept.md"] = "keep\n"
	mtStop(t, m)
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount directory memfs mount created is still there (%v)", err)
	}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store after the end:\n%s", mtDiff(got, want))
	}
	if id := e.memories()["/kept.md"].ID; id != before["/keep.md"].ID {
		t.Errorf("/kept.md: memory id %s after mv, want %s (kept)", id, before["/keep.md"].ID)
	}
}

// TestMountKill9: files closed on the mount survive kill -9 of memfs
// mount: the next mount with the same state dir shows them and uploads
// them. In both modes: a FUSE mount is left stale and detached (umount
// -l), a directory keeps the files, and the next start takes it up.
func TestMountKill9(t *testing.T) { mtInModes(t, testMountKill9) }

func testMountKill9(t *testing.T, mode string) {
	e := newMtEnvIn(t, mode, map[string]string{"/existing.md": "v1\n"})
	before := e.memories()
	m := e.mount()
	dir := m.Dir

	big := strings.Repeat("line of a large note ✓\n", 2000) // 50,000 bytes
	src := filepath.Join(t.TempDir(), "big.md")
	if err := os.WriteFile(src, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	mtMustSh(t, dir, `printf 'alpha' > a.md &&
		mkdir -p deep/er && printf 'ünïcødé ✓\n' > deep/er/u.md &&
		cp "$1" deep/big.md &&
		printf 'v2\n' > existing.md &&
		echo moved > tmp.md && mv tmp.md moved.md`, src)
	want := map[string]string{
		"/a.md":         "alpha",
		"/deep/er/u.md": "ünïcødé ✓\n",
		"/deep/big.md":  big,
		"/existing.md":  "v2\n",
		"/moved.md":     "moved\n",
	}
	// Every change is journaled before the kill: at its close on FUSE, at
	// the folder's next look in a directory (the watch asks for one).
	mtPoll(t, "memfs status to list the 5 changes as pending", func() (bool, string) {
		ps := stStatus(t, "--state-dir", e.stateDir).mount(t, dir).Sync.Pending
		got := map[string]bool{}
		for _, c := range ps {
			got[c.Path] = c.Reason != ""
		}
		return len(ps) == 5 && got["/a.md"] && got["/deep/er/u.md"] && got["/deep/big.md"] && got["/existing.md"] && got["/moved.md"], fmt.Sprintf("%+v", ps)
	})

	m.Kill()
	if got := e.contents(); !maps.Equal(got, map[string]string{"/existing.md": "v1\n"}) {
		t.Fatalf("something was synced before the kill; the test needs the journal alone:\n%v", got)
	}
	if e.directory() {
		// Nothing to detach: the folder keeps what was written in it.
		if got := mtMountFiles(t, dir); !maps.Equal(got, want) {
			t.Fatalf("the folder after kill -9:\n%s", mtDiff(got, want))
		}
	} else {
		if !harness.IsMounted(dir) {
			t.Fatalf("after kill -9 the stale mount is expected in /proc/self/mountinfo")
		}
		// What an operator does with a stale mount: umount -l.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Fatalf("umount -l %s: %v", dir, err)
		}
		if harness.IsMounted(dir) {
			t.Fatalf("%s still mounted after the lazy detach", dir)
		}
	}

	m2 := e.mount() // same state dir, same directory (empty now on FUSE, the leftover folder in directory mode)
	m2.WaitOutput(1, "replaying changes a previous run left in the journal", mtPollTimeout)
	if got := mtMountFiles(t, dir); !maps.Equal(got, want) {
		t.Fatalf("the new mount does not show the closed files:\n%s", mtDiff(got, want))
	}
	// The journal left behind goes up at once after the mount, without
	// waiting for the interval (60 s here) or a SIGUSR1 pass.
	e.waitStore(want)
	mtCheckPass(t, m2.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 0, "left": 0})
	after := e.memories()
	if after["/existing.md"].ID != before["/existing.md"].ID {
		t.Errorf("/existing.md changed id: %s, want %s", after["/existing.md"].ID, before["/existing.md"].ID)
	}
	e.checkOps("/existing.md", after["/existing.md"].ID, "created", "modified")
	for _, p := range []string{"/a.md", "/deep/er/u.md", "/deep/big.md", "/moved.md"} {
		e.checkOps(p, after[p].ID, "created")
	}
	if cs := cvConflicts(t, e.stateDir); len(cs) != 0 {
		t.Errorf("conflicts after the restart: %+v, want none", cs)
	}

	mtStop(t, m2)
	// The second process did not create the directory: it stays, empty.
	if names, err := os.ReadDir(dir); err != nil || len(names) != 0 {
		t.Errorf("the mount directory after the end: %v, %v (want it kept, empty)", names, err)
	}
}

// TestMountStoreOutage: with memfs serve down the mount keeps serving, a
// pass fails and keeps everything journaled, and once the server is back
// everything goes up exactly once.
func TestMountStoreOutage(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/base.md": "base\n"})
	before := e.memories()
	m := e.mount()
	dir := m.Dir

	e.serve.Stop()
	mtMustSh(t, dir, `echo one > a.md && mkdir -p d/e && echo two > d/e/b.md && echo changed > base.md`)
	want := map[string]string{"/base.md": "changed\n", "/a.md": "one\n", "/d/e/b.md": "two\n"}
	if got := mtMountFiles(t, dir); !maps.Equal(got, want) {
		t.Fatalf("the mount does not serve the writes while the store is down:\n%s", mtDiff(got, want))
	}
	line := m.SyncNow(mtPassTimeout)
	if c := mtPassCounts(t, line); c["uploaded"] != 0 || c["failed"] == 0 || c["left"] != 3 {
		t.Errorf("pass with the store down: %s (want uploaded=0, failed>0, left=3)", line)
	}
	m.WaitOutput(1, "store unreachable", mtPollTimeout)
	if got := mtMountFiles(t, dir); !maps.Equal(got, want) {
		t.Fatalf("after the failed pass the mount changed:\n%s", mtDiff(got, want))
	}

	e.serve.Restart()
	if got := e.contents(); !maps.Equal(got, map[string]string{"/base.md": "base\n"}) {
		t.Fatalf("the store changed while it was down:\n%v", got)
	}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 3, "failed": 0, "left": 0})
	e.waitStore(want)
	m.WaitOutput(1, "store recovered", mtPollTimeout)
	after := e.memories() // fails on a path listed twice
	if after["/base.md"].ID != before["/base.md"].ID {
		t.Errorf("/base.md changed id")
	}
	e.checkOps("/base.md", after["/base.md"].ID, "created", "modified")
	e.checkOps("/a.md", after["/a.md"].ID, "created")
	e.checkOps("/d/e/b.md", after["/d/e/b.md"].ID, "created")
	// Nothing more to do: another pass sends nothing.
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "deleted": 0, "failed": 0, "left": 0})
	mtStop(t, m)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("the store changed at the end:\n%s", mtDiff(got, want))
	}
}

// TestMountReadOnly: nothing on a --read-only mount can change, whatever
// tool tries. On FUSE the kernel refuses every write (EROFS). In a
// directory the files are the worker's with the write bits off: root's
// write succeeds, but the next look puts the store's file back (a file
// added is removed), and nothing is uploaded.
func TestMountReadOnly(t *testing.T) { mtInModes(t, testMountReadOnly) }

func testMountReadOnly(t *testing.T, mode string) {
	e := newMtEnvIn(t, mode, map[string]string{"/f.md": "content\n", "/dir/g.md": "g\n"})
	before := e.contents()
	versionsBefore := len(e.versions(e.memories()["/f.md"].ID))
	m := e.mount("--read-only")
	dir := m.Dir
	cmds := []string{
		"echo x > f.md",
		"echo x >> f.md",
		"echo x > new.md",
		"touch f.md",
		"rm f.md",
		"mv f.md g.md",
		"mkdir d",
		"chmod 600 f.md",
		"sed -i s/content/changed/ f.md",
		"truncate -s 0 f.md",
		"rm -r dir",
	}
	if e.directory() {
		mtRequireRoot(t, "root's writes past the modes are what a directory's read-only store must undo")
		if got := mtMustSh(t, dir, "stat -c %a f.md dir/g.md dir"); got != "444\n444\n555\n" {
			t.Errorf("modes of f.md, dir/g.md, dir: %q, want the write bits off (444, 444, 555)", got)
		}
		warned := 0
		for _, cmd := range cmds {
			if cmd == "touch f.md" {
				cmd = "touch -d @946684800 f.md" // an mtime the file put back can't have
			}
			mtMustSh(t, dir, cmd) // root passes the modes
			mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "deleted": 0, "failed": 0, "left": 0})
			mtPoll(t, fmt.Sprintf("the folder to be the store's again after %q", cmd), func() (bool, string) {
				got := mtMountFiles(t, dir)
				st, _, _ := mtSh(t, dir, "stat -c '%a %Y' f.md dir/g.md 2>&1")
				modes := strings.Fields(st)
				return maps.Equal(got, before) && len(modes) == 4 && modes[0] == "444" && modes[1] != "946684800" && modes[2] == "444",
					mtDiff(got, before) + "modes and mtimes: " + st
			})
			n := len(m.Lines("read-only store", "nothing is uploaded"))
			// An empty folder is no file: nothing to upload, nothing put back.
			if cmd != "mkdir d" && n <= warned {
				t.Errorf("after %q: %d warnings about a read-only store's file, want one more:\n%s", cmd, n, strings.Join(m.Lines("read-only store"), "\n"))
			}
			warned = n
		}
	} else {
		// The kernel refuses writes itself: the mount or its superblock is ro.
		if mo, so := harness.MountOptionsOf(dir); !slices.Contains(strings.Split(mo, ","), "ro") && !slices.Contains(strings.Split(so, ","), "ro") {
			t.Errorf("the kernel mount is not read-only: mount options %q, superblock options %q", mo, so)
		}
		for _, cmd := range cmds {
			out, errb, err := mtSh(t, dir, cmd)
			if err == nil {
				t.Errorf("%q succeeded on a read-only mount: %s", cmd, out)
				continue
			}
			if !strings.Contains(errb, "Read-only file system") {
				t.Errorf("%q: stderr %q, want \"Read-only file system\"", cmd, errb)
			}
		}
		if got := mtMountFiles(t, dir); !maps.Equal(got, before) {
			t.Errorf("the read-only mount changed:\n%s", mtDiff(got, before))
		}
		if got := mtMustSh(t, dir, "stat -c %a f.md"); got != "644\n" {
			t.Errorf("f.md mode %q after chmod on a read-only mount", got)
		}
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "deleted": 0, "failed": 0})
	}
	mtStop(t, m)
	if got := e.contents(); !maps.Equal(got, before) {
		t.Errorf("the store changed:\n%s", mtDiff(got, before))
	}
	if n := len(e.versions(e.memories()["/f.md"].ID)); n != versionsBefore {
		t.Errorf("/f.md has %d versions, want %d", n, versionsBefore)
	}
}

// TestMountBadInput: each mistake gets a clear error and a non-zero exit,
// and leaves nothing behind.
func TestMountBadInput(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	gone, err := e.cl.CreateStore(context.Background(), store.CreateStoreInput{Name: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.DeleteStore(context.Background(), gone.ID); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	nonEmpty := filepath.Join(base, "nonempty")
	if err := os.MkdirAll(filepath.Join(nonEmpty, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nonEmpty, "mine.txt"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(base, "file")
	if err := os.WriteFile(regular, []byte("a file\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	const wrongKey = "sk-memfs-wrong-key-9876543210"

	for _, tc := range []struct {
		name     string
		mutate   func(*harness.MountOptions)
		code     int // 0: any non-zero
		stderr   []string
		existing string // the mount point exists before and must be left as found
	}{
		{name: "store does not exist", mutate: func(o *harness.MountOptions) { o.Store = gone.ID },
			stderr: []string{gone.ID, "does not exist"}},
		{name: "wrong api key", mutate: func(o *harness.MountOptions) { o.APIKey = wrongKey },
			stderr: []string{"API key was refused", "\nhint: the server refused the API key"}},
		{name: "store service unreachable", mutate: func(o *harness.MountOptions) { o.URL = "http://127.0.0.1:1" },
			stderr: []string{"no answer from the server at http://127.0.0.1:1", "\nhint: is memfs serve running at http://127.0.0.1:1? (set MEMFS_API_URL or --api-url)"}},
		{name: "mount point not empty", mutate: func(o *harness.MountOptions) { o.Dir = nonEmpty },
			stderr: []string{nonEmpty, "not empty"}, existing: nonEmpty},
		{name: "mount point is a file", mutate: func(o *harness.MountOptions) { o.Dir = regular },
			stderr: []string{regular, "not a directory"}, existing: regular},
		{name: "interval under 5s", mutate: func(o *harness.MountOptions) { o.Args = append(o.Args, "--memory-sync-interval", "4s") },
			code: 2, stderr: []string{"--memory-sync-interval", "at least 5s"}},
		{name: "unknown deletions mode", mutate: func(o *harness.MountOptions) { o.Args = append(o.Args, "--memory-sync-deletions", "sometimes") },
			stderr: []string{`"sometimes"`, "enabled", "log_only", "disabled"}},
		{name: "missing store", mutate: func(o *harness.MountOptions) { o.Store = "" },
			code: 2, stderr: []string{"--store is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := e.opts()
			o.Dir = filepath.Join(t.TempDir(), "mnt")
			o.StateDir = filepath.Join(t.TempDir(), "state")
			tc.mutate(&o)
			var snap string
			if tc.existing != "" {
				snap = mtSnapshot(t, tc.existing)
			}
			code, stdout, stderr := harness.RunMount(t, o, mtExitTimeout)
			if code == 0 || (tc.code != 0 && code != tc.code) {
				t.Errorf("exit %d, want %s", code, map[bool]string{true: "non-zero", false: strconv.Itoa(tc.code)}[tc.code == 0])
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not say %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stdout+stderr, wrongKey) || strings.Contains(stdout+stderr, e.serve.AdminKey) {
				t.Errorf("the output shows an API key:\n%s%s", stdout, stderr)
			}
			if strings.Contains(stdout, "mounted at") {
				t.Errorf("it says it mounted: %s", stdout)
			}
			if harness.IsMounted(o.Dir) {
				t.Errorf("%s is mounted", o.Dir)
			}
			if tc.existing != "" {
				if got := mtSnapshot(t, tc.existing); got != snap {
					t.Errorf("%s was changed:\nbefore:\n%safter:\n%s", tc.existing, snap, got)
				}
			} else if _, err := os.Lstat(o.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the mount point %s was left behind (%v)", o.Dir, err)
			}
			if o.Store != "" {
				if _, err := os.Lstat(filepath.Join(o.StateDir, "stores", o.Store)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a journal directory was left for a mount that never happened (%v)", err)
				}
			}
		})
	}
	if got := e.contents(); !maps.Equal(got, map[string]string{"/a.md": "a\n"}) {
		t.Errorf("the store changed: %v", got)
	}
}

// TestMountJournalLocked: a second memfs mount of the same store with the
// same state dir is refused while the first runs, and the first keeps
// working.
func TestMountJournalLocked(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	m := e.mount()
	o := e.opts()
	o.Dir = filepath.Join(t.TempDir(), "second")
	code, _, stderr := harness.RunMount(t, o, mtExitTimeout)
	if code == 0 {
		t.Errorf("the second mount exited 0")
	}
	for _, s := range []string{"locked", "another memfs process", strconv.Itoa(m.Pid())} {
		if !strings.Contains(stderr, s) {
			t.Errorf("the second mount's error does not say %q:\n%s", s, stderr)
		}
	}
	if harness.IsMounted(o.Dir) {
		t.Errorf("the second mount point is mounted")
	}
	if _, err := os.Lstat(o.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the second mount point was left behind (%v)", err)
	}

	if !m.Running() || !harness.IsMounted(m.Dir) {
		t.Fatalf("the first mount is gone:\n%s", m.Output())
	}
	mtMustSh(t, m.Dir, "echo b > b.md && cat a.md > /dev/null")
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0, "left": 0})
	e.waitStore(map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
	mtStopWith(t, m, syscall.SIGTERM)
}
