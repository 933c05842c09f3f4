package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// statusExample is a report as a busy worker host would give it: a
// session's mount with changes waiting for every reason, a read-only
// mount, a dead mount, journals left behind and conflicts.
func statusExample(now time.Time) statusReport {
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	store := "memstore_06H2RH0TGR17NGP44DZEJBPVB8"
	busy := syncqueue.Status{StoreID: store, StoreName: "Customer preferences of the support team", PendingUploads: 7, PendingDeletes: 1, PendingUnjournaled: 1,
		JournalBytes: 123456, Content: syncqueue.ContentProgress{Fetched: 1200, Total: 3000}, Unreachable: true, NoSpace: true, AtCap: true, CapRetryAt: ago(-4 * time.Minute), LastSync: ago(12 * time.Second), LastErrorAt: ago(3 * time.Second),
		LastError: `update memory mem_06H2RH0THH3QWH8RMBA3RBDFB4: Post "http://10.0.0.12:8080/v1/memory_stores/memstore_06H2RH0TGR17NGP44DZEJBPVB8/memories/mem_06H2RH0THH3QWH8RMBA3RBDFB4": dial tcp 10.0.0.12:8080: connect: connection refused`,
		Damaged:   &syncqueue.DamageStatus{KeptAt: "/var/lib/memfs/stores/" + store + "/journal.corrupt-20260102T030405Z", LostBytes: 4096},
		Pending: []syncqueue.PendingChange{
			{Path: "/notes/unjournaled.md", Op: "unjournaled", Reason: syncqueue.ReasonNoSpace},
			{Path: "/notes/a.md", Op: "update", Reason: syncqueue.ReasonUnreachable},
			{Path: "/notes/new.md", Op: "create", Reason: syncqueue.ReasonCap},
			{Path: "/bin/blob", Op: "create", Reason: syncqueue.ReasonNotUTF8},
			{Path: "/projects/acme/notes.md", Op: "move", Reason: syncqueue.ReasonPath, Error: "path /projects/acme/notes.md is held by memory mem_06H2RH0THH3QWH8RMBA3RBDFB4"},
			{Path: "/old.md", Op: "delete", Reason: syncqueue.ReasonDeleteDelay},
			{Path: "/.agenttoolset-1", Op: "create", Reason: syncqueue.ReasonScratch, Until: now.Add(3 * time.Second)},
			{Path: "/.agenttoolset-2", Op: "create", Reason: syncqueue.ReasonScratch},
		}}
	return statusReport{
		StateDir: "/var/lib/memfs", StateDirs: []string{"/var/lib/memfs", "/var/lib/memfs/state"},
		Live: []worker.ProcessStatus{{PID: 4242, Command: "/usr/local/bin/memfs worker", StateDir: "/var/lib/memfs", Started: now.Add(-time.Hour),
			Mounts: []worker.MountStatus{
				{Dir: "/mnt/memory/customer-preferences", StoreID: store, StoreName: busy.StoreName, Access: "read_write", Mode: worker.ModeFUSE,
					MountLabels: worker.MountLabels{SessionID: "sesn_06H2RH0TGR17NGP44DZEJBPVB8", WorkID: "work_06H2RH0TGR17NGP44DZEJBPVB8"},
					Conflicts:   2, Sync: busy},
				{Dir: "/mnt/memory/handbook", StoreID: "memstore_06H2RH0TGR17NGP44DZEJBPVB9", StoreName: "Handbook", Access: "read_only",
					Sync: syncqueue.Status{ReadOnly: true}, Covered: []worker.MountCover{
						{Where: "over", MountPoint: "/mnt/memory/handbook", FSType: "ext4", Source: "/dev/sda1", Root: "/fake"},
						{Where: "inside", MountPoint: "/mnt/memory/handbook/sub", FSType: "tmpfs", Source: "none", Root: "/"},
					}},
			},
			Unmounted: []worker.UnmountedStore{{Dir: "/mnt/memory/notes", StoreID: "memstore_06H2RH0TGR17NGP44DZEJBPVB6",
				MountLabels: worker.MountLabels{SessionID: "sesn_06H2RH0TGR17NGP44DZEJBPVB8", WorkID: "work_06H2RH0TGR17NGP44DZEJBPVB8"},
				At:          now.Add(-time.Minute), Left: "nothing"}},
		}},
		DeadMounts: []mountEntry{{Dir: "/mnt/memory/gone", StoreID: "memstore_06H2RH0TGR17NGP44DZEJBPVB7", Fix: "umount -l /mnt/memory/gone"}},
		Left: []worker.LeftJournal{{StoreID: "memstore_06H2RH0TGR17NGP44DZEJBPVB7", Pending: 3, Deletes: 1, Bytes: 2048,
			DamagedBytes: 100, ModTime: now.Add(-5 * time.Minute)}},
		Conflicts: 2, ByStore: map[string]int{store: 2},
		Kept: []conflictEntry{
			{Conflict: syncqueue.Conflict{ID: "20260102T030405123Z-abcd1234", StoreID: store, Path: "/notes/a.md"}},
			{Conflict: syncqueue.Conflict{ID: "20260102T030406123Z-abcd1235", StoreID: store, Path: "/notes/b.md"}},
		},
	}
}

