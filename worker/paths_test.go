package worker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
)

// walkModes runs f once with openat2 and once with the O_NOFOLLOW
// fallback used where the kernel has no openat2.
func walkModes(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, mode := range []struct {
		name     string
		fallback bool
	}{{"openat2", false}, {"O_NOFOLLOW", true}} {
		t.Run(mode.name, func(t *testing.T) {
			if !mode.fallback {
				fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: dirOpenFlags})
				if errors.Is(err, unix.ENOSYS) {
					t.Skip("this kernel has no openat2")
				}
				if err == nil {
					unix.Close(fd)
				}
			}
			noOpenat2.Store(mode.fallback)
			t.Cleanup(func() { noOpenat2.Store(false) })
			f(t)
		})
	}
}

// pathsFixture is a temp dir (canonical) holding:
//
//	real/mem/           the memory root
//	real/mem/sub/       a directory below it
//	real/mem/file       a regular file
//	outside/            a directory outside the root
//	link -> real        a symlink above the root (the operator's choice)
type pathsFixture struct {
	base, root, outside string
}

func newPathsFixture(t *testing.T) pathsFixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := pathsFixture{base: base, root: filepath.Join(base, "real", "mem"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{filepath.Join(f.root, "sub"), f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.root, "file"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	return f
}

// resolved is the memory root given as given, resolved as at start.
func resolved(t *testing.T, given string) memoryRoot {
	t.Helper()
	r := memoryRoot{Given: given}
	if err := r.resolve(); err != nil {
		t.Fatal(err)
	}
	return r
}

func symlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

// checkEmpty fails unless dir exists and holds nothing.
func checkEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		t.Errorf("%s holds %s; want nothing", dir, ents[0].Name())
	}
}

