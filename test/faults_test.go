package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// These tests drive the faults of docs/sync.md ("Why a change waits") on
// real mounts of a real memfs serve:
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
// misplaced across a remount. A stop with such content pending exits
// sgExitLeft: it stays in the journal.
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
	mtStopExit(t, m, unix.SIGTERM, sgExitLeft)
	m = e.mount()
	if got := mtMountFiles(t, m.Dir); !maps.Equal(got, local) {
		t.Fatalf("mount after a SIGTERM and a remount (the journal keeps what can't go up):\n%s", mtDiff(got, local))
	}
	// Made valid, it goes up by itself.
	mtMustSh(t, m.Dir, `echo valid > moved`)
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0})
	stored["/moved"] = "valid\n"
	e.waitStore(stored)
	mtStopExit(t, m, unix.SIGINT, sgExitLeft) // /dst, /e/x and /t are still not UTF-8
	if l := m.Lines("memfs mount:", "left in the journal", e.storeID+": 3 changes (3 "+syncqueue.ReasonNotUTF8+")"); len(l) != 1 {
		t.Errorf("the exit message does not say what is left and why:\n%s", m.Output())
	}
}

// Case 4, on a mount: a new file refused at the store's memory cap waits
// (status says why), is not sent again every pass, and goes up by itself
// once another client makes room.
func TestFaultMemoryCap(t *testing.T) {
	mtRequireFUSE(t)
	// At info, serve logs every request (its access log).
	e := newMtEnvWith(t, map[string]string{"/1.md": "1\n", "/2.md": "2\n"},
		harness.ServeOptions{Args: []string{"--max-memories-per-store", "2", "--log-level", "info"}})
	m := e.mount()
	mtMustSh(t, m.Dir, `echo waits > new.md`)
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 1, "left": 1})
	m.WaitOutput(1, "memory cap", mtPollTimeout)
	reasons, _ := ftReadStatus(t, e.stateDir).pending(m.Dir)
	if reasons["/new.md"] != syncqueue.ReasonCap {
		t.Fatalf("memfs status: %v, want /new.md waiting on the cap", reasons)
	}
	// Later passes don't send it again (docs/sync.md, "Why a change
	// waits"): the server's
	// access log has the one refusal.
	refusals := func() int { return strings.Count(e.serve.Output(), "status=422") }
	for range 3 {
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 1, "left": 1})
	}
	if n := refusals(); n != 1 {
		t.Errorf("the server refused %d creates at its cap after four passes, want 1:\n%s", n, e.serve.Output())
	}
	if err := e.cl.DeleteMemory(t.Context(), e.storeID, e.memories()["/1.md"].ID, nil); err != nil {
		t.Fatal(err)
	}
	// The new file waits for the delete to reach the mount (the change
	// feed), then goes up with the next pass.
	mtPoll(t, "/new.md to go up once the delete reached the mount", func() (bool, string) {
		line := m.SyncNow(mtPassTimeout)
		got := mtPassCounts(t, line)
		return got["uploaded"] == 1 && got["failed"] == 0, line
	})
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

// ftMountVia mounts e's store through a proxy URL with a state dir and
// interval of the test's choosing.
func (e *mtEnv) mountVia(url, stateDir, interval string) *harness.Mount {
	e.t.Helper()
	e.stateDir = stateDir
	m := harness.StartMount(e.t, harness.MountOptions{URL: url, APIKey: e.serve.AdminKey, Store: e.storeID, Dir: e.dir,
		StateDir: stateDir, Args: []string{"--memory-sync-interval", interval}})
	return m
}

