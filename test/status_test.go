package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
	"github.com/memfs/memfs/worker"
)

// docs/operating.md, "memfs status", on real processes: memfs status against
// live mounts and what they leave behind, the log lines of sync passes
// and outages, and the line that says a store was loaded.

// stReport is `memfs status --json`.
type stReport struct {
	StateDirs []string               `json:"state_dirs"`
	Processes []worker.ProcessStatus `json:"processes"`
	Dead      []struct {
		Dir string `json:"dir"`
		Fix string `json:"fix"`
	} `json:"dead_mounts"`
	Left      []worker.LeftJournal `json:"journals_left_behind"`
	Damaged   []string             `json:"damaged_journals"`
	Conflicts int                  `json:"conflicts"`
	ByStore   map[string]int       `json:"conflicts_by_store"`
	Kept      []struct {
		syncqueue.Conflict
		StateDir string `json:"state_dir"`
	} `json:"conflict_log"`
}

// stStatus runs memfs status with args and --json; it fails the test
// unless it exits 0, prints only JSON and nothing on stderr.
func stStatus(t *testing.T, args ...string) stReport {
	t.Helper()
	out, errb, code := cvMemfs(t, nil, append([]string{"status", "--json"}, args...)...)
	if code != 0 || errb != "" {
		t.Fatalf("memfs status --json %v exited %d; stderr:\n%s", args, code, errb)
	}
	var rep stReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil { // a log line on stdout fails here
		t.Fatalf("memfs status --json: %v\n%s", err, out)
	}
	return rep
}

// mount returns the status of the mount at dir, failing the test if no
// process serves it.
func (r stReport) mount(t *testing.T, dir string) worker.MountStatus {
	t.Helper()
	for _, p := range r.Processes {
		for _, m := range p.Mounts {
			if m.Dir == dir {
				return m
			}
		}
	}
	t.Fatalf("memfs status lists no mount at %s: %+v", dir, r.Processes)
	return worker.MountStatus{}
}

// stText runs memfs status (text) with args: stdout, failing the test
// unless it exits 0 with nothing on stderr.
func stText(t *testing.T, args ...string) string {
	t.Helper()
	out, errb, code := cvMemfs(t, nil, append([]string{"status"}, args...)...)
	if code != 0 || errb != "" {
		t.Fatalf("memfs status %v exited %d; stderr:\n%s", args, code, errb)
	}
	return out
}

