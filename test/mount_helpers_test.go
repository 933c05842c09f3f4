package test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// Helpers of the memfs mount tests (mount_test.go, mount_deletion_test.go).

// Deadlines: bounds on waiting, never expected durations.
const (
	mtPassTimeout = 60 * time.Second // one SIGUSR1 pass (retries against a stopped server included)
	mtExitTimeout = 45 * time.Second // final sync (bounded at 30 s) and unmount
	mtShTimeout   = 30 * time.Second // one shell command on the mount
	mtPollTimeout = 20 * time.Second // the store showing what a pass uploaded
)

// mtDeleteDelay is the --memory-sync-delete-delay of tests whose deletes
// are due at the second pass.
const mtDeleteDelay = "1ms"

// mtLetDeleteDelayPass makes sure more than mtDeleteDelay has passed since
// a delete was made or first noted by a pass: two SIGUSR1 passes can run
// within a millisecond of each other. This is not a wait for an outcome
// (the engine compares wall-clock durations), so a fixed sleep is exact.
func mtLetDeleteDelayPass() { time.Sleep(2 * time.Millisecond) }

// mtRequireFUSE skips a test that can't mount: not root, or no
// /dev/fuse. With CI=true it fails instead (as run-tests.sh does for a
// missing PostgreSQL): CI runs as root with /dev/fuse and must really mount.
// It is the one such check of this package: every test that mounts calls it.
func mtRequireFUSE(t *testing.T) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("not running as root: these tests mount FUSE directly (no fusermount3); run them as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		skip("/dev/fuse is missing (%v): load the fuse module or give the container the device (--device /dev/fuse)", err)
	}
}

// The mount modes (--mount-mode). A test that makes sense in both runs
// once in each, as subtests named after the mode:
//
//	for _, mode := range mtModes {
//		t.Run(mode, func(t *testing.T) { e := newMtEnvIn(t, mode, files); ... })
//	}
//
// and branches on e.directory() where a directory's result differs
// (README, "Mount modes").
const (
	mtFUSE      = "fuse"
	mtDirectory = "directory"
)

// mtModes are the modes of the tests that run in both.
var mtModes = []string{mtFUSE, mtDirectory}

// mtRequireMode skips (fails with CI=true) a test that can't run in mode:
// FUSE needs root and /dev/fuse (mtRequireFUSE); a directory needs
// neither.
func mtRequireMode(t *testing.T, mode string) {
	t.Helper()
	if mode != mtDirectory {
		mtRequireFUSE(t)
	}
}

// mtRequireRoot skips (fails with CI=true) a test that needs root for
// itself, not for FUSE (a directory test that writes where only root may).
func mtRequireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("not running as root, and CI=true: %s", why)
	}
	t.Skipf("not running as root: %s", why)
}

// mtEnv is one memfs serve process with one store, and a directory to
// mount it under.
type mtEnv struct {
	t        *testing.T
	serve    *harness.Serve
	cl       *client.Client
	storeID  string
	stateDir string
	dir      string // the mount point: does not exist until memfs mount creates it
	// mode is the --mount-mode e.mount passes ("" passes none: auto,
	// which is FUSE wherever these tests run).
	mode string
}

// newMtEnv starts memfs serve and creates a store holding files
// (path -> content).
func newMtEnv(t *testing.T, files map[string]string) *mtEnv {
	t.Helper()
	return newMtEnvWith(t, files, harness.ServeOptions{})
}

// newMtEnvIn is newMtEnv for mounts in mode (mtFUSE, mtDirectory).
func newMtEnvIn(t *testing.T, mode string, files map[string]string) *mtEnv {
	t.Helper()
	return newMtEnvModeWith(t, mode, files, harness.ServeOptions{})
}

// newMtEnvWith is newMtEnv with memfs serve options.
func newMtEnvWith(t *testing.T, files map[string]string, so harness.ServeOptions) *mtEnv {
	t.Helper()
	return newMtEnvModeWith(t, "", files, so)
}

