package test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// These tests drive issue 8's faults on real mounts of a real memfs serve:
// after each fault the sync invariant must hold — every file is in the
// store, or pending with a reason memfs status shows and healing by
// itself, or in the conflict log — and nothing is lost.

// ftStatus is `memfs status --json` (the parts the tests read).
type ftStatus struct {
	Processes []struct {
		Mounts []struct {
			Dir    string           `json:"dir"`
			Access string           `json:"access"`
			Sync   syncqueue.Status `json:"sync"`
		} `json:"mounts"`
	} `json:"processes"`
	Left    []struct{ StoreID string } `json:"journals_left_behind"`
	Damaged []string                   `json:"damaged_journals"`
}

// ftReadStatus runs memfs status --json on a state dir.
func ftReadStatus(t *testing.T, stateDir string) ftStatus {
	t.Helper()
	out, errb, code := cvMemfs(t, nil, "status", "--json", "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("memfs status exited %d: %s%s", code, out, errb)
	}
	var st ftStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("memfs status --json: %v\n%s", err, out)
	}
	return st
}

// ftPending maps path -> reason of the pending changes of the mount at dir.
func (st ftStatus) pending(dir string) (map[string]string, bool) {
	for _, p := range st.Processes {
		for _, m := range p.Mounts {
			if m.Dir == dir {
				out := map[string]string{}
				for _, c := range m.Sync.Pending {
					out[c.Path] = c.Reason
				}
				return out, true
			}
		}
	}
	return nil, false
}

// Case 1: a swap through a temporary name, a longer cycle and two folders
// trading places go up in one pass, keep their memory ids, and another
// mount sees the result.
func TestFaultCyclesOfMoves(t *testing.T) {
	files := map[string]string{"/a.md": "A\n", "/b.md": "B\n", "/c/1": "one\n", "/c/2": "two\n", "/c/3": "three\n",
		"/p/n.md": "p\n", "/q/n.md": "q\n"}
	e := newMtEnv(t, files)
	before := e.memories()
	a := e.mount()
	other := harness.StartMount(t, harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: e.storeID,
		Dir: filepath.Join(t.TempDir(), "other"), Args: []string{"--memory-sync-interval", "60s"}})
	mtMustSh(t, a.Dir, `mv a.md t.md && mv b.md a.md && mv t.md b.md &&
		mv c/1 c/t && mv c/3 c/1 && mv c/2 c/3 && mv c/t c/2 &&
		mv p tmp && mv q p && mv tmp q`)
	mtCheckPass(t, a.SyncNow(mtPassTimeout), map[string]int{"uploaded": 7, "failed": 0, "left": 0})
	want := map[string]string{"/a.md": "B\n", "/b.md": "A\n", "/c/1": "three\n", "/c/2": "one\n", "/c/3": "two\n",
		"/p/n.md": "q\n", "/q/n.md": "p\n"}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Fatalf("store after one pass:\n%s", mtDiff(got, want))
	}
	moved := map[string]string{"/a.md": "/b.md", "/b.md": "/a.md", "/c/1": "/c/3", "/c/2": "/c/1", "/c/3": "/c/2",
		"/p/n.md": "/q/n.md", "/q/n.md": "/p/n.md"}
	after := e.memories()
	for p, from := range moved {
		if after[p].ID != before[from].ID {
			t.Errorf("%s is memory %s, want %s (the id of %s: a move keeps it)", p, after[p].ID, before[from].ID, from)
		}
	}
	e.waitMountFiles(other.Dir, want)
	mtStop(t, other)
	mtStop(t, a)
}

// waitMountFiles polls a mount until it shows exactly want.
func (e *mtEnv) waitMountFiles(dir string, want map[string]string) {
	e.t.Helper()
	mtPoll(e.t, "the mount "+dir+" to show the store", func() (bool, string) {
		got := mtMountFiles(e.t, dir)
		return maps.Equal(got, want), mtDiff(got, want)
	})
}

// Case 6: content that is not UTF-8 moves, replaces and truncates like any
// other; only its upload waits (status says why), and nothing is lost or
// misplaced across a remount.
func TestFaultNotUTF8(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/keep.md": "kept\n"})
	m := e.mount()
	mtMustSh(t, m.Dir, `printf '\377' > bin; mv bin moved &&
		echo precious > dst; printf '\377\376' > src; mv -T src dst &&
		mkdir d && printf '\377' > d/x; echo ok > d/ok; mv d e &&
		printf '\377\377\377' > t; truncate -s 1 t && test "$(stat -c %s t)" = 1`)
	local := map[string]string{"/keep.md": "kept\n", "/moved": "\xff", "/dst": "\xff\xfe", "/e/x": "\xff", "/e/ok": "ok\n", "/t": "\xff"}
	if got := mtMountFiles(t, m.Dir); !maps.Equal(got, local) {
		t.Fatalf("mount after the shell commands:\n%s", mtDiff(got, local))
	}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"failed": 0})
	stored := map[string]string{"/keep.md": "kept\n", "/e/ok": "ok\n"}
	e.waitStore(stored)
	reasons, ok := ftReadStatus(t, e.stateDir).pending(m.Dir)
	want := map[string]string{"/moved": syncqueue.ReasonNotUTF8, "/dst": syncqueue.ReasonNotUTF8, "/e/x": syncqueue.ReasonNotUTF8, "/t": syncqueue.ReasonNotUTF8}
	if !ok || !maps.Equal(reasons, want) {
		t.Fatalf("memfs status: pending %v (mount found: %v), want %v", reasons, ok, want)
	}
	mtStopWith(t, m, unix.SIGTERM)
	m = e.mount()
	if got := mtMountFiles(t, m.Dir); !maps.Equal(got, local) {
		t.Fatalf("mount after a SIGTERM and a remount (the journal keeps what can't go up):\n%s", mtDiff(got, local))
	}
	// Made valid, it goes up by itself.
	mtMustSh(t, m.Dir, `echo valid > moved`)
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0})
	stored["/moved"] = "valid\n"
	e.waitStore(stored)
	mtStop(t, m)
}