// A live mount with changes held back for each reason a test can make:
// the store at its cap, content that is not UTF-8, a delete within its
// delay, then the store unreachable. Status names the store, says why
// each change waits, counts them, and gives the journal's size and the
// last sync with its age.
func TestStatusLiveMount(t *testing.T) {
	e := newMtEnvWith(t, map[string]string{"/1.md": "1\n", "/2.md": "2\n"}, harness.ServeOptions{Args: []string{"--max-memories-per-store", "3"}})
	proxy := harness.NewFaultProxy(t, e.serve.URL)
	m := e.mountVia(proxy.URL(), e.stateDir, "60s")
	mtMustSh(t, m.Dir, `echo three > 3.md`)
	cleanPass := time.Now()
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0, "left": 0})
	mtMustSh(t, m.Dir, `echo over the cap > new.md; printf '\377' > bin.md; rm 1.md`)
	capPass := time.Now()
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 1, "left": 3})

	rep := stStatus(t, "--state-dir", e.stateDir)
	ms := rep.mount(t, m.Dir)
	if ms.StoreID != e.storeID || ms.StoreName != t.Name() || ms.Sync.StoreName != t.Name() || ms.Access != "read_write" {
		t.Errorf("mount %s: store %s %q (sync: %q), access %s; want %s %q, read_write", ms.Dir, ms.StoreID, ms.StoreName, ms.Sync.StoreName, ms.Access, e.storeID, t.Name())
	}
	reasons := map[string]string{}
	for _, c := range ms.Sync.Pending {
		reasons[c.Op+" "+c.Path] = c.Reason
	}
	want := map[string]string{"create /new.md": syncqueue.ReasonCap, "create /bin.md": syncqueue.ReasonNotUTF8, "delete /1.md": syncqueue.ReasonDeleteDelay}
	if !maps.Equal(reasons, want) {
		t.Errorf("pending %v, want %v", reasons, want)
	}
	if ms.Sync.PendingUploads != 2 || ms.Sync.PendingDeletes != 1 {
		t.Errorf("%d uploads and %d deletes pending, want 2 and 1", ms.Sync.PendingUploads, ms.Sync.PendingDeletes)
	}
	fi, err := os.Stat(filepath.Join(syncqueue.JournalDir(e.stateDir, e.storeID), "journal"))
	if err != nil || ms.Sync.JournalBytes != fi.Size() || fi.Size() == 0 {
		t.Errorf("journal bytes %d, the journal file %v (%v)", ms.Sync.JournalBytes, fi, err)
	}
	// The last sync is the clean pass: the cap pass failed.
	if ls := ms.Sync.LastSync; ls == nil || ls.Before(cleanPass) || ls.After(capPass) {
		t.Errorf("last sync %v, want the pass between %v and %v", ls, cleanPass, capPass)
	}
	if age := ms.LastSyncAgeSeconds; age == nil || *age < 0 || *age > time.Since(cleanPass).Seconds() {
		t.Errorf("last sync age %v s, want within the %s since the clean pass", age, time.Since(cleanPass))
	}
	if ms.Conflicts != 0 || ms.Sync.Unreachable || ms.Sync.LastError != "" {
		t.Errorf("conflicts %d, unreachable %v, last error %q: want none", ms.Conflicts, ms.Sync.Unreachable, ms.Sync.LastError)
	}
	text := stText(t, "--state-dir", e.stateDir)
	for _, s := range []string{m.Dir + "\n", fmt.Sprintf("%s %q", e.storeID, t.Name()), "access      read_write",
		"pending     2 uploads, 1 delete; journal ", "s ago)\n", "conflicts   0\n",
		"create  /new.md  the store is at its memory cap", "create  /bin.md  content is not UTF-8",
		"delete  /1.md    deletes wait 30 s and a confirming pass"} {
		if !strings.Contains(text, s) {
			t.Errorf("memfs status does not say %q:\n%s", s, text)
		}
	}

	// The store goes away: status says so, with the error, and a change
	// made now waits for it.
	proxy.Cut()
	m.WaitOutput(1, "store unreachable", mtPollTimeout)
	mtMustSh(t, m.Dir, `echo three again > 3.md`)
	ms = stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir)
	if !ms.Sync.Unreachable || ms.Sync.LastError == "" || ms.Sync.LastErrorAt == nil {
		t.Errorf("unreachable %v, last error %q at %v: want the outage", ms.Sync.Unreachable, ms.Sync.LastError, ms.Sync.LastErrorAt)
	}
	if r := stReasons(ms)["/3.md"]; r != syncqueue.ReasonUnreachable {
		t.Errorf("/3.md waits for %q, want %q", r, syncqueue.ReasonUnreachable)
	}
	if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, "STORE UNREACHABLE") || !strings.Contains(text, "last error  ") {
		t.Errorf("memfs status does not show the outage:\n%s", text)
	}
	// Meanwhile /3.md changes in the store too: once the store is back,
	// the store wins and the local version is kept as a conflict.
	theirs := "three, theirs\n"
	if _, err := e.cl.UpdateMemory(t.Context(), e.storeID, e.memories()["/3.md"].ID, store.UpdateMemoryInput{Content: &theirs}); err != nil {
		t.Fatal(err)
	}
	proxy.Pass()
	m.WaitOutput(1, "store recovered", mtPollTimeout)
	var last stReport
	mtPoll(t, "status to count the conflict", func() (bool, string) {
		m.SyncNow(mtPassTimeout)
		last = stStatus(t, "--state-dir", e.stateDir)
		return last.mount(t, m.Dir).Conflicts == 1, fmt.Sprintf("%+v", last)
	})
	if last.Conflicts != 1 || last.ByStore[e.storeID] != 1 || len(last.Kept) != 1 || last.Kept[0].Path != "/3.md" || last.Kept[0].StateDir != e.stateDir {
		t.Errorf("conflicts %d, by store %v, entries %+v; want the one of /3.md", last.Conflicts, last.ByStore, last.Kept)
	}
	if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, "conflicts   1\n") ||
		!strings.Contains(text, fmt.Sprintf("  %s  %s  /3.md\n", last.Kept[0].ID, e.storeID)) {
		t.Errorf("memfs status does not show the conflict:\n%s", text)
	}
	// What is left is the business of other tests.
	m.Kill()
	unix.Unmount(m.Dir, unix.MNT_DETACH)
}

