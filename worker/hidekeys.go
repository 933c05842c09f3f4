package worker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HideCredentials keeps the keys a worker was started with away from the
// processes it starts for the agent (--run-tools), once they have been read:
//
//  1. every memfs or Anthropic credential variable (IsCredentialName) is
//     removed from the process's environment, so no child inherits it: not
//     the grep tool's rg (which the SDK starts with the worker's
//     environment minus ANTHROPIC_*), not fusermount3;
//  2. their values are overwritten with NUL bytes in the environment block
//     the kernel shows as /proc/<pid>/environ (Go copied it at start, so
//     nothing reads the block again), so a shell that can read that file
//     finds no key there;
//  3. the process is made non-dumpable (prctl PR_SET_DUMPABLE 0, as
//     ssh-agent and gpg-agent do): a process of the same non-root user can
//     then neither read its /proc/<pid>/environ or memory nor ptrace it,
//     and no core dump holds the keys.
//
// The agent's tools no longer run in this process or as its children:
// they run in a sandbox of their own, as another user, in another PID
// namespace (sandbox.go), where neither this process nor the key files
// exist. This is defence in depth for everything else the worker starts.
//
// It returns the names it hid; an error says what could not be done (the
// variables are unset in any case).
func HideCredentials() ([]string, error) {
	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if IsCredentialName(k) {
			names = append(names, k)
			os.Unsetenv(k) // never fails on Linux
		}
	}
	werr := wipeEnvironBlock(IsCredentialName)
	perr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if perr != nil {
		perr = fmt.Errorf("make the worker non-dumpable: %w", perr)
	}
	return names, errors.Join(werr, perr)
}

// wipeEnvironBlock overwrites, in this process's original environment
// block (what /proc/self/environ shows), the value of every variable whose
// name hide matches, with NUL bytes. The block lies between env_start and
// env_end of /proc/self/stat (fields 50 and 51, proc(5)); it is written
// through /proc/self/mem.
func wipeEnvironBlock(hide func(string) bool) error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	start, _, err := envBounds(stat)
	if err != nil {
		return err
	}
	block, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wipe the keys from /proc/self/environ: %w", err)
	}
	defer mem.Close()
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		name, value, _ := bytes.Cut(kv, []byte("="))
		if len(value) > 0 && hide(string(name)) {
			at := int64(start) + int64(off+len(name)+1)
			if _, err := mem.WriteAt(make([]byte, len(value)), at); err != nil {
				return fmt.Errorf("wipe %s from /proc/self/environ: %w", name, err)
			}
		}
		off += len(kv) + 1
	}
	return nil
}

// envBounds reads env_start and env_end from /proc/self/stat. The fields
// are counted after the command name, which is in parentheses and may hold
// spaces or parentheses itself.
func envBounds(stat []byte) (start, end uint64, err error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc/self/stat: no command name")
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state)
	const envStart, envEnd = 50, 51
	if len(f) < envEnd-2 {
		return 0, 0, errors.New("/proc/self/stat has no env_start/env_end (Linux before 3.5)")
	}
	if start, err = strconv.ParseUint(f[envStart-3], 10, 64); err != nil {
		return 0, 0, err
	}
	if end, err = strconv.ParseUint(f[envEnd-3], 10, 64); err != nil {
		return 0, 0, err
	}
	if end <= start {
		return 0, 0, fmt.Errorf("/proc/self/stat: env_end %d not after env_start %d", end, start)
	}
	return start, end, nil
}
