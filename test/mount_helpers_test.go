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

// mtEnv is one memfs serve process with one store, and a directory to
// mount it under.
type mtEnv struct {
	t        *testing.T
	serve    *harness.Serve
	cl       *client.Client
	storeID  string
	stateDir string
	dir      string // the mount point: does not exist until memfs mount creates it
}

// newMtEnv starts memfs serve and creates a store holding files
// (path -> content).
func newMtEnv(t *testing.T, files map[string]string) *mtEnv {
	t.Helper()
	return newMtEnvWith(t, files, harness.ServeOptions{})
}

// newMtEnvWith is newMtEnv with memfs serve options.
func newMtEnvWith(t *testing.T, files map[string]string, so harness.ServeOptions) *mtEnv {
	t.Helper()
	mtRequireFUSE(t)
	base := t.TempDir()
	e := &mtEnv{t: t, serve: harness.StartServe(t, so), stateDir: filepath.Join(base, "state"), dir: filepath.Join(base, "mnt")}
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
	return harness.MountOptions{URL: e.serve.URL, APIKey: e.serve.AdminKey, Store: e.storeID, Dir: e.dir, StateDir: e.stateDir,
		Args: append([]string{"--memory-sync-interval", "60s"}, args...)}
}

// mount starts memfs mount on e.dir with a 60 s interval and args.
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
