package test

import (
	"context"
	"errors"
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

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/test/harness"
)

// Tests of memfs mount's mount(8) conventions: mount.memfs, -o options,
// --mkdir.

// mhHelper returns a symlink named mount.memfs to the memfs binary, as
// `ln -s /usr/local/bin/memfs /sbin/mount.memfs` makes it.
func mhHelper(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mount.memfs")
	if err := os.Symlink(harness.Binary(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// mhRun runs mount.memfs ARGS with the bare environment mount(8) gives a
// helper started from a systemd unit (no MEMFS_* variables, no HOME).
func mhRun(t *testing.T, helper string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// mount.memfs bounds its own wait (75 s); this bound only catches a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helper, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mount.memfs %q did not exit:\n%s%s", args, out.String(), errb.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// mhRunning reports whether pid is a live process (a zombie no longer
// counts: the detached memfs mount is reaped by init, not by the test).
func mhRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestMountHelper: mount.memfs, called through a symlink as mount(8)
// calls it for an /etc/fstab line, exits 0 only once the store is mounted
// (the files are there when it returns), with options mount(8) and
// systemd pass ignored and x-mount.mkdir creating the missing parents; the
// memfs mount it started in the background logs to the state dir; umount
// stops it after the final sync.
func TestMountHelper(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/hello.md": "hello\n"})
	helper := mhHelper(t)
	keyFile := writeKeyFile(t, e.serve.AdminKey, 0o600)
	parent := filepath.Join(t.TempDir(), "srv", "memory")
	dir := filepath.Join(parent, "notes")
	pid := 0
	t.Cleanup(func() {
		if harness.IsMounted(dir) {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		if pid > 0 && mhRunning(pid) {
			syscall.Kill(pid, syscall.SIGKILL) // by its pid: the memfs mount this test started
		}
	})
	opts := "api_url=" + e.serve.URL + ",api_key_file=" + keyFile + ",state_dir=" + e.stateDir +
		",sync_interval=60s,defaults,noauto,nofail,_netdev,x-systemd.automount,x-systemd.requires=network-online.target,x-mount.mkdir"
	code, stdout, stderr := mhRun(t, helper, e.storeID, dir, "-v", "-o", opts)
	if code != 0 {
		t.Fatalf("mount.memfs exited %d:\n%s%s", code, stdout, stderr)
	}
	if m := regexp.MustCompile(`\(pid (\d+)\)`).FindStringSubmatch(stdout); m != nil {
		pid, _ = strconv.Atoi(m[1])
	}
	if pid == 0 || !mhRunning(pid) {
		t.Fatalf("mount.memfs -v names no running memfs mount (pid %d):\n%s", pid, stdout)
	}
	// It returned: the mount is up and the store's files are there.
	if !harness.IsMounted(dir) {
		t.Fatalf("mount.memfs exited 0 but %s is not mounted:\n%s%s", dir, stdout, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hello.md")); err != nil || string(b) != "hello\n" {
		t.Errorf("hello.md on the mount: %q, %v", b, err)
	}
	if mo, _ := harness.MountOptionsOf(dir); !strings.HasPrefix(mo, "rw") {
		t.Errorf("mount options %q, want rw", mo)
	}
	logPath := filepath.Join(e.stateDir, "log", "mount-"+e.storeID+".log")
	if fi, err := os.Stat(logPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the log %s: %v, %v; want a file of mode 0600", logPath, fi, err)
	} else if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "mounted at "+dir) {
		t.Errorf("the log does not say the store was mounted:\n%s", b)
	}
	if !strings.Contains(stdout, logPath) {
		t.Errorf("mount.memfs -v does not say where the mount logs:\n%s", stdout)
	}

	mtMustSh(t, dir, "echo 'from fstab' > new.md")
	// umount(8), as at shutdown: memfs mount uploads what is pending and
	// exits (its exit status is another test's business).
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", dir, err, out)
	}
	deadline := time.Now().Add(mtExitTimeout)
	for mhRunning(pid) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("memfs mount (pid %d) still runs %s after umount:\n%s", pid, mtExitTimeout, b)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if got, want := e.contents(), map[string]string{"/hello.md": "hello\n", "/new.md": "from fstab\n"}; !maps.Equal(got, want) {
		t.Errorf("the store after umount:\n%s", mtDiff(got, want))
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point memfs created is still there (%v)", err)
	}
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		t.Errorf("the parents x-mount.mkdir created are gone: %v", err)
	}
}

// TestMountHelperFailure: when memfs mount fails, mount.memfs waits for
// it, repeats its error and exits non-zero; nothing is left mounted,
// created or running. Bad options are refused before anything starts.
func TestMountHelperFailure(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	helper := mhHelper(t)
	wrongKey := writeKeyFile(t, "sk-memfs-wrong-key-0123456789", 0o600)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := mhRun(t, helper, e.storeID, dir, "-o", "api_url="+e.serve.URL+",api_key_file="+wrongKey+",state_dir="+e.stateDir)
	if code == 0 || !strings.Contains(stderr, "API key was refused") || !strings.Contains(stderr, "memfs mount exited before mounting") {
		t.Errorf("a refused key: exit %d, want non-zero and the mount's error:\n%s%s", code, stdout, stderr)
	}
	if harness.IsMounted(dir) {
		t.Errorf("%s is mounted", dir)
	}
	if strings.Contains(stdout+stderr, "sk-memfs-wrong-key") {
		t.Errorf("the output shows the key:\n%s%s", stdout, stderr)
	}

	// Refused by mount.memfs itself: nothing is started, nothing logged.
	state := t.TempDir()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{e.storeID, dir, "-o", "api_url=" + e.serve.URL + ",noexec"}, `unknown mount option "noexec"`},
		{[]string{e.storeID, dir, "-o", "api_key=" + e.serve.AdminKey}, "api_key_file=FILE"},
		{[]string{"/dev/sdb1", dir}, "memory store id"},
		{[]string{e.storeID}, "want STORE MOUNTPOINT"},
	} {
		code, stdout, stderr := mhRun(t, helper, append(tc.args, "-o", "state_dir="+state)...)
		if code != 2 || !strings.Contains(stderr, tc.says) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("mount.memfs %q: exit %d, want 2 and one line saying %q:\n%s%s", tc.args, code, tc.says, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, e.serve.AdminKey) {
			t.Errorf("mount.memfs %q shows the key:\n%s%s", tc.args, stdout, stderr)
		}
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("refused mounts left %v in the state dir", entries)
	}
	if harness.IsMounted(dir) {
		t.Errorf("%s is mounted", dir)
	}
}

// TestMountMkdir: without --mkdir a missing mount point is an error that
// creates nothing; an existing one is used and left in place; --mkdir
// creates the mount point and its parents, and removes only the mount
// point at unmount.
func TestMountMkdir(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})

	o := e.opts()
	o.NoMkdir = true
	o.Dir = filepath.Join(t.TempDir(), "missing", "mnt")
	code, stdout, stderr := harness.RunMount(t, o, mtExitTimeout)
	if code != 1 || !strings.Contains(stderr, "the mount point "+o.Dir+" does not exist") || !strings.Contains(stderr, "--mkdir") {
		t.Errorf("a missing mount point: exit %d, want 1 and an error naming it and --mkdir:\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Lstat(filepath.Dir(o.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused mount created %s (%v)", filepath.Dir(o.Dir), err)
	}
	if _, err := os.Lstat(filepath.Join(o.StateDir, "stores", e.storeID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused mount left a journal directory (%v)", err)
	}

	o.Dir = t.TempDir() // exists and is empty
	m := harness.StartMount(t, o)
	if b, err := os.ReadFile(filepath.Join(o.Dir, "a.md")); err != nil || string(b) != "a\n" {
		t.Errorf("a.md on the mount: %q, %v", b, err)
	}
	mtStop(t, m)
	if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
		t.Errorf("the existing mount point was not left in place: %v", err)
	}

	o = e.opts() // --mkdir
	parents := filepath.Join(t.TempDir(), "x", "y")
	o.Dir = filepath.Join(parents, "mnt")
	m = harness.StartMount(t, o)
	if b, err := os.ReadFile(filepath.Join(o.Dir, "a.md")); err != nil || string(b) != "a\n" {
		t.Errorf("a.md on the mount: %q, %v", b, err)
	}
	mtStop(t, m)
	if _, err := os.Lstat(o.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point --mkdir created is still there (%v)", err)
	}
	if fi, err := os.Stat(parents); err != nil || !fi.IsDir() {
		t.Errorf("the parents --mkdir created are gone: %v", err)
	}
}

// TestMountOptionsO: memfs mount -o ro,uid=,gid=,file_mode= mounts
// read-only with that owner and mode, like the flags they spell.
func TestMountOptionsO(t *testing.T) {
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	m := e.mount("-o", "ro,uid=4321,gid=4322,file_mode=0640,sync_interval=30s")
	if mo, super := harness.MountOptionsOf(m.Dir); !strings.HasPrefix(mo, "ro") || !strings.HasPrefix(super, "ro") {
		t.Errorf("mount options %q / %q, want ro", mo, super)
	}
	fi, err := os.Stat(filepath.Join(m.Dir, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 || fi.Mode().Perm() != 0o640 {
		t.Errorf("a.md: uid %d gid %d mode %v, want 4321 4322 0640", st.Uid, st.Gid, fi.Mode().Perm())
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "b.md"), []byte("b\n"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write on an ro mount: %v, want EROFS", err)
	}
	mtStop(t, m)
}
