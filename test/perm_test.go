package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// The agent's tools run as an unprivileged user while memfs runs as root:
// these tests act as that user (setpriv), on real mounts made by real
// memfs processes.

const agentUID = 65534 // nobody

// pmShared makes a directory every user may enter (t.TempDir's are 0700).
func pmShared(t *testing.T) string {
	t.Helper()
	mtRequireFUSE(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("needs setpriv (util-linux) to act as the agent's user: %v", err)
	}
	d, err := os.MkdirTemp("", "memfs-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// pmAs runs script in dir as uid (its own group, no others).
func pmAs(t *testing.T, uid int, dir, script string) (string, error) {
	t.Helper()
	c := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups",
		"sh", "-c", `cd "$DIR" || exit 99; `+script)
	c.Dir = "/"
	c.Env = append(os.Environ(), "DIR="+dir, "LC_ALL=C")
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func pmMustAs(t *testing.T, uid int, dir, script string) string {
	t.Helper()
	out, err := pmAs(t, uid, dir, script)
	if err != nil {
		t.Fatalf("as %d in %s: %s: %v\n%s", uid, dir, script, err, out)
	}
	return out
}

// A worker mounts a session's stores for the agent's user (the owner of
// the memory root, as the fix in docs/operating.md makes it): the agent reads, edits
// and creates files as in a local folder, the edits reach the store, and
// a read-only store stays read-only whatever the modes.
func TestWorkerMountsBelongToTheAgent(t *testing.T) {
	shared := pmShared(t)
	root := filepath.Join(shared, "memory")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, agentUID, agentUID); err != nil {
		t.Fatal(err)
	}
	e := newWkEnvAt(t, func(string) (string, string) { return root, root })
	rw := e.newStore("prefs", map[string]string{"/style.md": "tabs\n"})
	ro := e.newStore("fixed", map[string]string{"/ro.md": "fixed\n"})
	sess := e.newSession(wkRW(rw), wkRO(ro))
	w := e.startWorker("--memory-sync-interval", "5s")
	e.waitRunning(w, sess)
	rwDir, roDir := sess.Resources[0].MountPath, sess.Resources[1].MountPath
	got := pmMustAs(t, agentUID, rwDir, `cat style.md; echo "- likes examples" >> style.md; mkdir notes; echo idea > notes/n.md; stat -c %u:%g:%a . style.md notes/n.md`)
	want := fmt.Sprintf("tabs\n%[1]d:%[1]d:755\n%[1]d:%[1]d:644\n%[1]d:%[1]d:644", agentUID)
	if got != want {
		t.Fatalf("as the agent in the read-write store:\n%s\nwant\n%s", got, want)
	}
	if out, err := pmAs(t, agentUID, roDir, "echo x >> ro.md"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("the agent wrote to a read-only store: %v %q", err, out)
	}
	if out, err := pmAs(t, 4242, rwDir, "echo x >> style.md"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("another user wrote to the agent's file: %v %q", err, out)
	}
	e.waitStore(rw, map[string]string{"/style.md": "tabs\n- likes examples\n", "/notes/n.md": "idea\n"}, wkStartTimeout)
	wkStopWorker(t, w, syscall.SIGTERM)
}

// memfs mount --uid/--gid/--file-mode/--umask/--allow-other: the store's
// files belong to the given user with the given modes, and the user works
// in the mount.
func TestMountOwnershipFlags(t *testing.T) {
	shared := pmShared(t)
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	e.dir = filepath.Join(shared, "mnt")
	m := e.mount("--uid", "nobody", "--file-mode", "0666", "--umask", "0022", "--allow-other", "true")
	got := pmMustAs(t, agentUID, m.Dir, `stat -c %U:%a . a.md; echo more >> a.md; cat a.md`)
	if want := "nobody:755\nnobody:644\na\nmore"; got != want {
		t.Fatalf("as nobody on memfs mount --uid nobody:\n%s\nwant\n%s", got, want)
	}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0})
	e.waitStore(map[string]string{"/a.md": "a\nmore\n"})
	mtStop(t, m)
	for _, bad := range [][]string{{"--uid", "no-such-user-xyz"}, {"--file-mode", "9"}, {"--allow-other", "maybe"}} {
		code, _, stderr := harness.RunMount(t, e.opts(bad...), mtExitTimeout)
		if code != 2 || !strings.Contains(stderr, bad[0]) {
			t.Errorf("memfs mount %v: exit %d, %q; want a usage error naming the flag", bad, code, stderr)
		}
	}
}
