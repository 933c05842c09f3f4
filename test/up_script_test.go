package test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// upScriptBuildTimeout bounds ./up.sh from its start to memfs up's banner:
// it builds the binary first (cached after the first build).
const upScriptBuildTimeout = 5 * time.Minute

// TestUpScriptExitStatus: the README's run command (./up.sh) builds memfs
// and execs memfs up, so a Ctrl-C (SIGINT to the terminal's process
// group) reaches memfs up alone and the caller sees its documented exit
// statuses: 0 when everything reached the store, 3 when a change is left
// in the journal. (make up ends with 130 after any Ctrl-C: make re-raises
// the signal.)
func TestUpScriptExitStatus(t *testing.T) {
	mtRequireFUSE(t)
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..")
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The README's run command: the first line of its first sh block,
	// before the comment.
	first := strings.SplitN(strings.SplitN(string(readme), "```sh\n", 2)[1], "\n", 2)[0]
	run := strings.Fields(strings.SplitN(first, "#", 2)[0])
	name := strings.Join(run, " ")
	command := func(flags ...string) *exec.Cmd {
		switch {
		case slices.Equal(run, []string{"./up.sh"}):
			return exec.Command(filepath.Join(repo, "up.sh"), flags...)
		case slices.Equal(run, []string{"make", "up"}):
			c := exec.Command("make", "up", "ARGS="+strings.Join(flags, " "))
			c.Dir = repo
			return c
		}
		t.Fatalf("the README's run command %q is neither ./up.sh nor make up", first)
		return nil
	}
	base := t.TempDir()
	dataDir, root := filepath.Join(base, "data"), filepath.Join(base, "mnt")
	t.Cleanup(func() { harness.DetachUnder(root) })
	for _, tc := range []struct {
		name  string
		shell string // run on the demo mount before Ctrl-C
		code  int
		says  string
	}{
		{"everything reached the store", `echo "- Likes examples." >> preferences/style.md`, 0, "memfs up: stopped; nothing is left mounted."},
		{"a change is left in the journal", `printf '\377' > bin.dat`, sgExitLeft, "changes are left in the journal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := command("--data-dir", dataDir, "--memory-root", root, "--listen", "127.0.0.1:0")
			// A process group of its own, as a terminal's foreground job.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			pr, pw := io.Pipe()
			cmd.Stdout, cmd.Stderr = pw, pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var out strings.Builder
			up := make(chan string, 1) // the mount path, once the banner is out
			read := make(chan struct{})
			go func() {
				defer close(read)
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					mu.Lock()
					out.WriteString(sc.Text() + "\n")
					mu.Unlock()
					if m := upStoreRe.FindStringSubmatch(sc.Text()); m != nil {
						up <- m[2]
					}
				}
			}()
			exited := make(chan error, 1)
			go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
			output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
			t.Cleanup(func() {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its own group: the script, then memfs up
			})
			var dir string
			select {
			case dir = <-up:
			case err := <-exited:
				t.Fatalf("%s exited (%v) before memfs up was up:\n%s", name, err, output())
			case <-time.After(upScriptBuildTimeout):
				t.Fatalf("%s: memfs up not up within %s:\n%s", name, upScriptBuildTimeout, output())
			}
			mtMustSh(t, dir, tc.shell)
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(mtExitTimeout):
				t.Fatalf("%s did not exit within %s of Ctrl-C:\n%s", name, mtExitTimeout, output())
			}
			<-read
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(output(), tc.says) {
				t.Errorf("%s after Ctrl-C: exit %d (%s), want %d and %q:\n%s", name, code, cmd.ProcessState, tc.code, tc.says, output())
			}
		})
	}
}