// The text form says every field of item 1 and keeps to 100 columns.
func TestStatusText(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	var b strings.Builder
	printStatus(&b, statusExample(now), now)
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > statusWidth {
			t.Errorf("a line of %d columns:\n%s", n, line)
		}
	}
	for _, want := range []string{
		"state dir /var/lib/memfs\nstate dir /var/lib/memfs/state\n",
		"/mnt/memory/customer-preferences\n",
		`store       memstore_06H2RH0TGR17NGP44DZEJBPVB8 "Customer preferences of the support team"`,
		"process     pid 4242 (memfs worker), since 14:04:05 (1h00m ago)",
		"access      read_write\n  mode        fuse\n  session     sesn_06H2RH0TGR17NGP44DZEJBPVB8, work item work_06H2RH0TGR17NGP44DZEJBPVB8",
		"pending     7 uploads (1 not journaled yet), 1 delete; journal 120.6 KiB",
		"content     1200 of 3000 memories fetched; the rest comes in the background, or when read",
		"now         STORE UNREACHABLE, STATE DIR FULL\n",
		"memory cap  REACHED: new files are tried again once a memory is deleted, or at 15:08:05\n",
		"last sync   15:03:53 (12s ago)",
		"last error  15:04:02 (3s ago): update memory mem_",
		"conflicts   2",
		"damaged     4.0 KiB unreadable in the journal at mount; copy kept at /var/lib/memfs/stores/",
		"    unjournaled  /notes/unjournaled.md    no space for the journal\n",
		"    update       /notes/a.md              store unreachable\n",
		"    create       /notes/new.md            the store is at its memory cap\n",
		"    create       /bin/blob                content is not UTF-8\n",
		"    move         /projects/acme/notes.md  path conflict: path /projects/acme/notes.md is held",
		"    delete       /old.md                  deletes wait 30 s and a confirming pass\n",
		"    create       /.agenttoolset-1         held: temporary name of the SDK's write tool\n" +
			"                                          uploaded after 15:04:08 unless renamed\n",
		"    create       /.agenttoolset-2         held: temporary name of the SDK's write tool\n" +
			"                                          uploaded 5s after the next pass unless renamed\n",
		"access      read_only\n  pending     - (read-only: nothing is uploaded)\n" +
			"  ERROR       something is mounted over the store's mount path:\n" +
			"              /mnt/memory/handbook (ext4 /dev/sda1[/fake])\n" +
			"              the agent may see files that are not the store's\n" +
			"  ERROR       something is mounted inside the store's mount path:\n" +
			"              /mnt/memory/handbook/sub (tmpfs none)\n" +
			"              the agent may see files that are not the store's\n" +
			"  last sync   -\n",
		"  /mnt/memory/gone  memstore_06H2RH0TGR17NGP44DZEJBPVB7\n    fix: umount -l /mnt/memory/gone",
		"memstore_06H2RH0TGR17NGP44DZEJBPVB7  3        1        2.0 KiB  5m00s ago  100 B\n",
		"\nUNMOUNTED FROM OUTSIDE (umount while their session runs: it goes on without them)\n" +
			"  /mnt/memory/notes  memstore_06H2RH0TGR17NGP44DZEJBPVB6\n" +
			"    ERROR     unmounted at 15:03:05 (1m00s ago), not by memfs; its final sync ran (writes only)\n" +
			"    session   sesn_06H2RH0TGR17NGP44DZEJBPVB8, work item work_06H2RH0TGR17NGP44DZEJBPVB8\n" +
			"    left      nothing\n",
		"CONFLICTS KEPT: 2",
		"  memstore_06H2RH0TGR17NGP44DZEJBPVB8  2\n",
		"  20260102T030406123Z-abcd1235  memstore_06H2RH0TGR17NGP44DZEJBPVB8  /notes/b.md",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}