// Cases 2 and 3: the state dir's disk fills while the store is away.
// Closes then fail with ENOSPC but the files keep their content (never
// visible and unrecorded for good: status lists them, not journaled yet);
// once the store is back the journal shrinks by itself, the files that
// could not be journaled are journaled, and everything reaches the store
// without a human.
func TestFaultFullStateDir(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/base.md": "base\n"})
	proxy := harness.NewFaultProxy(t, e.serve.URL)
	disk := harness.SmallTmpfs(t, "3m")
	m := e.mountVia(proxy.URL(), filepath.Join(disk, "state"), "5s")
	proxy.Cut()
	want := map[string]string{"/base.md": "base\n"}
	var refused string
	for i := 0; i < 200 && refused == ""; i++ {
		p := fmt.Sprintf("/f%03d.md", i)
		c := strings.Repeat(fmt.Sprintf("file %d, written while the store is away\n", i), 1200) // ~50 KB
		err := os.WriteFile(filepath.Join(m.Dir, p), []byte(c), 0o644)
		switch {
		case err == nil:
		case errors.Is(err, syscall.ENOSPC):
			refused = p
		default:
			t.Fatalf("write %s: %v", p, err)
		}
		want[p] = c
	}
	if refused == "" {
		t.Fatal("200 files of 50 KB fit in the journal on a 3 MiB state dir: the test did not fill it")
	}
	// The refused close kept the content: it reads back, and status says
	// it is not journaled yet because the state dir is full.
	if b, err := os.ReadFile(filepath.Join(m.Dir, refused)); err != nil || string(b) != want[refused] {
		t.Fatalf("%s after its close failed with ENOSPC: %d bytes, %v (want its new content)", refused, len(b), err)
	}
	st := ftReadStatus(t, e.stateDir)
	reasons, _ := st.pending(m.Dir)
	if reasons[refused] != syncqueue.ReasonNoSpace {
		t.Fatalf("memfs status: %s waits for %q, want %q", refused, reasons[refused], syncqueue.ReasonNoSpace)
	}
	for _, p := range st.Processes {
		for _, mt := range p.Mounts {
			if !mt.Sync.NoSpace || !mt.Sync.Unreachable {
				t.Errorf("memfs status: no_space=%v unreachable=%v, want both", mt.Sync.NoSpace, mt.Sync.Unreachable)
			}
		}
	}
	m.WaitOutput(1, "the state dir is full", mtPollTimeout)
	// The store comes back: nothing else is done by hand.
	proxy.Pass()
	mtPoll(t, "everything written to reach the store", func() (bool, string) {
		got := e.contents()
		return maps.Equal(got, want), mtDiff(got, want)
	})
	m.WaitOutput(1, "store recovered", mtPollTimeout)
	if err := os.WriteFile(filepath.Join(m.Dir, "after.md"), []byte("room again\n"), 0o644); err != nil {
		t.Fatalf("a write once the journal shrank: %v", err)
	}
	want["/after.md"] = "room again\n"
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"failed": 0, "left": 0})
	e.waitStore(want)
	mtStop(t, m)
}

// Case 9, on a mount: with the network blackholed, a pass's request hangs
// for the client's whole timeout; the store is reported unreachable long
// before, and once the network is back everything goes up by itself.
func TestFaultBlackholedStore(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/base.md": "base\n"})
	proxy := harness.NewFaultProxy(t, e.serve.URL)
	m := e.mountVia(proxy.URL(), e.stateDir, "5s")
	proxy.Blackhole()
	mtMustSh(t, m.Dir, `echo "written into a blackhole" > hole.md`)
	start := time.Now()
	m.Signal(unix.SIGUSR1) // a pass now: its upload hangs
	m.WaitOutput(1, "store unreachable", mtPassTimeout)
	took := time.Since(start)
	t.Logf("store reported unreachable %s after a request began to hang (the client's attempt timeout is 30 s)", took.Round(time.Millisecond))
	if took >= 30*time.Second {
		t.Errorf("the outage was reported only after %s: no sooner than the request timed out", took)
	}
	if st := ftReadStatus(t, e.stateDir); !st.Processes[0].Mounts[0].Sync.Unreachable {
		t.Error("memfs status does not say the store is unreachable")
	}
	proxy.Pass()
	e.waitStore(map[string]string{"/base.md": "base\n", "/hole.md": "written into a blackhole\n"})
	m.WaitOutput(1, "store recovered", mtPollTimeout)
	mtStop(t, m)
}
