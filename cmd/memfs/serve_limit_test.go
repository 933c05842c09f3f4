package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// TestServeMaxMemoriesRefused: a cap no store can use (below 1, above the
// supported 100,000, not a number) is a usage error that names the flag,
// the range and the value, before anything is created in the data dir.
func TestServeMaxMemoriesRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "-1", strconv.Itoa(store.MaxMemoriesLimit + 1), "1000000", "many"} {
		dir := t.TempDir()
		r := runMemfs(t, nil, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--max-memories-per-store", v)
		if r.code != 2 || !strings.Contains(r.stderr, "max-memories-per-store") || !strings.Contains(r.stderr, v) {
			t.Errorf("--max-memories-per-store %s: exit %d, stderr %q; want 2 naming the flag and the value", v, r.code, r.stderr)
		}
		if v != "many" && !strings.Contains(r.stderr, "1 to 100000") {
			t.Errorf("--max-memories-per-store %s: the error does not give the range: %q", v, r.stderr)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("--max-memories-per-store %s left %d files in the data dir", v, len(ents))
		}
	}
}

// TestServeMaxMemoriesAccepted: the supported maximum, 100,000, starts a
// serving memfs serve that stops cleanly (and 1, the least, passes the
// check). The cap's enforcement is storetest's (small caps) and
// TestFaultMemoryCap's, on a mount.
func TestServeMaxMemoriesAccepted(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, store.MaxMemoriesLimit} {
		if err := checkMaxMemories(n); err != nil {
			t.Errorf("checkMaxMemories(%d): %v", n, err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--max-memories-per-store", "100000")
	cmd.Args[0] = "memfs"
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	// Our own pipe, not StdoutPipe: Wait may run while it is still read.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = w, &errb
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	listening := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if strings.Contains(sc.Text(), "listening on http://127.0.0.1:") {
			listening = true
			break
		}
	}
	if !listening {
		cmd.Wait()
		t.Fatalf("memfs serve --max-memories-per-store 100000 did not start:\n%s", errb.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("memfs serve after SIGTERM: %v\n%s", err, errb.String())
	}
}