func stReasons(ms worker.MountStatus) map[string]string {
	out := map[string]string{}
	for _, c := range ms.Sync.Pending {
		out[c.Path] = c.Reason
	}
	return out
}

// A read-only mount shows as such: the kernel mounted it ro.
func TestStatusReadOnlyMount(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	m := e.mount("--read-only")
	if opts, _ := harness.MountOptionsOf(m.Dir); !strings.HasPrefix(opts, "ro") {
		t.Fatalf("the kernel's options for %s: %q, want ro", m.Dir, opts)
	}
	if ms := stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir); ms.Access != "read_only" || ms.StoreName != t.Name() {
		t.Errorf("read-only mount: access %s, store name %q", ms.Access, ms.StoreName)
	}
	if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, "access      read_only\n  mode        fuse\n  pending     - (read-only") {
		t.Errorf("memfs status of a read-only mount:\n%s", text)
	}
	mtStop(t, m)
}

// memfs status only reads: with two mounts killed (dead mounts), one
// journal left behind and another one damaged, it changes nothing in the
// state dir — no replay, no salvage, no rename, no socket removed — and
// prints nothing but its answer.
func TestStatusReadsOnly(t *testing.T) {
	e := newMtEnv(t, nil)
	other, err := e.cl.CreateStore(t.Context(), store.CreateStoreInput{Name: t.Name() + " (damaged)"})
	if err != nil {
		t.Fatal(err)
	}
	a := e.mount()
	b := harness.StartMount(t, harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: other.ID,
		Dir: filepath.Join(filepath.Dir(e.dir), "damaged"), StateDir: e.stateDir, Args: []string{"--memory-sync-interval", "60s"}})
	e.serve.Stop() // nothing is uploaded: the journals hold it all
	mtMustSh(t, a.Dir, `echo left > left.md && mkdir d && echo also > d/also.md`)
	for i := range 10 {
		mtMustSh(t, b.Dir, `printf 'version of %s\n' "$1" > "$1"`, ftName(i))
	}
	a.Kill()
	b.Kill()
	t.Cleanup(func() {
		unix.Unmount(a.Dir, unix.MNT_DETACH)
		unix.Unmount(b.Dir, unix.MNT_DETACH)
	})
	jpath := filepath.Join(syncqueue.JournalDir(e.stateDir, other.ID), "journal")
	j, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(j, []byte("version of f05.md"))
	if at < 0 {
		t.Fatal("the journal does not hold the record to damage")
	}
	j[at+3] ^= 0x20
	if err := os.WriteFile(jpath, j, 0o600); err != nil {
		t.Fatal(err)
	}

	before := mtSnapshot(t, e.stateDir)
	text := stText(t, "--state-dir", e.stateDir)
	rep := stStatus(t, "--state-dir", e.stateDir)
	if after := mtSnapshot(t, e.stateDir); after != before {
		t.Fatalf("memfs status changed the state dir:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	if !strings.HasPrefix(text, "state dir "+e.stateDir+"\n") {
		t.Errorf("memfs status does not begin with its answer:\n%s", text)
	}
	dead := map[string]string{}
	for _, d := range rep.Dead {
		dead[d.Dir] = d.Fix
	}
	for _, m := range []*harness.Mount{a, b} {
		if dead[m.Dir] != "umount -l "+m.Dir {
			t.Errorf("dead mount %s: fix %q, want umount -l (dead mounts: %v)", m.Dir, dead[m.Dir], dead)
		}
		if !strings.Contains(text, "fix: umount -l "+m.Dir) {
			t.Errorf("the text does not give the fix for %s:\n%s", m.Dir, text)
		}
	}
	left := map[string]worker.LeftJournal{}
	for _, lj := range rep.Left {
		left[lj.StoreID] = lj
	}
	if lj := left[e.storeID]; lj.Pending != 2 || lj.DamagedBytes != 0 || lj.Bytes == 0 {
		t.Errorf("the journal left behind: %+v, want 2 changes, no damage", lj)
	}
	if lj := left[other.ID]; lj.DamagedBytes == 0 || lj.Pending == 0 {
		t.Errorf("the damaged journal: %+v, want damaged bytes and the changes still readable", lj)
	}
	if len(rep.Processes) != 0 {
		t.Errorf("processes of killed mounts answered: %+v", rep.Processes)
	}
	// The next mount salvages: then, and only then, the copy exists.
	if len(rep.Damaged) != 0 {
		t.Errorf("damaged copies before any mount salvaged: %v", rep.Damaged)
	}
}