func TestCheckMountPath(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		for _, tc := range []struct {
			name string
			// setup prepares the fixture and returns the configured memory
			// root and the session's mount path.
			setup func(t *testing.T, f pathsFixture) (root, mountPath string)
			// canon is the canonical mount path wanted (relative to base),
			// or "" when the path is refused with an error holding every
			// one of errs (in which base is written as {base}).
			canon string
			errs  []string
		}{
			{name: "plain", canon: "real/mem/notes",
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, filepath.Join(f.root, "notes") }},
			{name: "below a directory", canon: "real/mem/sub/notes",
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return f.root, filepath.Join(f.root, "sub", "notes")
				}},
			{name: "no mount path: the slug", canon: "real/mem/my-notes",
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, "" }},
			{name: "the root reached through a symlinked parent", canon: "real/mem/notes",
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return filepath.Join(f.base, "link", "mem"), filepath.Join(f.base, "link", "mem", "notes")
				}},
			{name: "the root itself a symlink", canon: "real/mem/notes",
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					symlink(t, f.root, filepath.Join(f.base, "memlink"))
					return filepath.Join(f.base, "memlink"), filepath.Join(f.base, "memlink", "notes")
				}},
			{name: "the root a symlink, the path named canonically", canon: "real/mem/notes",
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return filepath.Join(f.base, "link", "mem"), filepath.Join(f.root, "notes")
				}},
			{name: "a symlink in the middle", errs: []string{
				`the mount path "{base}/real/mem/escape/evil" of memory store memstore_1 passes through a symbolic link: {base}/real/mem/escape is a symbolic link to {base}/outside`,
				"nothing below the memory root {base}/real/mem may be a symbolic link"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					symlink(t, f.outside, filepath.Join(f.root, "escape"))
					return f.root, filepath.Join(f.root, "escape", "evil")
				}},
			{name: "a relative symlink in the middle to a directory inside", errs: []string{
				"passes through a symbolic link: {base}/real/mem/alias is a symbolic link to sub"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					symlink(t, "sub", filepath.Join(f.root, "alias"))
					return f.root, filepath.Join(f.root, "alias", "notes")
				}},
			{name: "a symlink in the middle, the root reached through one", errs: []string{
				`the mount path "{base}/link/mem/escape/evil" of memory store memstore_1 passes through a symbolic link: {base}/real/mem/escape is a symbolic link to {base}/outside`},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					symlink(t, f.outside, filepath.Join(f.root, "escape"))
					return filepath.Join(f.base, "link", "mem"), filepath.Join(f.base, "link", "mem", "escape", "evil")
				}},
			{name: "a symlink at the mount path", errs: []string{
				"something already exists at the memory store's path {base}/real/mem/notes (a symbolic link to {base}/outside); it must not exist when the session starts (it was left as found)"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					symlink(t, f.outside, filepath.Join(f.root, "notes"))
					return f.root, filepath.Join(f.root, "notes")
				}},
			{name: "a dangling symlink at the mount path", errs: []string{
				"something already exists at the memory store's path {base}/real/mem/notes (a symbolic link to {base}/nowhere)"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					symlink(t, filepath.Join(f.base, "nowhere"), filepath.Join(f.root, "notes"))
					return f.root, filepath.Join(f.root, "notes")
				}},
			{name: "a directory at the mount path", errs: []string{"something already exists at the memory store's path {base}/real/mem/sub;"},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, filepath.Join(f.root, "sub") }},
			{name: "a file at the mount path", errs: []string{"something already exists at the memory store's path {base}/real/mem/file;"},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, filepath.Join(f.root, "file") }},
			{name: "something at the mount path, named through the root's symlink", errs: []string{
				"something already exists at the memory store's path {base}/link/mem/file ({base}/real/mem/file);"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return filepath.Join(f.base, "link", "mem"), filepath.Join(f.base, "link", "mem", "file")
				}},
			{name: "a file in the middle", errs: []string{"memory store path {base}/real/mem/file/notes: open {base}/real/mem/file: not a directory"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return f.root, filepath.Join(f.root, "file", "notes")
				}},
			{name: "a missing directory in the middle", errs: []string{"memory store path {base}/real/mem/gone/notes: open {base}/real/mem/gone: no such file or directory"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return f.root, filepath.Join(f.root, "gone", "notes")
				}},
			{name: "dot-dot", errs: []string{`the mount path "{base}/real/mem/../outside/x" of memory store memstore_1 is not a clean absolute path`},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, f.root + "/../outside/x" }},
			{name: "relative", errs: []string{`the mount path "mem/notes" of memory store memstore_1 is not a clean absolute path`},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, "mem/notes" }},
			{name: "not clean", errs: []string{"is not a clean absolute path"},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, f.root + "//notes/" }},
			{name: "outside the root", errs: []string{`the mount path "{base}/outside/notes" of memory store memstore_1 is outside the memory root {base}/real/mem`},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, filepath.Join(f.outside, "notes") }},
			{name: "outside a symlinked root", errs: []string{"is outside the memory root {base}/link/mem ({base}/real/mem)"},
				setup: func(t *testing.T, f pathsFixture) (string, string) {
					return filepath.Join(f.base, "link", "mem"), filepath.Join(f.base, "link", "notes")
				}},
			{name: "the root itself", errs: []string{"is outside the memory root"},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, f.root }},
			{name: "a sibling sharing the root's prefix", errs: []string{"is outside the memory root"},
				setup: func(t *testing.T, f pathsFixture) (string, string) { return f.root, f.root + "x/notes" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newPathsFixture(t)
				given, mp := tc.setup(t, f)
				root := resolved(t, given)
				got, err := checkMountPath(root, store.SessionResource{MemoryStoreID: "memstore_1", Name: "My Notes", MountPath: mp}, ModeFUSE, "")
				if tc.canon != "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if want := filepath.Join(f.base, tc.canon); got.Canon() != want {
						t.Errorf("canonical path %s, want %s", got.Canon(), want)
					}
					if mp != "" && got.Path != mp {
						t.Errorf("path %s, want the session's %s", got.Path, mp)
					}
					return
				}
				if err == nil {
					t.Fatalf("accepted (canonical %s); want refused", got.Canon())
				}
				for _, s := range tc.errs {
					if s = strings.ReplaceAll(s, "{base}", f.base); !strings.Contains(err.Error(), s) {
						t.Errorf("the error does not say %q:\n%v", s, err)
					}
				}
				checkEmpty(t, f.outside)
			})
		}
	})
}