// newMtEnvModeWith is newMtEnvIn with memfs serve options.
func newMtEnvModeWith(t *testing.T, mode string, files map[string]string, so harness.ServeOptions) *mtEnv {
	t.Helper()
	mtRequireMode(t, mode)
	base := t.TempDir()
	e := &mtEnv{t: t, serve: harness.StartServe(t, so), stateDir: filepath.Join(base, "state"), dir: filepath.Join(base, "mnt"), mode: mode}
	cl, err := client.New(client.Options{BaseURL: e.serve.URL, APIKey: e.serve.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	st, err := cl.CreateStore(context.Background(), store.CreateStoreInput{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	e.storeID = st.ID
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if _, err := cl.CreateMemory(context.Background(), e.storeID, p, files[p]); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	return e
}

func (e *mtEnv) opts(args ...string) harness.MountOptions {
	pre := []string{"--memory-sync-interval", "60s"}
	if e.mode != "" {
		pre = append(pre, "--mount-mode", e.mode)
	}
	return harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: e.storeID, Dir: e.dir, StateDir: e.stateDir,
		Args: append(pre, args...), Directory: e.directory()}
}

// directory says e's mounts write the store into e.dir as a plain folder.
func (e *mtEnv) directory() bool { return e.mode == mtDirectory }

// mount starts memfs mount on e.dir with a 60 s interval, e's mode and
// args.
func (e *mtEnv) mount(args ...string) *harness.Mount {
	e.t.Helper()
	m := harness.StartMount(e.t, e.opts(args...))
	if m.Dir != e.dir {
		e.t.Fatalf("memfs mount says it mounted at %s, want %s", m.Dir, e.dir)
	}
	return m
}

// memories lists the store: path -> memory (with content). A path listed
// twice fails the test: the store never holds duplicates.
func (e *mtEnv) memories() map[string]store.Memory {
	e.t.Helper()
	ms, err := e.cl.AllMemories(context.Background(), e.storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]store.Memory{}
	for _, m := range ms {
		if _, dup := out[m.Path]; dup {
			e.t.Fatalf("the store lists %s twice", m.Path)
		}
		out[m.Path] = m
	}
	return out
}

// contents is the store as path -> content.
func (e *mtEnv) contents() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for p, m := range e.memories() {
		out[p] = *m.Content
	}
	return out
}

// waitStore polls the store until it holds exactly want, failing at the
// deadline with the difference.
func (e *mtEnv) waitStore(want map[string]string) {
	e.t.Helper()
	deadline := time.Now().Add(mtPollTimeout)
	for {
		got := e.contents()
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the store does not hold what it should:\n%s", mtDiff(got, want))
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// mtPoll polls cond until it holds, failing at mtPollTimeout with what
// cond last said.
func mtPoll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(mtPollTimeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s:\n%s", what, why)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// versions lists a memory's versions, oldest first.
func (e *mtEnv) versions(memoryID string) []store.Version {
	e.t.Helper()
	var out []store.Version
	for v, err := range e.cl.Versions(context.Background(), e.storeID, store.ListVersionsOptions{MemoryID: memoryID}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, v)
	}
	slices.Reverse(out)
	return out
}

// checkOps fails unless the memory's versions are exactly ops, oldest first.
func (e *mtEnv) checkOps(path, memoryID string, ops ...string) {
	e.t.Helper()
	var got []string
	for _, v := range e.versions(memoryID) {
		got = append(got, v.Operation)
	}
	if !slices.Equal(got, ops) {
		e.t.Errorf("%s (%s): versions %v, want %v", path, memoryID, got, ops)
	}
}

// mtDiff lists how got differs from want, one path a line.
func mtDiff(got, want map[string]string) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[p]; !ok {
			fmt.Fprintf(&b, "  missing %s\n", p)
		} else if g != want[p] {
			fmt.Fprintf(&b, "  %s = %q, want %q\n", p, g, want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "  unexpected %s = %q\n", p, got[p])
		}
	}
	return b.String()
}

// mtSh runs script with sh -c in dir, like a person at a terminal, with
// args as $1, $2, ..., and returns its stdout, stderr and error (an
// *exec.ExitError if it failed).
func mtSh(t *testing.T, dir, script string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mtShTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("sh -c %q in %s did not finish within %s (the mount hangs?)", script, dir, mtShTimeout)
	}
	return out.String(), errb.String(), err
}

// mtMustSh is mtSh for a command that must succeed; it returns stdout.
func mtMustSh(t *testing.T, dir, script string, args ...string) string {
	t.Helper()
	out, errb, err := mtSh(t, dir, script, args...)
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s%s", script, err, out, errb)
	}
	return out
}

// mtMountFiles reads every file on the mount (but the marker) through the
// shell: store path -> content.
func mtMountFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	list := mtMustSh(t, dir, "find . -type f ! -path ./.anthropic-memory-store | sort")
	for _, f := range strings.Split(strings.TrimSpace(list), "\n") {
		if f == "" {
			continue
		}
		out[strings.TrimPrefix(f, ".")] = mtMustSh(t, dir, `cat -- "$1"`, f)
	}
	return out
}

var mtCountRe = regexp.MustCompile(`\b(uploaded|deleted|failed|left|held_back|sending)=(\d+)`)

