package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// x1Mount is one `memfs mount` of X1's store, measured.
type x1Mount struct {
	// lsSecs: from the start of the process until `ls -l` of the root
	// answers with the store's folders; fetchSecs: until the mount logs
	// that every memory's content is in.
	lsSecs, fetchSecs float64
	// rssMiB is the process's VmRSS two seconds after the fetch.
	rssMiB float64
	// lsRSecs and grepSecs time `ls -lR` and `grep -r needle` over the
	// mount once the content is in.
	lsRSecs, grepSecs float64
}

// x1CannotMount says why this process can't mount FUSE ("" if it can).
func x1CannotMount() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "no /dev/fuse"
	}
	return ""
}

// x1MountOnce runs bin mount for store sid of the service at api, with a
// fresh state directory and mount point under dir, measures it, and
// stops it with SIGTERM (a clean unmount: nothing is pending).
func x1MountOnce(ctx context.Context, bin, api, sid, dir string) (_ *x1Mount, err error) {
	work, err := os.MkdirTemp(dir, "mount-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	keyFile, mnt := filepath.Join(work, "key"), filepath.Join(work, "mnt")
	if err := os.WriteFile(keyFile, []byte(benchKey), 0o600); err != nil {
		return nil, err
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "mount", "--api-url", api, "--api-key-file", keyFile,
		"--store", sid, "--state-dir", filepath.Join(work, "state"), mnt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	fetched := make(chan struct{})
	var tail []string // the log's last lines, for an error
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "memory contents fetched") && !once {
				once = true
				close(fetched)
			} else if len(tail) < 20 {
				tail = append(tail, l)
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	defer func() {
		if stopErr := x1Stop(cmd, mnt, exited); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	m := &x1Mount{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ents, _ := os.ReadDir(mnt); len(ents) > 0 {
			if err := lsL(mnt); err != nil {
				return nil, err
			}
			m.lsSecs = time.Since(start).Seconds()
			break
		}
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("memfs mount exited (%v) before the root listed: %s", err, strings.Join(tail, " | "))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the mount's root listed nothing within 2 minutes")
		}
	}
	select {
	case <-fetched:
		m.fetchSecs = time.Since(start).Seconds()
	case err := <-exited:
		exited <- err
		return nil, fmt.Errorf("memfs mount exited (%v) before fetching the content: %s", err, strings.Join(tail, " | "))
	case <-time.After(5 * time.Minute):
		return nil, errors.New("the mount did not fetch the content within 5 minutes")
	}
	if err := sleepOrStop(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	m.rssMiB = residentMiBOf(cmd.Process.Pid)
	if m.lsRSecs, err = x1Time("ls", "-lR", mnt); err != nil {
		return nil, err
	}
	if m.grepSecs, err = x1Time("grep", "-r", "needle", mnt); err != nil {
		return nil, err
	}
	return m, nil
}

// x1Time runs a command, output discarded, and returns its seconds. (An
// update may have replaced the content holding the needle: grep finding
// nothing is not an error.)
func x1Time(name string, args ...string) (float64, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	start := time.Now()
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !(name == "grep" && errors.As(err, &exit) && exit.ExitCode() == 1) { // grep: 1 is "no match"
		return 0, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return time.Since(start).Seconds(), nil
}

// x1Stop stops the mount process with SIGTERM (its final sync, then the
// unmount) and waits for it; after 60 s it is killed and the mount point
// detached. A clean stop exits 0.
func x1Stop(cmd *exec.Cmd, mnt string, exited chan error) error {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("memfs mount: %w", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		return errors.New("memfs mount did not stop within 60 s of SIGTERM")
	}
}
