package test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/test/harness"
)

// Convergence of real `memfs mount` processes with the store and with each
// other: remote edits show on the other mount in about a second, collisions
// end with the store's version everywhere and the loser in the losing
// mount's conflict log (read with the real `memfs conflicts` commands), an
// open handle survives a remote change, and an outage of memfs serve loses
// and duplicates nothing.

// Bounds on waiting, never expected durations.
const (
	cvShowBound = 10 * time.Second // a remote change showing on a mount (expected: ~1 s)
	cvPassBound = 60 * time.Second // one SIGUSR1 pass
	cvExitBound = 45 * time.Second // final sync and unmount
	cvCmdBound  = 30 * time.Second // one memfs command
)

// cvEnv is one memfs serve with one store.
type cvEnv struct {
	t       *testing.T
	serve   *harness.Serve
	cl      *client.Client
	storeID string
	base    string
	mode    string // the --mount-mode of its mounts ("": none, auto)
}

func newCvEnv(t *testing.T, files map[string]string) *cvEnv {
	t.Helper()
	return newCvEnvIn(t, "", files)
}

// newCvEnvIn is newCvEnv for mounts in mode (mtFUSE, mtDirectory).
func newCvEnvIn(t *testing.T, mode string, files map[string]string) *cvEnv {
	t.Helper()
	mtRequireMode(t, mode)
	e := &cvEnv{t: t, serve: harness.StartServe(t, harness.ServeOptions{}), base: t.TempDir(), mode: mode}
	cl, err := client.New(client.Options{BaseURL: e.serve.URL, APIKey: e.serve.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	st, err := cl.CreateStore(e.ctx(), store.CreateStoreInput{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	e.storeID = st.ID
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if _, err := cl.CreateMemory(e.ctx(), e.storeID, p, files[p]); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	return e
}

func (e *cvEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// cvMount is one memfs mount process of the env's store.
type cvMount struct {
	*harness.Mount
	stateDir string
}

// mount starts memfs mount of the store at base/name with its own state
// dir and a 60 s sync interval: uploads happen on SIGUSR1 passes, so each
// test decides when.
func (e *cvEnv) mount(name string) *cvMount {
	e.t.Helper()
	return e.mountEvery(name, "60s")
}

// mountEvery is mount with another --memory-sync-interval.
func (e *cvEnv) mountEvery(name, interval string) *cvMount {
	e.t.Helper()
	state := filepath.Join(e.base, "state-"+name)
	args := []string{"--memory-sync-interval", interval, "--memory-sync-delete-delay", "1ms"}
	if e.mode != "" {
		args = append(args, "--mount-mode", e.mode)
	}
	m := harness.StartMount(e.t, harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: e.storeID,
		Dir: filepath.Join(e.base, name), StateDir: state, Args: args, Directory: e.mode == mtDirectory})
	return &cvMount{Mount: m, stateDir: state}
}

// put writes a file on a mount (open, write, close), creating parents.
func (m *cvMount) put(t *testing.T, p, content string) {
	t.Helper()
	abs := filepath.Join(m.Dir, p)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s on %s: %v", p, m.Dir, err)
	}
}

// files reads every file on a mount but the marker: store path -> content.
func (m *cvMount) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(m.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == ".anthropic-memory-store" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, m.Dir)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", m.Dir, err)
	}
	return out
}

// sync runs a SIGUSR1 pass and returns its counts.
func (m *cvMount) sync(t *testing.T) map[string]int {
	t.Helper()
	return mtPassCounts(t, m.SyncNow(cvPassBound))
}

// stop ends the process with Ctrl-C and checks it exited 0.
func (m *cvMount) stop(t *testing.T) {
	t.Helper()
	m.Signal(os.Interrupt)
	if code := m.Wait(cvExitBound); code != 0 {
		t.Fatalf("memfs mount exited %d after SIGINT:\n%s", code, m.Output())
	}
}

// cvWaitFile polls a mount until path p holds content (or, with gone, no
// longer exists), through open/read/close and a listing of its directory
// as any program would see it, and returns how long that took. It fails
// the test at cvShowBound.
func cvWaitFile(t *testing.T, m *cvMount, p, content string, gone bool) time.Duration {
	t.Helper()
	abs := filepath.Join(m.Dir, p)
	start := time.Now()
	for {
		b, err := os.ReadFile(abs)
		listed := false
		if ents, derr := os.ReadDir(filepath.Dir(abs)); derr == nil {
			listed = slices.ContainsFunc(ents, func(d os.DirEntry) bool { return d.Name() == filepath.Base(abs) })
		}
		if gone && errors.Is(err, os.ErrNotExist) && !listed {
			return time.Since(start)
		}
		if !gone && err == nil && string(b) == content && listed {
			return time.Since(start)
		}
		if time.Since(start) > cvShowBound {
			t.Fatalf("%s on %s: after %s it holds %q (err %v, listed %v), want %q (gone %v)\n%s",
				p, m.Dir, cvShowBound, b, err, listed, content, gone, m.Output())
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// cvLatencies collects how long remote changes took to show.
type cvLatencies []time.Duration

func (l cvLatencies) log(t *testing.T) {
	t.Helper()
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	t.Logf("remote change -> visible on the other mount: %d changes, median %s, max %s (design goal ~1 s)",
		len(s), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// contents is the store: path -> content; a path listed twice fails the test.
func (e *cvEnv) contents() map[string]string {
	e.t.Helper()
	ms, err := e.cl.AllMemories(e.ctx(), e.storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		if _, dup := out[m.Path]; dup {
			e.t.Fatalf("the store lists %s twice", m.Path)
		}
		out[m.Path] = *m.Content
	}
	return out
}

// memory is the memory at p.
func (e *cvEnv) memory(p string) *store.Memory {
	e.t.Helper()
	m, err := e.cl.MemoryByPath(e.ctx(), e.storeID, p)
	if err != nil {
		e.t.Fatalf("memory %s: %v", p, err)
	}
	return m
}

// ops is the operations of a memory's versions, oldest first.
func (e *cvEnv) ops(memoryID string) []string {
	e.t.Helper()
	var out []string
	for v, err := range e.cl.Versions(e.ctx(), e.storeID, store.ListVersionsOptions{MemoryID: memoryID}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, v.Operation)
	}
	slices.Reverse(out)
	return out
}

// cvMemfs runs the memfs binary and returns stdout, stderr and the exit code.
func cvMemfs(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cvCmdBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("memfs %v did not finish within %s", args, cvCmdBound)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("memfs %v: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// cvConflict is one line of `memfs conflicts list`.
type cvConflict struct {
	id, store, path, localSHA, storeSHA string
}

// cvConflicts runs `memfs conflicts list --state-dir DIR` and parses it.
func cvConflicts(t *testing.T, stateDir string) []cvConflict {
	t.Helper()
	out, errb, code := cvMemfs(t, nil, "conflicts", "list", "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("memfs conflicts list exited %d: %s%s", code, out, errb)
	}
	var cs []cvConflict
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		// ID TIME STORE PATH local SHA12 store SHA12
		f := strings.Fields(line)
		if len(f) != 8 || f[4] != "local" || f[6] != "store" {
			t.Fatalf("memfs conflicts list: unexpected line %q", line)
		}
		cs = append(cs, cvConflict{id: f[0], store: f[2], path: f[3], localSHA: f[5], storeSHA: f[7]})
	}
	if len(cs) == 0 && !strings.Contains(errb, "no conflicts") {
		t.Errorf("memfs conflicts list printed nothing and did not say there are no conflicts: %q", errb)
	}
	return cs
}

// cvShow runs `memfs conflicts show --state-dir DIR ID` and returns the
// bytes it printed.
func cvShow(t *testing.T, stateDir, id string) string {
	t.Helper()
	out, errb, code := cvMemfs(t, nil, "conflicts", "show", "--state-dir", stateDir, id)
	if code != 0 {
		t.Fatalf("memfs conflicts show %s exited %d: %s", id, code, errb)
	}
	return out
}

// cvCount counts the output lines holding substr.
func cvCount(m *cvMount, substr string) int {
	n := 0
	for _, l := range strings.Split(m.Output(), "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// TestConvergeTwoMounts: edits on either mount, with `memfs memories put`
// and with the API show on the other mount within about a second of
// reaching the store; in the end both mounts and the store agree and
// nothing was a conflict. In both modes.
func TestConvergeTwoMounts(t *testing.T) {
	t.Parallel()
	mtInModes(t, testConvergeTwoMounts)
}

func testConvergeTwoMounts(t *testing.T, mode string) {
	e := newCvEnvIn(t, mode, map[string]string{"/shared.md": "v0\n", "/dir/x.md": "x0\n", "/gone.md": "soon gone\n"})
	a, b := e.mount("a"), e.mount("b")
	var lat cvLatencies

	// A edits and creates; B sees it once A's pass has uploaded it.
	a.put(t, "/shared.md", "v1 from A\n")
	a.put(t, "/from-a/new.md", "new from A\n")
	if c := a.sync(t); c["uploaded"] != 2 || c["failed"] != 0 {
		t.Fatalf("A's pass: %v, want 2 uploaded", c)
	}
	lat = append(lat, cvWaitFile(t, b, "/shared.md", "v1 from A\n", false))
	lat = append(lat, cvWaitFile(t, b, "/from-a/new.md", "new from A\n", false))

	// B edits, renames and deletes; A sees each.
	b.put(t, "/dir/x.md", "x1 from B\n")
	if err := os.Rename(filepath.Join(b.Dir, "shared.md"), filepath.Join(b.Dir, "renamed.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(b.Dir, "gone.md")); err != nil {
		t.Fatal(err)
	}
	if c := b.sync(t); c["uploaded"] != 2 {
		t.Fatalf("B's pass: %v, want 2 uploaded (the edit and the rename)", c)
	}
	lat = append(lat, cvWaitFile(t, a, "/dir/x.md", "x1 from B\n", false))
	lat = append(lat, cvWaitFile(t, a, "/renamed.md", "v1 from A\n", false))
	lat = append(lat, cvWaitFile(t, a, "/shared.md", "", true))
	mtLetDeleteDelayPass()
	if c := b.sync(t); c["deleted"] != 1 {
		t.Fatalf("B's second pass: %v, want the delete sent", c)
	}
	lat = append(lat, cvWaitFile(t, a, "/gone.md", "", true))

	// memfs memories put (a new memory and an edit) shows on both mounts.
	src := filepath.Join(e.base, "cli.txt")
	env := []string{"MEMFS_API_URL=" + e.serve.URL, "MEMFS_API_KEY=" + e.serve.AdminKey}
	for _, p := range []string{"/cli.md", "/from-a/new.md"} {
		if err := os.WriteFile(src, []byte("put by the CLI at "+p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errb, code := cvMemfs(t, env, "memories", "put", e.storeID, p, src); code != 0 {
			t.Fatalf("memfs memories put %s: exit %d\n%s%s", p, code, out, errb)
		}
		for _, m := range []*cvMount{a, b} {
			lat = append(lat, cvWaitFile(t, m, p, "put by the CLI at "+p+"\n", false))
		}
	}
	// And a change through the API.
	moved := "/deep/er/moved.md"
	if _, err := e.cl.UpdateMemory(e.ctx(), e.storeID, e.memory("/dir/x.md").ID, store.UpdateMemoryInput{Path: &moved}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*cvMount{a, b} {
		lat = append(lat, cvWaitFile(t, m, moved, "x1 from B\n", false))
		cvWaitFile(t, m, "/dir/x.md", "", true)
	}
	lat.log(t)

	want := map[string]string{"/renamed.md": "v1 from A\n", "/from-a/new.md": "put by the CLI at /from-a/new.md\n",
		"/cli.md": "put by the CLI at /cli.md\n", moved: "x1 from B\n"}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("store:\n%s", mtDiff(got, want))
	}
	for _, m := range []*cvMount{a, b} {
		if got := m.files(t); !maps.Equal(got, want) {
			t.Errorf("mount %s:\n%s", m.Dir, mtDiff(got, want))
		}
		if c := m.sync(t); c["uploaded"]+c["deleted"]+c["failed"]+c["left"] != 0 {
			t.Errorf("a last pass on %s: %v, want nothing to do", m.Dir, c)
		}
		if cs := cvConflicts(t, m.stateDir); len(cs) != 0 {
			t.Errorf("conflicts on %s: %+v, want none", m.Dir, cs)
		}
		if n := cvCount(m, "conflict: "); n != 0 {
			t.Errorf("%s logged %d conflict lines:\n%s", m.Dir, n, m.Output())
		}
	}
	// Versions: each change went up once.
	if ops := e.ops(e.memory("/renamed.md").ID); !slices.Equal(ops, []string{"created", "modified", "modified"}) {
		t.Errorf("/renamed.md versions %v, want created, modified (A's edit), modified (B's rename)", ops)
	}
	a.stop(t)
	b.stop(t)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("store after both mounts ended:\n%s", mtDiff(got, want))
	}
}

// TestConvergeCollision: the same file changed on two mounts, and a new
// file created at the same path on both. The first to upload wins; the
// other mount takes the store's version and keeps its own in its conflict
// log, which `memfs conflicts list` and `show` print exactly. In both
// modes.
func TestConvergeCollision(t *testing.T) {
	t.Parallel()
	mtInModes(t, testConvergeCollision)
}

func testConvergeCollision(t *testing.T, mode string) {
	e := newCvEnvIn(t, mode, map[string]string{"/c.md": "base\n"})
	a, b := e.mount("a"), e.mount("b")

	// B's versions: no final newline, a tab, non-ASCII, a CR.
	bEdit := "B's edit\tcafé ☕\r\nno final newline"
	bNew := "B made this first\n"
	b.put(t, "/c.md", bEdit)
	b.put(t, "/n/new.md", bNew)
	a.put(t, "/c.md", "A's edit\n")
	a.put(t, "/n/new.md", "A made this\n")
	if c := a.sync(t); c["uploaded"] != 2 {
		t.Fatalf("A's pass: %v, want 2 uploaded", c)
	}
	var lat cvLatencies
	lat = append(lat, cvWaitFile(t, b, "/c.md", "A's edit\n", false))
	lat = append(lat, cvWaitFile(t, b, "/n/new.md", "A made this\n", false))
	lat.log(t)
	if c := b.sync(t); c["uploaded"]+c["failed"]+c["left"] != 0 {
		t.Errorf("B's pass after losing: %v, want nothing to upload", c)
	}
	want := map[string]string{"/c.md": "A's edit\n", "/n/new.md": "A made this\n"}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("store:\n%s", mtDiff(got, want))
	}
	for _, m := range []*cvMount{a, b} {
		if got := m.files(t); !maps.Equal(got, want) {
			t.Errorf("mount %s:\n%s", m.Dir, mtDiff(got, want))
		}
	}
	// B's edits are nowhere on B now: the invariant holds through its
	// conflict log.
	mtCheckSynced(t, e.cl, e.storeID, b.stateDir, b.Dir, map[string]string{"/c.md": bEdit, "/n/new.md": bNew}, false)

	cs := cvConflicts(t, b.stateDir)
	sort.Slice(cs, func(i, j int) bool { return cs[i].path < cs[j].path })
	if len(cs) != 2 || cs[0].path != "/c.md" || cs[1].path != "/n/new.md" {
		t.Fatalf("B's conflicts: %+v, want /c.md and /n/new.md", cs)
	}
	for i, c := range cs {
		kept, theirs := []string{bEdit, bNew}[i], want[c.path]
		if c.store != e.storeID || !strings.HasPrefix(store.SHA256Hex(kept), c.localSHA) || !strings.HasPrefix(store.SHA256Hex(theirs), c.storeSHA) {
			t.Errorf("conflict %+v: want store %s, local sha of %q, store sha of %q", c, e.storeID, kept, theirs)
		}
		if got := cvShow(t, b.stateDir, c.id); got != kept {
			t.Errorf("memfs conflicts show %s = %q, want %q exactly", c.id, got, kept)
		}
	}
	if n := cvCount(b, "conflict: the store's version won"); n != 2 {
		t.Errorf("B logged %d conflict warnings, want 2 (one per file):\n%s", n, b.Output())
	}
	if cs := cvConflicts(t, a.stateDir); len(cs) != 0 {
		t.Errorf("A's conflicts: %+v, want none (A won)", cs)
	}
	// Show refuses what is not a conflict id of the state dir.
	if _, _, code := cvMemfs(t, nil, "conflicts", "show", "--state-dir", b.stateDir, "../state-a"); code == 0 {
		t.Error("memfs conflicts show ../state-a succeeded")
	}
	// Versions: nothing but A's uploads reached the store.
	if ops := e.ops(e.memory("/c.md").ID); !slices.Equal(ops, []string{"created", "modified"}) {
		t.Errorf("/c.md versions %v, want [created modified]", ops)
	}
	if ops := e.ops(e.memory("/n/new.md").ID); !slices.Equal(ops, []string{"created"}) {
		t.Errorf("/n/new.md versions %v, want [created]", ops)
	}
	a.stop(t)
	b.stop(t)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("store after both mounts ended:\n%s", mtDiff(got, want))
	}
}

// TestConvergeOpenHandle: remote changes to files open for writing on the
// mount. The handles keep working; their next writes apply to the new
// content; what was written before the remote change (not yet closed) is a
// local change that lost: it is in the conflict log; nothing crashes.
func TestConvergeOpenHandle(t *testing.T) {
	t.Parallel()
	e := newCvEnv(t, map[string]string{"/h.md": "remote v1\n", "/w.md": "w1\n", "/d.md": "0123456789\n"})
	m := e.mount("m")
	open := func(name string, flag int) *os.File {
		f, err := os.OpenFile(filepath.Join(m.Dir, name), flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	// Opened before the remote changes: an appender (>>) and a writer at
	// explicit offsets that wrote nothing yet; a writer that wrote a draft
	// and did not close; and a new file being written.
	app := open("h.md", os.O_WRONLY|os.O_APPEND)
	rw := open("w.md", os.O_RDWR)
	draft := open("d.md", os.O_RDWR)
	if _, err := draft.WriteAt([]byte("draft"), 0); err != nil {
		t.Fatal(err)
	}
	newf := open("n.md", os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if _, err := newf.WriteString("my new draft\n"); err != nil {
		t.Fatal(err)
	}

	remote := map[string]string{"/h.md": "remote v2, longer than v1\n", "/w.md": "w2 remote\n", "/d.md": "remote d\n"}
	for _, p := range slices.Sorted(maps.Keys(remote)) {
		c := remote[p]
		if _, err := e.cl.UpdateMemory(e.ctx(), e.storeID, e.memory(p).ID, store.UpdateMemoryInput{Content: &c}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cl.CreateMemory(e.ctx(), e.storeID, "/n.md", "their new file\n"); err != nil {
		t.Fatal(err)
	}
	for p, c := range remote {
		cvWaitFile(t, m, p, c, false)
	}
	cvWaitFile(t, m, "/n.md", "their new file\n", false)

	// The open handles see the new content and write on top of it.
	if _, err := app.WriteString("appended\n"); err != nil {
		t.Fatalf("append through the handle opened before the remote change: %v", err)
	}
	buf := make([]byte, 64)
	n, err := rw.ReadAt(buf, 0)
	if string(buf[:n]) != remote["/w.md"] {
		t.Errorf("read through the open handle: %q (%v), want the new content %q", buf[:n], err, remote["/w.md"])
	}
	for _, f := range []*os.File{rw, draft, newf} {
		if _, err := f.WriteAt([]byte("W"), 0); err != nil {
			t.Fatalf("write through %s opened before the remote change: %v", f.Name(), err)
		}
	}
	for _, f := range []*os.File{app, rw, draft, newf} {
		if err := f.Close(); err != nil {
			t.Errorf("close %s: %v", f.Name(), err)
		}
	}
	want := map[string]string{"/h.md": "remote v2, longer than v1\nappended\n", "/w.md": "W2 remote\n", "/d.md": "Wemote d\n", "/n.md": "Wheir new file\n"}
	if got := m.files(t); !maps.Equal(got, want) {
		t.Fatalf("mount after the writes:\n%s", mtDiff(got, want))
	}
	if c := m.sync(t); c["uploaded"] != 4 || c["failed"] != 0 {
		t.Errorf("pass: %v, want the 4 files uploaded", c)
	}
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("store:\n%s", mtDiff(got, want))
	}
	// The drafts written before the remote changes are kept.
	cs := cvConflicts(t, m.stateDir)
	sort.Slice(cs, func(i, j int) bool { return cs[i].path < cs[j].path })
	if len(cs) != 2 || cs[0].path != "/d.md" || cs[1].path != "/n.md" {
		t.Fatalf("conflicts: %+v, want /d.md and /n.md (the unclosed drafts)", cs)
	}
	for i, kept := range []string{"draft56789\n", "my new draft\n"} {
		if got := cvShow(t, m.stateDir, cs[i].id); got != kept {
			t.Errorf("conflict of %s holds %q, want %q", cs[i].path, got, kept)
		}
	}
	if !m.Running() {
		t.Fatalf("memfs mount died:\n%s", m.Output())
	}
	m.stop(t)
}

// TestConvergeOutage: memfs serve is down for more than two sync
// intervals while the mount is used; when it is back, everything written
// meanwhile is uploaded exactly once, nothing is lost or duplicated, and
// the log says "store unreachable" once and "store recovered" once.
func TestConvergeOutage(t *testing.T) {
	t.Parallel()
	e := newCvEnv(t, map[string]string{"/base.md": "base\n", "/keep.md": "keep\n"})
	baseID, keepID := e.memory("/base.md").ID, e.memory("/keep.md").ID
	a := e.mountEvery("a", "5s")
	want := map[string]string{"/base.md": "base\n", "/keep.md": "keep\n"}
	// The outage starts once the mount has its content (fetched behind
	// the listing): a file never fetched reads EIO during an outage
	// (TestMountLazyUnreachableThenRecovers).
	lzWaitContent(t, a.stateDir, a.Dir)

	e.serve.Stop()
	down := time.Now()
	// Use the mount all through the outage: every 2 s a new file and an
	// appended line, then everything read back. The ticker paces the work
	// over the outage; it waits for no outcome.
	const outage = 12 * time.Second // more than two 5 s intervals
	pace := time.NewTicker(2 * time.Second)
	defer pace.Stop()
	for i := 0; ; i++ {
		p := fmt.Sprintf("/outage/%d.md", i)
		want[p] = fmt.Sprintf("written %d while the store was down\n", i)
		a.put(t, p, want[p])
		want["/base.md"] += fmt.Sprintf("line %d\n", i)
		a.put(t, "/base.md", want["/base.md"])
		if got := a.files(t); !maps.Equal(got, want) {
			t.Fatalf("the mount does not serve what was written during the outage:\n%s", mtDiff(got, want))
		}
		if i == 1 {
			// A pass asked for during the outage fails and keeps everything.
			if c := a.sync(t); c["uploaded"] != 0 || c["failed"] == 0 || c["left"] == 0 {
				t.Errorf("pass during the outage: %v, want uploaded=0, failed>0, left>0", c)
			}
		}
		if time.Since(down) >= outage {
			break
		}
		<-pace.C
	}
	a.WaitOutput(1, "store unreachable", cvPassBound)
	if got := e.serve.Output(); got != "" && strings.Contains(got, "panic") {
		t.Fatalf("memfs serve panicked:\n%s", got)
	}
	e.serve.Restart()
	back := time.Now()
	a.WaitOutput(1, "store recovered", cvPassBound)
	t.Logf("outage %s; recovered %s after the restart", back.Sub(down).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	deadline := time.Now().Add(cvPassBound)
	for !maps.Equal(e.contents(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the store after the outage:\n%s", mtDiff(e.contents(), want))
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	// Exactly once: one modification of /base.md (the net change, however
	// many writes and failed passes), one creation per new file, the same
	// memory ids, nothing else.
	if ops := e.ops(baseID); !slices.Equal(ops, []string{"created", "modified"}) {
		t.Errorf("/base.md versions %v, want [created modified]", ops)
	}
	if ops := e.ops(keepID); !slices.Equal(ops, []string{"created"}) {
		t.Errorf("/keep.md versions %v, want [created]", ops)
	}
	for p := range want {
		if strings.HasPrefix(p, "/outage/") {
			if ops := e.ops(e.memory(p).ID); !slices.Equal(ops, []string{"created"}) {
				t.Errorf("%s versions %v, want [created]", p, ops)
			}
		}
	}
	if e.memory("/base.md").ID != baseID {
		t.Errorf("/base.md changed id")
	}
	if c := a.sync(t); c["uploaded"]+c["failed"]+c["left"] != 0 {
		t.Errorf("a pass after the recovery: %v, want nothing to do", c)
	}
	// The overlay follows the store again (after its capped backoff).
	v := "changed elsewhere after the outage\n"
	if _, err := e.cl.UpdateMemory(e.ctx(), e.storeID, keepID, store.UpdateMemoryInput{Content: &v}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		if b, _ := os.ReadFile(filepath.Join(a.Dir, "keep.md")); string(b) == v {
			break
		}
		if time.Since(start) > 45*time.Second {
			t.Fatalf("a remote change after the outage did not reach the mount within 45 s:\n%s", a.Output())
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	t.Logf("first remote change after the outage shown after %s", time.Since(start).Round(time.Millisecond))
	want["/keep.md"] = v
	if got := a.files(t); !maps.Equal(got, want) {
		t.Errorf("mount after the outage:\n%s", mtDiff(got, want))
	}
	if n := cvCount(a, "store unreachable"); n != 1 {
		t.Errorf("%d 'store unreachable' lines, want 1:\n%s", n, a.Output())
	}
	if n := cvCount(a, "store recovered"); n != 1 {
		t.Errorf("%d 'store recovered' lines, want 1:\n%s", n, a.Output())
	}
	a.stop(t)
	if got := e.contents(); !maps.Equal(got, want) {
		t.Errorf("store after the mount ended:\n%s", mtDiff(got, want))
	}
}
