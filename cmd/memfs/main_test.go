package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// asMainEnv makes the test binary run main() instead of the tests, so the
// CLI tests run the real command in a process of its own (its own stdout,
// stderr and exit status) without building the binary. As mount.memfs
// (argv[0]) it is the mount helper, whose child is this binary again.
const asMainEnv = "MEMFS_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0) // main exits itself
	}
	os.Exit(m.Run())
}

// result is how a run of the binary ended.
type result struct {
	code           int
	stdout, stderr string
}

// runMemfs runs this binary as `memfs ARGS...` (argv0 "memfs"; another
// name with runAs) with env added, bounded by a minute.
func runMemfs(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runAs(t, "memfs", env, args...)
}

func runAs(t *testing.T, argv0 string, env []string, args ...string) result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Args = append([]string{argv0}, args...)
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s %v: %v", argv0, args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not exit within a minute:\n%s%s", argv0, args, out.String(), errb.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}
