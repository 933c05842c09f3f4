package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestMountModeEverywhere: mount, worker, session and up refuse a bad
// --mount-mode, or a bad MEMFS_MOUNT_MODE, before anything starts: a
// usage error (exit 2) that names the flag, the value and the three
// modes; memfs mount's -o mount_mode= too.
func TestMountModeEverywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	for _, args := range [][]string{
		{"mount", "--store", "memstore_1", "--api-key", "k", "--state-dir", stateDir, filepath.Join(dir, "m")},
		{"worker", "--environment-id", "env_1", "--environment-key", "k", "--state-dir", stateDir},
		{"session", "--work-id", "work_1", "--environment-id", "env_1", "--session-id", "sesn_1", "--state-dir", stateDir},
		{"up", "--data-dir", dir},
	} {
		for _, tc := range []struct {
			env  []string
			args []string
		}{
			{[]string{"MEMFS_MOUNT_MODE="}, append(slices.Clone(args), "--mount-mode", "fusion")},
			{[]string{"MEMFS_MOUNT_MODE=fusion"}, args},
		} {
			r := runMemfs(t, tc.env, tc.args...)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "memfs "+args[0]+": --mount-mode: ") ||
				!strings.Contains(r.stderr, `the mount mode must be fuse, directory or auto, not "fusion"`) {
				t.Errorf("memfs %q (env %q): exit %d, stderr %q; want 2 naming --mount-mode, fuse, directory and auto", tc.args, tc.env, r.code, r.stderr)
			}
		}
	}
	r := runMemfs(t, []string{"MEMFS_MOUNT_MODE="}, "mount", "--store", "memstore_1", "--api-key", "k", "-o", "mount_mode=fusion", filepath.Join(dir, "m"))
	if r.code != 2 || !strings.Contains(r.stderr, `must be fuse, directory or auto, not "fusion"`) {
		t.Errorf("-o mount_mode=fusion: exit %d, stderr %q", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused runs left %v in %s", entries, dir)
	}
}

// TestMountModeReachesConfig: the mode of the flag, of MEMFS_MOUNT_MODE
// (the flag wins) or of -o mount_mode= is the one memfs mount mounts
// with and the one the worker of worker, session and up is configured
// with; auto when none is given.
func TestMountModeReachesConfig(t *testing.T) {
	workerMode := func(args ...string) string {
		t.Helper()
		var f workerFlags
		fset := flag.NewFlagSet("worker", flag.ContinueOnError)
		fset.SetOutput(io.Discard)
		f.add(fset)
		if err := fset.Parse(append([]string{"--api-url", "http://127.0.0.1:8080", "--state-dir", t.TempDir()}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config(logrus.New())
		if err != nil {
			t.Fatalf("worker %q: %v", args, err)
		}
		return cfg.MountMode
	}
	upMode := func(args ...string) string {
		t.Helper()
		a, err := parseUpArgs(append([]string{"--data-dir", t.TempDir()}, args...))
		if err != nil {
			t.Fatalf("up %q: %v", args, err)
		}
		return a.workerConfig("http://127.0.0.1:8080", upState{}, logrus.New()).MountMode
	}
	mountMode := func(args ...string) string {
		t.Helper()
		a, err := parseMountArgs(append([]string{"--store", "memstore_1", "--api-key", "k"}, append(args, t.TempDir())...))
		if err != nil {
			t.Fatalf("mount %q: %v", args, err)
		}
		return a.sf.mountMode
	}
	t.Setenv("MEMFS_MOUNT_MODE", "")
	for name, mode := range map[string]func(...string) string{"worker": workerMode, "up": upMode, "mount": mountMode} {
		if got := mode(); got != "auto" {
			t.Errorf("%s without a mode: %q, want auto", name, got)
		}
		if got := mode("--mount-mode", "directory"); got != "directory" {
			t.Errorf("%s --mount-mode directory: %q", name, got)
		}
	}
	t.Setenv("MEMFS_MOUNT_MODE", "directory")
	for name, mode := range map[string]func(...string) string{"worker": workerMode, "up": upMode, "mount": mountMode} {
		if got := mode(); got != "directory" {
			t.Errorf("%s with MEMFS_MOUNT_MODE=directory: %q", name, got)
		}
		if got := mode("--mount-mode", "fuse"); got != "fuse" {
			t.Errorf("%s --mount-mode fuse over MEMFS_MOUNT_MODE=directory: %q, want the flag's", name, got)
		}
	}
	t.Setenv("MEMFS_MOUNT_MODE", "fuse")
	if got := mountMode("-o", "ro,mount_mode=directory"); got != "directory" {
		t.Errorf("-o mount_mode=directory: %q", got)
	}
	if got := mountMode("-o", "mount_mode=directory", "--mount-mode", "auto"); got != "auto" {
		t.Errorf("-o mount_mode=directory, then --mount-mode auto: %q, want the later", got)
	}
}
