package test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// TestWorkerSymlinkEscape (docs/operating.md, "The worker"): memfs serve's --memory-root reaches
// outside the worker's memory root through a symlink below it
// (<tmp>/mnt/link -> <tmp>/outside), so the session's mount path
// <tmp>/mnt/link/evil is lexically under the worker's root <tmp>/mnt but
// really at <tmp>/outside/evil. The worker refuses the session with an
// error naming the path and the symlink, mounts nothing (outside the root
// or anywhere), creates nothing, records nothing in its state dir and
// leaves the symlink as found; the work item is stopped.
func TestWorkerSymlinkEscape(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	e := newWkEnvAt(t, func(base string) (string, string) {
		for _, d := range []string{"mnt", "outside"} {
			if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join(base, "outside"), filepath.Join(base, "mnt", "link")); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(base, "mnt", "link"), filepath.Join(base, "mnt")
	})
	t.Cleanup(func() { harness.DetachUnder(e.base) }) // should it mount outside after all
	base, err := filepath.EvalSymlinks(e.base)
	if err != nil {
		t.Fatal(err)
	}
	link, outside := filepath.Join(base, "mnt", "link"), filepath.Join(base, "outside")
	st := e.newStore("Evil", map[string]string{"/e.md": "e\n"})
	sess := e.refusedSession([]string{
		"the mount path", filepath.Join(e.base, "mnt", "link", "evil"),
		"of memory store " + st + " passes through a symbolic link: " + link + " is a symbolic link to " + outside,
		"nothing below the memory root " + filepath.Join(base, "mnt") + " may be a symbolic link",
	}, wkRW(st))
	if want := filepath.Join(e.base, "mnt", "link", "evil"); sess.Resources[0].MountPath != want {
		t.Fatalf("mount path %s, want %s", sess.Resources[0].MountPath, want)
	}
	for _, mp := range wkMountinfoDirs(t) {
		if mp == base || strings.HasPrefix(mp, base+"/") {
			t.Errorf("mounted under the test's dir after a refused session: %s", mp)
		}
	}
	wkCheckEmpty(t, outside)
	if dest, err := os.Readlink(filepath.Join(e.base, "mnt", "link")); err != nil || dest != outside {
		t.Errorf("the symlink was not left as found: %q, %v", dest, err)
	}
	ents, err := os.ReadDir(filepath.Join(e.base, "mnt"))
	if err != nil {
		t.Fatal(err)
	}
	if names := wkNames(ents); !slices.Equal(names, []string{"link"}) {
		t.Errorf("the worker's memory root holds %v, want only the symlink", names)
	}
	if recs, err := os.ReadDir(filepath.Join(e.stateDir, "mounts")); err != nil && !errors.Is(err, os.ErrNotExist) || len(recs) > 0 {
		t.Errorf("mount records left in the state dir: %v (%v)", wkNames(recs), err)
	}
}

// wkNames are the names of directory entries.
func wkNames(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