// Case 4, on a mount: a new file refused at the store's memory cap waits
// (status says why) and goes up by itself once another client makes room.
func TestFaultMemoryCap(t *testing.T) {
	mtRequireFUSE(t)
	e := newMtEnvWith(t, map[string]string{"/1.md": "1\n", "/2.md": "2\n"}, harness.ServeOptions{Args: []string{"--max-memories-per-store", "2"}})
	m := e.mount()
	mtMustSh(t, m.Dir, `echo waits > new.md`)
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 1, "left": 1})
	m.WaitOutput(1, "memory cap", mtPollTimeout)
	reasons, _ := ftReadStatus(t, e.stateDir).pending(m.Dir)
	if reasons["/new.md"] != syncqueue.ReasonCap {
		t.Fatalf("memfs status: %v, want /new.md waiting on the cap", reasons)
	}
	if err := e.cl.DeleteMemory(t.Context(), e.storeID, e.memories()["/1.md"].ID, nil); err != nil {
		t.Fatal(err)
	}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0})
	e.waitStore(map[string]string{"/2.md": "2\n", "/new.md": "waits\n"})
	mtStop(t, m)
}

// Case 5: one flipped byte in a real journal strands nothing that is
// intact: the records before and after the damage are replayed and
// uploaded (a file whose newest record is damaged comes back at its
// previous state: each version is a whole-file record), the damaged file
// is kept, and memfs status lists it.
func TestFaultDamagedJournal(t *testing.T) {
	e := newMtEnv(t, nil)
	m := e.mount()
	e.serve.Stop() // nothing is uploaded: the journal holds it all
	for i := range 10 {
		mtMustSh(t, m.Dir, `printf 'first version of %s\n' "$1" > "$1"`, ftName(i))
	}
	for i := range 10 {
		mtMustSh(t, m.Dir, `printf 'second version of %s\n' "$1" >> "$1"`, ftName(i))
	}
	m.Kill()
	if err := unix.Unmount(m.Dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	jpath := filepath.Join(syncqueue.JournalDir(e.stateDir, e.storeID), "journal")
	b, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	victim := []byte("second version of f05.md")
	at := bytes.Index(b, victim)
	if at < 0 || bytes.Count(b, victim) != 1 {
		t.Fatalf("the journal does not hold the record to damage once (%d)", bytes.Count(b, victim))
	}
	b[at+3] ^= 0x20 // one flipped bit in the middle of the journal
	if err := os.WriteFile(jpath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.serve.Restart()
	m = e.mount()
	m.WaitOutput(1, "JOURNAL DAMAGED", mtPollTimeout)
	want := map[string]string{}
	for i := range 10 {
		want["/"+ftName(i)] = "first version of " + ftName(i) + "\nsecond version of " + ftName(i) + "\n"
	}
	want["/f05.md"] = "first version of f05.md\n"
	e.waitStore(want)
	st := ftReadStatus(t, e.stateDir)
	if len(st.Damaged) != 1 || !strings.Contains(st.Damaged[0], "journal.corrupt-") {
		t.Fatalf("memfs status lists damaged journals %v, want the kept copy", st.Damaged)
	}
	if out, _, _ := cvMemfs(t, nil, "status", "--state-dir", e.stateDir); !strings.Contains(out, "DAMAGED JOURNALS") {
		t.Fatalf("memfs status does not show the damaged journal:\n%s", out)
	}
	mtStop(t, m)
}

// A journal truncated to zero bytes lost its records: the mount starts,
// says so as loudly as any damage, and status lists it.
func TestFaultEmptiedJournal(t *testing.T) {
	e := newMtEnv(t, nil)
	m := e.mount()
	e.serve.Stop()
	mtMustSh(t, m.Dir, `echo lost > lost.md`)
	m.Kill()
	if err := unix.Unmount(m.Dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(syncqueue.JournalDir(e.stateDir, e.storeID), "journal"), 0); err != nil {
		t.Fatal(err)
	}
	e.serve.Restart()
	m = e.mount()
	line := m.WaitOutput(1, "JOURNAL DAMAGED", mtPollTimeout)
	if !strings.Contains(line, "level=error") {
		t.Errorf("the loss is not logged as an error: %s", line)
	}
	if st := ftReadStatus(t, e.stateDir); len(st.Damaged) != 1 {
		t.Fatalf("memfs status lists damaged journals %v", st.Damaged)
	}
	mtStop(t, m)
}

func ftName(i int) string { return "f0" + string(rune('0'+i)) + ".md" }