// After `memfs up --data-dir X`, `memfs status --data-dir X` finds its
// worker's mount: the demo store by name, the session and its work item.
func TestStatusUpDataDir(t *testing.T) {
	mtRequireFUSE(t)
	up := startUp(t, "--memory-sync-interval", "5s")
	rep := stStatus(t, "--data-dir", up.dataDir)
	ms := rep.mount(t, up.dir)
	if ms.StoreID != up.storeID || ms.StoreName != "demo" || ms.Access != "read_write" ||
		!strings.HasPrefix(ms.SessionID, store.PrefixSession) || !strings.HasPrefix(ms.WorkID, store.PrefixWork) {
		t.Errorf("memfs up's mount: %+v; want the demo store, read_write, with its session and work item", ms)
	}
	if p := rep.Processes[0]; p.StateDir != filepath.Join(up.dataDir, "state") || !strings.HasSuffix(p.Command, "memfs up") {
		t.Errorf("process %d: state dir %s, command %q", p.PID, p.StateDir, p.Command)
	}
	text := stText(t, "--data-dir", up.dataDir)
	if !strings.Contains(text, fmt.Sprintf("%s %q", up.storeID, "demo")) || !strings.Contains(text, "session     "+ms.SessionID+", work item "+ms.WorkID) {
		t.Errorf("memfs status --data-dir:\n%s", text)
	}
	// Bad input: a data dir up never ran in, and both flags.
	if _, errb, code := cvMemfs(t, nil, "status", "--data-dir", filepath.Join(up.dataDir, "nope")); code != 1 || !strings.Contains(errb, "no state dir at") {
		t.Errorf("status --data-dir of nothing: exit %d, %q", code, errb)
	}
	if _, errb, code := cvMemfs(t, nil, "status", "--data-dir", up.dataDir, "--state-dir", up.dataDir); code != 2 || !strings.Contains(errb, "not both") {
		t.Errorf("status with both flags: exit %d, %q", code, errb)
	}
	if out, errb, code := cvMemfs(t, nil, "conflicts", "list", "--data-dir", up.dataDir); code != 0 || !strings.Contains(out+errb, "no conflicts in "+filepath.Join(up.dataDir, "state")) {
		t.Errorf("conflicts list --data-dir: exit %d, %q %q", code, out, errb)
	}
	up.proc.Signal(syscall.SIGINT)
	if code := up.proc.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs up exited %d after Ctrl-C:\n%s", code, up.proc.Output())
	}
}