// TestCheckMountPathRootSwapped: the canonical root is fixed when the
// worker starts; a symlink put on the way to it afterwards is refused,
// not followed.
func TestCheckMountPathRootSwapped(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		f := newPathsFixture(t)
		root := resolved(t, filepath.Join(f.base, "link", "mem"))
		moved := filepath.Join(f.outside, "real")
		if err := os.Rename(filepath.Join(f.base, "real"), moved); err != nil {
			t.Fatal(err)
		}
		symlink(t, moved, filepath.Join(f.base, "real"))
		_, err := checkMountPath(root, store.SessionResource{MemoryStoreID: "memstore_1", MountPath: filepath.Join(f.base, "link", "mem", "notes")}, ModeFUSE, "")
		want := "the memory root " + f.root + " was resolved when the worker started, and now passes through a symbolic link: " + filepath.Join(f.base, "real") + " is a symbolic link to " + moved
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to say %q", err, want)
		}
		checkEmpty(t, filepath.Join(moved, "mem", "sub"))
	})
}

// target checks mp below root and fails the test if it is refused.
func target(t *testing.T, root, mp string) mountTarget {
	t.Helper()
	tg, err := checkMountPath(resolved(t, root), store.SessionResource{MemoryStoreID: "memstore_1", MountPath: mp}, ModeFUSE, "")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestCreateMountDir(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		f := newPathsFixture(t)
		tg := target(t, filepath.Join(f.base, "link", "mem"), filepath.Join(f.base, "link", "mem", "sub", "notes"))
		d, err := createMountDir(tg, "memstore_1")
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(f.root, "sub", "notes"))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("the mount directory: %v, %v; want a 0700 directory", fi, err)
		}
		if err := d.verify("memstore_1"); err != nil {
			t.Errorf("verify: %v", err)
		}
		if err := d.remove(); err != nil {
			t.Fatal(err)
		}
		checkEmpty(t, filepath.Join(f.root, "sub"))
		if err := d.remove(); err != nil {
			t.Errorf("a second remove: %v", err)
		}
	})
}

// TestCreateMountDirExists: something created at the path between the
// check and the mkdirat is refused and left as found.
func TestCreateMountDirExists(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		f := newPathsFixture(t)
		tg := target(t, f.root, filepath.Join(f.root, "notes"))
		symlink(t, f.outside, filepath.Join(f.root, "notes"))
		_, err := createMountDir(tg, "memstore_1")
		want := "something already exists at the memory store's path " + filepath.Join(f.root, "notes") + " (a symbolic link to " + f.outside + ")"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to say %q", err, want)
		}
		if dest, err := os.Readlink(filepath.Join(f.root, "notes")); err != nil || dest != f.outside {
			t.Errorf("the symlink was not left as found: %q, %v", dest, err)
		}
		checkEmpty(t, f.outside)
	})
}

// swapForSymlink moves the directory dir to outside/<its name> and puts a
// symlink to it in its place, as someone racing the worker would.
func swapForSymlink(t *testing.T, dir, outside string) string {
	t.Helper()
	moved := filepath.Join(outside, filepath.Base(dir))
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	symlink(t, moved, dir)
	return moved
}

// TestCreateMountDirSwappedBeforeCreate: a directory on the path swapped
// for a symlink after the check (step 4) and before the create (step 5):
// the create walks again and refuses it; nothing is created outside.
func TestCreateMountDirSwappedBeforeCreate(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		f := newPathsFixture(t)
		tg := target(t, f.root, filepath.Join(f.root, "sub", "notes"))
		moved := swapForSymlink(t, filepath.Join(f.root, "sub"), f.outside)
		_, err := createMountDir(tg, "memstore_1")
		want := "passes through a symbolic link: " + filepath.Join(f.root, "sub") + " is a symbolic link to " + moved
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to say %q", err, want)
		}
		checkEmpty(t, moved)
	})
}

