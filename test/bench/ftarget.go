package main

// The file-system measures (F1–F4) run every workload against three
// targets, side by side in one run:
//
//   - tmpfs: a fresh directory under /dev/shm (the native ceiling);
//   - loopback: go-fuse's fs.NewLoopbackRoot over a /dev/shm directory,
//     mounted in-process with go-fuse's defaults (fs.Mount(nil) and
//     example/loopback: 1 s entry and attribute timeouts, no negative
//     cache, no FOPEN_KEEP_CACHE), DirectMount as root. As root on a
//     kernel with FUSE passthrough (6.9+) its opened files are passed
//     through: READ and WRITE never reach the daemon, only OPEN, FLUSH and
//     RELEASE do;
//   - memfs: the product's mount (fs.NewTree + fs.MountTree, mount options
//     as cmd/memfs sets them) over a syncqueue journal in a regular /tmp
//     directory (the product's state directory is on disk), with no store
//     server: nothing flushes the journal, every close still writes its
//     record.
//
// Files a read measure needs exist before the kernel sees them: written
// directly into the tmpfs directory behind tmpfs and loopback, loaded into
// memfs's tree with Tree.Load (as the worker loads a store at mount).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/statedir"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
)

// fopts are the F measures' own flags (main parses them).
var fopts struct {
	dirEntries int
	writers    int
	perWriter  int
	cpuprofile string
	opcounts   bool
}

func init() {
	flag.IntVar(&fopts.dirEntries, "fdir", 10000, "F3: entries of the directory listed with ls -l")
	flag.IntVar(&fopts.writers, "fwriters", 8, "F4: parallel writers")
	flag.IntVar(&fopts.perWriter, "fperwriter", 1000, "F4: files per writer")
	flag.StringVar(&fopts.cpuprofile, "fcpuprofile", "", "F measures: write CPU and mutex profiles of each to `PREFIX`-F1.pprof, PREFIX-F1.mutex.pprof, … (the benchmark serves both FUSE mounts in-process)")
	flag.BoolVar(&fopts.opcounts, "fopcounts", false, "F measures: also count the FUSE requests per file of each timed pass (debug logging: the rates of such a run are not valid)")
}

const (
	fTmpfs    = "tmpfs"
	fLoopback = "loopback"
	fMemfs    = "memfs"
	fTempPfx  = "memfs-bench-f-"
	fileBytes = 2048
)

// fTargets is the order targets are set up in; each repetition rotates it.
var fTargets = []string{fMemfs, fLoopback, fTmpfs}

// fContent is 2 KiB of valid UTF-8 (memfs refuses to upload anything else,
// and reports it at close).
var fContent = func() []byte {
	line := []byte("memfs benchmark line, two kibibytes a file\n")
	b := bytes.Repeat(line, fileBytes/len(line)+1)[:fileBytes-1]
	return append(b, '\n')
}()

// seed is a directory of files a read measure needs before it starts.
type seed struct {
	dir string // relative to the target's root
	n   int
}

func (s seed) name(i int) string { return fmt.Sprintf("f%05d.md", i) }

// target is one file system under test, ready to use at dir.
type target struct {
	name  string
	dir   string
	ops   *opCounter // with -fopcounts, FUSE targets only
	close func() error
	// journaled, memfs only, is the number of files pending in the
	// journal: every file closed after a write is.
	journaled func() int
}

// newTarget sets up a fresh target of kind name holding the seeds.
func newTarget(name string, seeds ...seed) (*target, error) {
	cleanupOnSignal()
	if stopping.Load() {
		return nil, errInterrupted
	}
	switch name {
	case fTmpfs:
		return newTmpfs(seeds)
	case fLoopback:
		return newLoopback(seeds)
	case fMemfs:
		return newMemfs(seeds)
	}
	return nil, fmt.Errorf("unknown target %q", name)
}