// stPassLines are the flusher's info lines of a mount's log.
func stPassLines(m *harness.Mount) []string { return m.Lines(`msg="sync pass" `) }

// A real mount's log: one info line per pass that uploaded or was
// refused, none for a pass with nothing new to say, and one line when an
// outage starts and one when it ends however many passes fail between.
func TestMountLogLines(t *testing.T) {
	e := newMtEnvWith(t, map[string]string{"/1.md": "1\n", "/2.md": "2\n"}, harness.ServeOptions{Args: []string{"--max-memories-per-store", "3"}})
	proxy := harness.NewFaultProxy(t, e.serve.URL)
	m := e.mountVia(proxy.URL(), e.stateDir, "60s")
	pass := func(what string, want map[string]int) {
		t.Helper()
		n := len(stPassLines(m))
		m.SyncNow(mtPassTimeout)
		lines := stPassLines(m)[n:]
		switch {
		case want == nil && len(lines) > 0:
			t.Errorf("%s: logged %q, want nothing", what, lines)
		case want != nil && len(lines) != 1:
			t.Errorf("%s: %d sync pass lines, want 1:\n%s", what, len(lines), m.Output())
		case want != nil:
			if !strings.Contains(lines[0], "level=info") {
				t.Errorf("%s: %q is not at info", what, lines[0])
			}
			mtCheckPass(t, lines[0], want)
		}
	}
	pass("an idle pass", nil)
	mtMustSh(t, m.Dir, `echo 3 > 3.md`)
	pass("an upload", map[string]int{"uploaded": 1})
	mtMustSh(t, m.Dir, `echo 4 > 4.md`)
	pass("a refusal at the cap", map[string]int{"uploaded": 0, "failed": 1})
	if l := stPassLines(m); !strings.Contains(l[len(l)-1], "refused=1") {
		t.Errorf("the refusal's line: %q", l[len(l)-1])
	}
	pass("the same refusal again", nil)

	proxy.Cut()
	m.WaitOutput(1, "store unreachable", mtPollTimeout)
	pass("a pass during the outage", nil)
	pass("another pass during the outage", nil)
	proxy.Pass()
	m.WaitOutput(1, "store recovered", mtPollTimeout)
	pass("a pass after the outage", nil)
	for msg, level := range map[string]string{"store unreachable": "warning", "store recovered": "info"} {
		lines := m.Lines(msg)
		if len(lines) != 1 || !strings.Contains(lines[0], "level="+level) {
			t.Errorf("%q lines, want one at %s:\n%s", msg, level, strings.Join(lines, "\n"))
		}
	}
	m.Kill()
	unix.Unmount(m.Dir, unix.MNT_DETACH)
}

// stLoadFiles is a store of 45 memories (three pages at the root and a
// folder): path -> content, and their bytes.
func stLoadFiles() (map[string]string, int) {
	files := map[string]string{}
	n := 0
	for i := range 45 {
		p := fmt.Sprintf("/m%02d.md", i)
		if i%5 == 0 {
			p = "/dir" + p
		}
		files[p] = strings.Repeat(fmt.Sprintf("memory %d\n", i), i+1)
		n += len(files[p])
	}
	return files, n
}

// Loading a store logs one summary line at info; not on a terminal, no
// progress is printed even at the shortest period.
func TestMountLoadSummary(t *testing.T) {
	files, size := stLoadFiles()
	e := newMtEnv(t, files)
	o := e.opts()
	o.Env = []string{"MEMFS_LOAD_PROGRESS_EVERY=0"}
	m := harness.StartMount(t, o)
	line := m.WaitOutput(1, "memory store loaded", mtPollTimeout)
	for _, s := range []string{"level=info", "memories=45 ", fmt.Sprintf("bytes=%d ", size), "seconds=", "store=" + e.storeID} {
		if !strings.Contains(line, s) {
			t.Errorf("the load line %q lacks %q", line, s)
		}
	}
	if l := m.Lines("loading " + e.storeID); len(l) > 0 {
		t.Errorf("progress printed with stderr a pipe: %q", l)
	}
	mtStop(t, m)
	// A bad period is a usage error, before anything is mounted.
	o.Env = []string{"MEMFS_LOAD_PROGRESS_EVERY=soon"}
	code, _, errb := harness.RunMount(t, o, mtExitTimeout)
	if code != 2 || !strings.Contains(errb, "MEMFS_LOAD_PROGRESS_EVERY must be a duration") {
		t.Errorf("MEMFS_LOAD_PROGRESS_EVERY=soon: exit %d, %q", code, errb)
	}
}