// A directory-mode mount says so, with what its watch and looks did, and
// lists the files it keeps and never uploads with their reasons.
func TestStatusTextDirectory(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	sync := syncqueue.Status{StoreID: "memstore_1", PendingUploads: 1, NotUploaded: 2, JournalBytes: 1024, Pending: []syncqueue.PendingChange{
		{Path: "/new.md", Op: "create", Reason: syncqueue.ReasonWaiting},
		{Path: "/link", Op: syncqueue.OpNotUploaded, Reason: "a symbolic link: never followed or uploaded"},
		{Path: "/big.bin", Op: syncqueue.OpNotUploaded, Reason: "larger than a memory may be (200000 bytes, at most 102,400): not uploaded until it is smaller"},
	}}
	busy := &dirmode.Stats{Looks: 7, LastLook: now.Add(-3 * time.Second), LastLookMs: 2.54, Overflows: 1, Restored: 3, Redownloads: 2, MarkerProblem: "missing", Watching: true}
	rep := statusReport{StateDirs: []string{"/s"}, Live: []worker.ProcessStatus{{PID: 7, Command: "memfs mount", Started: now, Mounts: []worker.MountStatus{
		{Dir: "/mnt/a", StoreID: "memstore_1", Access: "read_write", Mode: worker.ModeDirectory, Directory: busy, Sync: sync},
		{Dir: "/mnt/b", StoreID: "memstore_2", Access: "read_write", Mode: worker.ModeDirectory, Directory: &dirmode.Stats{}},
	}}}}
	var b strings.Builder
	printStatus(&b, rep, now)
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > statusWidth {
			t.Errorf("a line of %d columns:\n%s", n, line)
		}
	}
	for _, want := range []string{
		"  access      read_write\n  mode        directory: plain files, changes found by an inotify watch and a rescan\n" +
			"  looks       7; the last 15:04:02 (3s ago), took 2.5 ms\n" +
			"  folder      1 watch overflow, 3 read-only restores, 2 redownloads\n" +
			"  ERROR       the folder's marker file is missing: no change is taken until it is written again\n",
		"  pending     1 upload, 0 deletes, 2 files never uploaded; journal 1.0 KiB\n",
		"    create        /new.md   waiting for the next pass\n",
		"    not uploaded  /link     a symbolic link: never followed or uploaded\n",
		"    not uploaded  /big.bin  larger than a memory may be (200000 bytes, at most 102,400): not upload…\n",
		"/mnt/b\n  store       memstore_2\n  process     pid 7 (memfs mount), since 15:04:05 (0s ago)\n  access      read_write\n" +
			"  mode        directory: plain files, changes found by the rescan alone (no inotify watch)\n  looks       0\n  pending     0 uploads, 0 deletes; journal 0 B\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}

func TestStatusTextNothing(t *testing.T) {
	now := time.Now()
	var b strings.Builder
	printStatus(&b, statusReport{StateDirs: []string{"/s"}}, now)
	want := "state dir /s\n\nMOUNTS\n  (none)\n\nJOURNALS LEFT BEHIND (replayed by the next mount of the store, or memfs replay;\n" +
		"  damaged bytes are skipped and the rest salvaged)\n  (none)\n\n" +
		"CONFLICTS KEPT: 0 (memfs conflicts list; memfs conflicts show ID)\n"
	if b.String() != want {
		t.Errorf("empty status:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Plain memfs status also looks at memfs up's state dir when there is one;
// a state dir that was named is the only one.
func TestStatusDirs(t *testing.T) {
	base := t.TempDir()
	def, up := filepath.Join(base, "state"), filepath.Join(base, "data", "state")
	if got := statusDirs(def, false, up); !slices.Equal(got, []string{def}) {
		t.Errorf("without an up state dir: %v", got)
	}
	if err := os.MkdirAll(up, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := statusDirs(def, false, up); !slices.Equal(got, []string{def, up}) {
		t.Errorf("with an up state dir: %v, want both", got)
	}
	if got := statusDirs(def, true, up); !slices.Equal(got, []string{def}) {
		t.Errorf("a named state dir: %v, want it alone", got)
	}
	if got := statusDirs(up, false, up); !slices.Equal(got, []string{up}) {
		t.Errorf("the same dir twice: %v", got)
	}
}

func TestStateDirFlags(t *testing.T) {
	t.Setenv("MEMFS_STATE_DIR", "")
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "data", "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		f         stateDirFlags
		env       string
		want      string
		named     bool
		errSubstr string
		usage     bool
	}{
		{name: "default", want: defaultStateDir()},
		{name: "--state-dir", f: stateDirFlags{stateDir: base}, want: base, named: true},
		{name: "--data-dir", f: stateDirFlags{dataDir: filepath.Join(base, "data")}, want: filepath.Join(base, "data", "state"), named: true},
		{name: "env", env: base, want: base, named: true},
		{name: "the flag over env", env: "/nowhere", f: stateDirFlags{stateDir: base}, want: base, named: true},
		{name: "both", f: stateDirFlags{stateDir: base, dataDir: base}, errSubstr: "not both", usage: true},
		{name: "missing", f: stateDirFlags{stateDir: filepath.Join(base, "nope")}, errSubstr: "no state dir at " + filepath.Join(base, "nope")},
		{name: "a data dir up never ran in", f: stateDirFlags{dataDir: base + "/x"}, errSubstr: "is " + base + "/x the --data-dir of a memfs up"},
		{name: "a file", f: stateDirFlags{stateDir: file}, errSubstr: "is not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MEMFS_STATE_DIR", c.env)
			got, named, err := c.f.dir()
			if c.errSubstr != "" {
				var ue usageError
				if err == nil || !strings.Contains(err.Error(), c.errSubstr) || errors.As(err, &ue) != c.usage {
					t.Fatalf("dir() = %q, %v; want an error with %q (usage error: %v)", got, err, c.errSubstr, c.usage)
				}
				return
			}
			if err != nil || got != c.want || named != c.named {
				t.Fatalf("dir() = %q, %v, %v; want %q, %v", got, named, err, c.want, c.named)
			}
		})
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", -time.Second: "0s", 12 * time.Second: "12s", 1499 * time.Millisecond: "1s",
		5*time.Minute + 3*time.Second: "5m03s", 2*time.Hour + 5*time.Minute: "2h05m", 76 * time.Hour: "3d04h"} {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/mnt/memory/a-b_c.d": "/mnt/memory/a-b_c.d", "/mnt/my notes": "'/mnt/my notes'",
		"/mnt/it's": `'/mnt/it'\''s'`, "/tmp/TestX=1/mnt": "/tmp/TestX=1/mnt"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