// mtPassCounts reads the counts of a sync log line.
func mtPassCounts(t *testing.T, line string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range mtCountRe.FindAllStringSubmatch(line, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	if _, ok := out["uploaded"]; !ok && strings.Contains(line, "sync pass") {
		t.Fatalf("no counts in %q", line)
	}
	return out
}

// mtCheckPass fails unless the pass logged these counts.
func mtCheckPass(t *testing.T, line string, want map[string]int) {
	t.Helper()
	got := mtPassCounts(t, line)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sync pass: %s=%d, want %d (%s)", k, got[k], v, line)
		}
	}
}

// mtStop sends SIGINT (Ctrl-C) and checks the end: exit 0, mount gone
// from /proc/self/mountinfo.
func mtStop(t *testing.T, m *harness.Mount) {
	t.Helper()
	mtStopWith(t, m, syscall.SIGINT)
}

// mtStopWith is mtStop with another signal (SIGTERM).
func mtStopWith(t *testing.T, m *harness.Mount, sig syscall.Signal) {
	t.Helper()
	mtStopExit(t, m, sig, 0)
}

// mtStopExit is mtStopWith expecting exit status code (sgExitLeft when
// changes stay in the journal).
func mtStopExit(t *testing.T, m *harness.Mount, sig syscall.Signal, code int) {
	t.Helper()
	m.Signal(sig)
	if got := m.Wait(mtExitTimeout); got != code {
		t.Fatalf("memfs mount exited %d after %v, want %d:\n%s", got, sig, code, m.Output())
	}
	if harness.IsMounted(m.Dir) {
		t.Fatalf("%s is still in /proc/self/mountinfo after memfs mount exited", m.Dir)
	}
}

// mtSnapshot describes a path and everything under it (type, mode,
// content), to show a refused mount left it exactly as found.
func mtSnapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d", p, fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// mtInModes runs body once per mount mode, as subtests named after it.
func mtInModes(t *testing.T, body func(t *testing.T, mode string)) {
	t.Helper()
	for _, mode := range mtModes {
		t.Run(mode, func(t *testing.T) { body(t, mode) })
	}
}

// checkSynced asserts the sync invariant on e's running mount m
// (mtCheckSynced).
func (e *mtEnv) checkSynced(m *harness.Mount, local map[string]string, gone bool) {
	e.t.Helper()
	mtCheckSynced(e.t, e.cl, e.storeID, e.stateDir, m.Dir, local, gone)
}

// mtCheckSynced asserts the sync invariant on the running mount of
// storeID at dir with stateDir, after a fault: every file it holds
// (local: path -> content, the marker left out) is in the store with
// that content, or pending in memfs status with a reason, or kept in the
// conflict log (memfs conflicts list); and, when gone, every memory of
// the store it does not hold is pending as a delete or a move (gone is
// false where deletes are not sent: log_only, disabled).
func mtCheckSynced(t *testing.T, cl *client.Client, storeID, stateDir, dir string, local map[string]string, gone bool) {
	t.Helper()
	ms, err := cl.AllMemories(context.Background(), storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	stored, ids := map[string]string{}, map[string]string{}
	for _, m := range ms {
		stored[m.Path], ids[m.Path] = *m.Content, m.ID
	}
	st := stStatus(t, "--state-dir", stateDir).mount(t, dir)
	for _, c := range st.Sync.Pending {
		if c.Reason == "" {
			t.Errorf("memfs status lists %s %s pending with no reason", c.Op, c.Path)
		}
	}
	conflicts := map[string][]string{}
	for _, c := range cvConflicts(t, stateDir) {
		conflicts[c.path] = append(conflicts[c.path], c.localSHA)
	}
	for _, p := range slices.Sorted(maps.Keys(local)) {
		content := local[p]
		if s, ok := stored[p]; ok && s == content {
			continue
		}
		if slices.ContainsFunc(st.Sync.Pending, func(c syncqueue.PendingChange) bool { return c.Path == p && c.Op != "delete" }) {
			continue
		}
		if slices.ContainsFunc(conflicts[p], func(sha string) bool { return strings.HasPrefix(store.SHA256Hex(content), sha) }) {
			continue
		}
		t.Errorf("sync invariant: %s (%q) is neither in the store (%q), nor pending in memfs status, nor in the conflict log\npending: %+v\nconflicts: %v",
			p, content, stored[p], st.Sync.Pending, conflicts)
	}
	if !gone {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(stored)) {
		if _, ok := local[p]; ok {
			continue
		}
		if slices.ContainsFunc(st.Sync.Pending, func(c syncqueue.PendingChange) bool {
			return (c.Op == "delete" && c.Path == p) || (c.Op == "move" && c.MemoryID == ids[p])
		}) {
			continue
		}
		t.Errorf("sync invariant: the store's %s is not on the mount, and memfs status lists no delete or move of it\npending: %+v", p, st.Sync.Pending)
	}
}