// On a terminal, memfs mount says how the load goes, and closes it.
func TestMountLoadProgressOnATerminal(t *testing.T) {
	files, _ := stLoadFiles()
	e := newMtEnv(t, files)
	out := stRunOnPTY(t, e, "MEMFS_LOAD_PROGRESS_EVERY=0")
	for _, s := range []string{"loading " + e.storeID + ": ", "loaded " + e.storeID + ": 45 memories"} {
		if !strings.Contains(out, s) {
			t.Errorf("the terminal does not show %q:\n%s", s, out)
		}
	}
}

// stRunOnPTY runs memfs mount of e's store with stdout and stderr on a
// pseudo-terminal until it has mounted, stops it with Ctrl-C, and
// returns what the terminal showed.
func stRunOnPTY(t *testing.T, e *mtEnv, env ...string) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	cmd := stCommand(t, e.opts(), env)
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	t.Cleanup(func() {
		if harness.IsMounted(e.dir) {
			unix.Unmount(e.dir, unix.MNT_DETACH)
		}
	})
	var buf harness.LockedBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			buf.Write(b[:n])
			if err != nil {
				return // EIO once the process closed the terminal
			}
		}
	}()
	mtPoll(t, "memfs mount to mount on the terminal", func() (bool, string) {
		return strings.Contains(buf.String(), "mounted at"), buf.String()
	})
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("memfs mount on a terminal: %v\n%s", err, buf.String())
		}
	case <-time.After(mtExitTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("memfs mount did not stop on Ctrl-C:\n%s", buf.String())
	}
	ptmx.Close()
	<-read
	return buf.String()
}