func newTmpfs(seeds []seed) (*target, error) {
	dir, err := os.MkdirTemp("/dev/shm", fTempPfx+"tmpfs-")
	if err != nil {
		return nil, err
	}
	t := &target{name: fTmpfs, dir: dir, close: func() error { return os.RemoveAll(dir) }}
	if err := writeSeeds(dir, seeds); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func writeSeeds(root string, seeds []seed) error {
	for _, s := range seeds {
		if err := os.MkdirAll(filepath.Join(root, s.dir), 0o755); err != nil {
			return err
		}
		for i := 0; i < s.n; i++ {
			if err := os.WriteFile(filepath.Join(root, s.dir, s.name(i)), fContent, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func newLoopback(seeds []seed) (_ *target, err error) {
	var undo cleanups
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	backing, err := os.MkdirTemp("/dev/shm", fTempPfx+"loopback-")
	if err != nil {
		return nil, err
	}
	undo.add(func() error { return os.RemoveAll(backing) })
	if err := writeSeeds(backing, seeds); err != nil {
		return nil, err
	}
	mnt, err := os.MkdirTemp("", fTempPfx+"loopback-mnt-")
	if err != nil {
		return nil, err
	}
	undo.add(func() error { return os.Remove(mnt) })
	root, err := gofs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	sec := time.Second // go-fuse's default (fs.Mount with nil options; example/loopback)
	mo := fuse.MountOptions{FsName: backing, Name: "loopback", DirectMount: os.Geteuid() == 0}
	t := &target{name: fLoopback, dir: mnt}
	if fopts.opcounts {
		t.ops = newOpCounter()
		mo.Debug, mo.Logger = true, log.New(t.ops, "", 0)
	}
	server, err := gofs.Mount(mnt, root, &gofs.Options{EntryTimeout: &sec, AttrTimeout: &sec, MountOptions: mo})
	if err != nil {
		return nil, fmt.Errorf("mount loopback: %w", err)
	}
	undo.add(func() error { return unmountFUSE(mnt, server.Unmount) })
	t.close = undo.run
	return t, nil
}

func newMemfs(seeds []seed) (_ *target, err error) {
	var undo cleanups
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	state, err := os.MkdirTemp("", fTempPfx+"memfs-state-") // /tmp: on disk here, like the product's state dir
	if err != nil {
		return nil, err
	}
	undo.add(func() error { return os.RemoveAll(state) })
	keys, err := statedir.LoadKeys(state)
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(filepath.Join(state, "journal"), journal.Options{Auth: journal.Auth{Key: keys.Key, Identity: keys.Identity, StoreID: "bench"}})
	if err != nil {
		return nil, err
	}
	undo.add(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return j.Close(ctx)
	})
	tree, err := fs.NewTree(fs.Options{StoreID: "memstore_bench", Journal: syncqueue.TreeJournal(j)})
	if err != nil {
		return nil, err
	}
	var files []fs.File
	for _, s := range seeds {
		for i := 0; i < s.n; i++ {
			files = append(files, fs.File{FileID: fmt.Sprintf("mem_bench_%s_%05d", s.dir, i),
				Path: "/" + s.dir + "/" + s.name(i), Content: fContent, Mtime: time.Now()})
		}
	}
	tree.Load(files)
	if got := tree.FileCount(); got != len(files) {
		return nil, fmt.Errorf("memfs loaded %d of %d files", got, len(files))
	}
	mnt, err := os.MkdirTemp("", fTempPfx+"memfs-mnt-")
	if err != nil {
		return nil, err
	}
	undo.add(func() error { return os.Remove(mnt) })
	t := &target{name: fMemfs, dir: mnt, journaled: func() int { return j.Stats().Pending }}
	// As cmd/memfs mounts (AllowOther, hence default_permissions, as root).
	mo := fs.MountOptions{AllowOther: os.Geteuid() == 0}
	if fopts.opcounts {
		// memfs's debug log goes to the standard logger.
		t.ops = newOpCounter()
		log.SetOutput(t.ops)
		log.SetFlags(0)
		mo.Debug = true
		undo.add(func() error { log.SetOutput(os.Stderr); log.SetFlags(log.LstdFlags); return nil })
	}
	m, err := fs.MountTree(mnt, tree, mo)
	if err != nil {
		return nil, err
	}
	undo.add(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return m.Unmount(ctx)
	})
	t.close = undo.run
	return t, nil
}

// runF wraps an F measure: CPU profile if asked, and a check that nothing
// stayed mounted.
func runF(id string, fn func(ctx context.Context, cfg config) ([]row, error)) func(ctx context.Context, cfg config) ([]row, error) {
	return func(ctx context.Context, cfg config) (rows []row, err error) {
		if fopts.cpuprofile != "" {
			f, err := os.Create(fopts.cpuprofile + "-" + id + ".pprof")
			if err != nil {
				return nil, err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return nil, err
			}
			defer pprof.StopCPUProfile()
			// Lock contention too (the tree's one mutex under parallel writers).
			runtime.SetMutexProfileFraction(1)
			defer func() {
				if mf, err := os.Create(fopts.cpuprofile + "-" + id + ".mutex.pprof"); err == nil {
					pprof.Lookup("mutex").WriteTo(mf, 0)
					mf.Close()
				}
				runtime.SetMutexProfileFraction(0)
			}()
		}
		defer func() {
			if lerr := checkNoLeftovers(); lerr != nil && err == nil {
				err = lerr
			}
			if stopping.Load() {
				pprof.StopCPUProfile()
				fmt.Fprintf(os.Stderr, "bench: %s interrupted (%v); torn down\n", id, err)
				os.Exit(130)
			}
		}()
		return fn(ctx, cfg)
	}
}

// writeFile is os.WriteFile without the Go runtime's extras: open with
// O_CREAT|O_WRONLY|O_TRUNC, one write, close. A failed close (memfs
// journals at close) is an error.
func writeFile(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	n, werr := unix.Write(fd, data)
	cerr := unix.Close(fd)
	switch {
	case werr != nil:
		return fmt.Errorf("write %s: %w", path, werr)
	case n != len(data):
		return fmt.Errorf("write %s: short write %d", path, n)
	case cerr != nil:
		return fmt.Errorf("close %s: %w", path, cerr)
	}
	return nil
}

// readFile is open(O_RDONLY) + read until EOF + close, like os.ReadFile
// without its fstat. It returns the bytes read.
func readFile(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	total := 0
	for {
		n, err := unix.Read(fd, buf[total:])
		if err != nil {
			return total, fmt.Errorf("read %s: %w", path, err)
		}
		if n == 0 {
			return total, nil
		}
		total += n
		if total == len(buf) {
			return total, errors.New("read " + path + ": larger than expected")
		}
	}
}