// TestCreateMountDirSwappedDuringCreate: the parent is swapped for a
// symlink while the worker holds it open — after the walk, around the
// mkdirat (the test hook runs right after it, deterministically). The
// directory lands in the parent, now outside; the walk after the mkdirat
// sees the symlink, refuses the path, and removes the directory from
// where it went, through the parent it holds.
func TestCreateMountDirSwappedDuringCreate(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		f := newPathsFixture(t)
		tg := target(t, f.root, filepath.Join(f.root, "sub", "notes"))
		var moved string
		testHookMountDirCreated = func(mountTarget) {
			moved = swapForSymlink(t, filepath.Join(f.root, "sub"), f.outside)
			if _, err := os.Stat(filepath.Join(moved, "notes")); err != nil {
				t.Errorf("the new directory did not move with its parent: %v", err)
			}
		}
		t.Cleanup(func() { testHookMountDirCreated = nil })
		_, err := createMountDir(tg, "memstore_1")
		want := "passes through a symbolic link: " + filepath.Join(f.root, "sub") + " is a symbolic link to " + moved
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to say %q", err, want)
		}
		checkEmpty(t, moved)
	})
}

// TestMountDirVerify: what was created is checked again right before the
// mount: a symlink or another directory in its place is refused, and
// remove leaves what someone else put there.
func TestMountDirVerify(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		t.Run("symlinked parent", func(t *testing.T) {
			f := newPathsFixture(t)
			d, err := createMountDir(target(t, f.root, filepath.Join(f.root, "sub", "notes")), "memstore_1")
			if err != nil {
				t.Fatal(err)
			}
			moved := swapForSymlink(t, filepath.Join(f.root, "sub"), f.outside)
			want := "passes through a symbolic link: " + filepath.Join(f.root, "sub") + " is a symbolic link to " + moved
			if err := d.verify("memstore_1"); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("verify = %v\nwant it to say %q", err, want)
			}
			if err := d.remove(); err != nil {
				t.Fatalf("remove: %v", err)
			}
			checkEmpty(t, moved)
		})
		t.Run("directory replaced", func(t *testing.T) {
			f := newPathsFixture(t)
			p := filepath.Join(f.root, "notes")
			d, err := createMountDir(target(t, f.root, p), "memstore_1")
			if err != nil {
				t.Fatal(err)
			}
			// Moved away, not removed: its inode stays in use, so the new
			// directory cannot reuse the number.
			if err := os.Rename(p, filepath.Join(f.outside, "old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := d.verify("memstore_1"); err == nil || !strings.Contains(err.Error(), "was replaced after the worker created it") {
				t.Fatalf("verify = %v; want the replacement refused", err)
			}
			if err := d.remove(); err == nil || !strings.Contains(err.Error(), "left what is there now") {
				t.Errorf("remove = %v; want the replacement left", err)
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("the replacement was removed: %v", err)
			}
		})
		t.Run("mount directory a symlink", func(t *testing.T) {
			f := newPathsFixture(t)
			p := filepath.Join(f.root, "notes")
			d, err := createMountDir(target(t, f.root, p), "memstore_1")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p, filepath.Join(f.outside, "notes")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(f.outside, "notes"), p)
			if err := d.verify("memstore_1"); err == nil || !strings.Contains(err.Error(), p+" is a symbolic link to "+filepath.Join(f.outside, "notes")) {
				t.Fatalf("verify = %v; want the symlink named", err)
			}
			d.remove()
			if dest, err := os.Readlink(p); err != nil || dest != filepath.Join(f.outside, "notes") {
				t.Errorf("the symlink was not left: %q, %v", dest, err)
			}
		})
	})
}

// TestRemoveLeftDir: after a crash, the directory a previous worker
// created is removed only through a path without symlinks.
func TestRemoveLeftDir(t *testing.T) {
	walkModes(t, func(t *testing.T) {
		f := newPathsFixture(t)
		p := filepath.Join(f.root, "sub", "notes")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		moved := swapForSymlink(t, filepath.Join(f.root, "sub"), f.outside)
		var sl *symlinkError
		if err := removeLeftDir(p); !errors.As(err, &sl) || sl.Path != filepath.Join(f.root, "sub") {
			t.Fatalf("removeLeftDir through a symlink = %v; want it refused, naming the symlink", err)
		}
		if _, err := os.Stat(filepath.Join(moved, "notes")); err != nil {
			t.Fatalf("the directory behind the symlink was removed: %v", err)
		}
		if err := removeLeftDir(filepath.Join(moved, "notes")); err != nil {
			t.Fatal(err)
		}
		checkEmpty(t, moved)
		if err := removeLeftDir(filepath.Join(moved, "notes")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing it again = %v; want not-exist", err)
		}
	})
}