// stCommand is the memfs mount command of o, ending with the test binary.
func stCommand(t *testing.T, o harness.MountOptions, env []string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, harness.Binary(t), o.CommandArgs()...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

// A mount whose credential may read its store but not
// write it (a session's token, the store attached read-only) is refused
// by the store, which answers: the log says "refused by the store" with
// the store's message, once however many passes, and never "store
// unreachable"; memfs status gives the same reason, in both views.
func TestMountRefusedByTheStore(t *testing.T) {
	e := newWkEnv(t)
	id := e.newStore("read-only", map[string]string{"/a.md": "a\n"})
	e.newSession(wkRO(id))
	_, _, token := e.poll()
	stateDir := filepath.Join(e.base, "state-ro")
	m := harness.StartMount(t, harness.MountOptions{URL: e.serve.URL, APIKey: token, Store: id, Dir: filepath.Join(e.base, "ro"),
		StateDir: stateDir, Args: []string{"--memory-sync-interval", "60s", "--memory-sync-quiet", "off"}})
	mtMustSh(t, m.Dir, `echo mine > b.md; echo changed > a.md`)
	for range 3 {
		mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 0, "failed": 2, "left": 2})
	}
	msg := "memory store " + id + " is attached to this session read-only"
	m.WaitOutput(1, "refused by the store: "+msg, mtPollTimeout)
	if n := len(m.Lines("refused by the store")); n != 1 {
		t.Errorf("%d lines say the store refused, want 1:\n%s", n, m.Output())
	}
	if strings.Contains(m.Output(), "unreachable") {
		t.Errorf("the log calls a store that answers 403 unreachable:\n%s", m.Output())
	}
	ms := stStatus(t, "--state-dir", stateDir).mount(t, m.Dir)
	if ms.Sync.Unreachable || ms.Sync.Refused != msg {
		t.Errorf("status: unreachable %v, refused %q; want not unreachable, refused %q", ms.Sync.Unreachable, ms.Sync.Refused, msg)
	}
	for _, c := range ms.Sync.Pending {
		if c.Reason != syncqueue.ReasonCredential || !strings.Contains(c.Error, msg) {
			t.Errorf("%s %s waits for %q (%s), want %q with the store's message", c.Op, c.Path, c.Reason, c.Error, syncqueue.ReasonCredential)
		}
	}
	text := stText(t, "--state-dir", stateDir)
	// (Lines are cut at 100 columns: the store's id takes 35.)
	for _, s := range []string{"now         REFUSED BY THE STORE: memory store " + id, "create  /b.md  refused by the store: memory store " + id,
		"update  /a.md  refused by the store: memory store " + id} {
		if !strings.Contains(text, s) {
			t.Errorf("memfs status does not say %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "UNREACHABLE") {
		t.Errorf("memfs status calls the store unreachable:\n%s", text)
	}
	m.Kill()
	unix.Unmount(m.Dir, unix.MNT_DETACH)
}

// Every figure of memfs status's text equals the JSON's,
// for a mount with a change waiting for each reason a test can make at
// once: files closed while the state dir was full (never journaled), new
// files at the store's memory cap, content that is not UTF-8, a delete
// within its delay, and a conflict kept.
func TestStatusViewsAgree(t *testing.T) {
	e := newMtEnvWith(t, map[string]string{"/1.md": "1\n", "/2.md": "2\n", "/3.md": "3\n"}, harness.ServeOptions{Args: []string{"--max-memories-per-store", "5"}})
	proxy := harness.NewFaultProxy(t, e.serve.URL)
	disk := harness.SmallTmpfs(t, "3m")
	m := e.mountVia(proxy.URL(), filepath.Join(disk, "state"), "60s")
	// The two views are two looks: nothing may move between them but the
	// test, so the content is all fetched first.
	mtPoll(t, "the content fetched", func() (bool, string) {
		c := stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir).Sync.Content
		return c.Fetched == c.Total, fmt.Sprintf("%+v", c)
	})

	// A conflict: /3.md changes here while the store is away, and there too.
	proxy.Cut()
	mtMustSh(t, m.Dir, `echo three, mine > 3.md`)
	theirs := "three, theirs\n"
	if _, err := e.cl.UpdateMemory(t.Context(), e.storeID, e.memories()["/3.md"].ID, store.UpdateMemoryInput{Content: &theirs}); err != nil {
		t.Fatal(err)
	}
	proxy.Pass()
	mtPoll(t, "the conflict to be kept", func() (bool, string) {
		m.SyncNow(mtPassTimeout)
		ms := stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir)
		return ms.Conflicts == 1, fmt.Sprintf("%+v", ms)
	})
	// Four new files for two places, content that is not UTF-8, a delete.
	mtMustSh(t, m.Dir, `for i in 1 2 3 4; do echo new $i > new$i.md; done; printf '\377' > bin.md; rm 2.md`)
	m.SyncNow(mtPassTimeout)
	// The state dir fills: three closes fail, their files keep the content.
	harness.FillDisk(t, disk)
	for i := range 3 {
		p := filepath.Join(m.Dir, fmt.Sprintf("full%d.md", i))
		if err := os.WriteFile(p, []byte(strings.Repeat("written while the state dir is full\n", 100)), 0o644); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write %s on a full state dir: %v, want ENOSPC", p, err)
		}
	}

	ms := stStatus(t, "--state-dir", e.stateDir).mount(t, m.Dir)
	text := stText(t, "--state-dir", e.stateDir)
	s := ms.Sync
	byOp := map[string]int{}
	for _, c := range s.Pending {
		byOp[c.Op]++
	}
	t.Logf("pending by op %v, JSON counts: %d uploads (%d unjournaled), %d deletes; %d conflicts", byOp, s.PendingUploads, s.PendingUnjournaled, s.PendingDeletes, ms.Conflicts)
	// The JSON agrees with itself, and has what the test made.
	if s.PendingUploads != len(s.Pending)-byOp["delete"] || s.PendingDeletes != byOp["delete"] || s.PendingUnjournaled != byOp["unjournaled"] {
		t.Errorf("the JSON's counts (%d uploads, %d deletes, %d unjournaled) are not its list's: %v", s.PendingUploads, s.PendingDeletes, s.PendingUnjournaled, byOp)
	}
	if byOp["unjournaled"] != 3 || byOp["delete"] != 1 || byOp["create"] != 3 || ms.Conflicts != 1 || !s.AtCap {
		t.Errorf("status %+v (conflicts %d): want 3 unjournaled, 1 delete, 3 creates (2 at the cap, bin.md), the conflict, the cap", byOp, ms.Conflicts)
	}

	// The text's block for the mount.
	block := text[strings.Index(text, m.Dir+"\n"):]
	if end := strings.Index(block, "\n\n"); end >= 0 {
		block = block[:end]
	}
	sm := regexp.MustCompile(`\n  pending     (\d+) uploads?(?: \((\d+) not journaled yet\))?, (\d+) deletes?; journal (.+)\n`).FindStringSubmatch(block)
	if sm == nil {
		t.Fatalf("no pending line in the text:\n%s", block)
	}
	atoi := func(s string) int {
		n, _ := strconv.Atoi(s)
		return n
	}
	if atoi(sm[1]) != s.PendingUploads || atoi(sm[2]) != s.PendingUnjournaled || atoi(sm[3]) != s.PendingDeletes {
		t.Errorf("the text says %q; the JSON %d uploads (%d unjournaled), %d deletes", sm[0], s.PendingUploads, s.PendingUnjournaled, s.PendingDeletes)
	}
	if want := stHumanBytes(s.JournalBytes); sm[4] != want {
		t.Errorf("the text's journal is %s, the JSON's %d bytes (%s)", sm[4], s.JournalBytes, want)
	}
	if want := fmt.Sprintf("\n  conflicts   %d\n", ms.Conflicts); !strings.Contains(block, want) {
		t.Errorf("the text lacks %q:\n%s", want, block)
	}
	if c := s.Content; c.Fetched < c.Total && !strings.Contains(block, fmt.Sprintf("content     %d of %d memories", c.Fetched, c.Total)) {
		t.Errorf("the text does not give the content's %d of %d:\n%s", c.Fetched, c.Total, block)
	}
	if strings.Contains(block, "memory cap  REACHED") != s.AtCap || strings.Contains(block, "STATE DIR FULL") != s.NoSpace {
		t.Errorf("the text's cap and full state dir disagree with the JSON's at_cap %v, no_space %v:\n%s", s.AtCap, s.NoSpace, block)
	}
	// One waiting line per pending change, with its reason.
	lines := regexp.MustCompile(`(?m)^    (create|update|move|delete|unjournaled) +(\S+) +(.*)$`).FindAllStringSubmatch(block, -1)
	if len(lines) != len(s.Pending) {
		t.Errorf("the text lists %d waiting changes, the JSON %d:\n%s", len(lines), len(s.Pending), block)
	}
	for _, c := range s.Pending {
		found := false
		for _, l := range lines {
			if l[1] == c.Op && l[2] == c.Path && strings.HasPrefix(l[3], c.Reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("the text has no line for %s %s (%s):\n%s", c.Op, c.Path, c.Reason, block)
		}
	}
	m.Kill()
	unix.Unmount(m.Dir, unix.MNT_DETACH)
}

// stHumanBytes is how memfs status writes a size.
func stHumanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < 2 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB"}[i])
}
