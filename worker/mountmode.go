package worker

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
)

// Mount modes (--mount-mode; README, "Where FUSE can't mount").
const (
	ModeFUSE      = "fuse"
	ModeDirectory = "directory"
	ModeAuto      = "auto"
)

// ParseMode checks a --mount-mode value ("" is auto).
func ParseMode(s string) (string, error) {
	switch s {
	case "", ModeAuto:
		return ModeAuto, nil
	case ModeFUSE, ModeDirectory:
		return s, nil
	}
	return "", fmt.Errorf("the mount mode must be fuse, directory or auto, not %q", s)
}

// autoMode is auto's choice, made once per process: whether this process
// can mount does not change while it runs.
var autoMode struct {
	once sync.Once
	err  error // why FUSE can't mount; nil: it can
}

// ChooseMode resolves a mount mode: "" and ModeFUSE are FUSE (an error
// when this process can't use it), ModeDirectory a directory, and ModeAuto
// FUSE when a trial mount works, else a directory, with one warning that
// says why and what changes.
func ChooseMode(mode string, log logrus.FieldLogger) (string, error) {
	switch mode {
	case "", ModeFUSE:
		return ModeFUSE, fs.CheckFUSE()
	case ModeDirectory:
		return ModeDirectory, nil
	case ModeAuto:
	default:
		return "", fmt.Errorf("the mount mode must be fuse, directory or auto, not %q", mode)
	}
	warn := false
	autoMode.once.Do(func() {
		autoMode.err = fs.ProbeMount()
		warn = autoMode.err != nil
	})
	if autoMode.err == nil {
		return ModeFUSE, nil
	}
	if warn {
		log.WithError(autoMode.err).Warn("FUSE can't mount here, so each memory store is written into its mount path as a plain folder (directory mode): " +
			"changes are found by an inotify watch and a rescan every interval instead of at close, a read-only store is protected by file modes only, " +
			"and a write racing a remote change can only be kept in the conflict log; pass --mount-mode fuse to refuse to run without FUSE")
	}
	return ModeDirectory, nil
}

// mountFolder is MountStore in directory mode: the store is written into
// the folder at opts.Mountpoint (package dirmode), and the folder is
// ready once every file is.
func mountFolder(ctx context.Context, opts MountOptions, log logrus.FieldLogger) (*Mounted, error) {
	m := &Mounted{opts: opts, log: log, mode: ModeDirectory}
	var err error
	if opts.MemoryRoot != "" {
		if err := m.folderBelowRoot(); err != nil {
			return nil, err
		}
	} else if m.created, err = dirmode.Prepare(opts.Mountpoint, opts.Engine.StoreID, opts.Engine.StateDir); err != nil {
		return nil, err
	}
	rescan := opts.Rescan
	if rescan <= 0 {
		rescan = opts.Engine.Interval
	}
	newDir := dirmode.New(dirmode.Options{Dir: opts.Mountpoint, StateDir: opts.Engine.StateDir, Rescan: rescan})
	opts.Engine.Local = func(fo fs.Options) (syncqueue.Local, error) {
		d, err := newDir(fo)
		if err != nil {
			return nil, err // never a nil *Dir in a non-nil Local
		}
		m.folder = d
		return d, nil
	}
	if m.engine, err = syncqueue.NewEngine(opts.Engine); err != nil {
		m.removeDir()
		return nil, err
	}
	if err := m.engine.Open(ctx); err != nil {
		m.removeDir()
		return nil, err
	}
	m.folder.Begin()
	m.engine.Start()
	if err := m.waitWritten(ctx); err != nil {
		m.Close(context.Background(), false)
		return nil, err
	}
	opts.Status.add(m, opts.Labels)
	m.log.Info("memory store written to its folder (directory mode)")
	return m, nil
}

// folderBelowRoot makes or takes up the folder below the memory root (a
// worker's session): created as a FUSE mount directory is, or, when a
// killed worker left it, taken up if it is this state dir's copy. Either
// way it is this process's to remove once empty: below the memory root
// only a worker makes a store's folder.
func (m *Mounted) folderBelowRoot() error {
	opts := m.opts
	rel, ok := below(opts.MemoryRoot, opts.Mountpoint)
	if !ok || filepath.Join(opts.MemoryRoot, rel) != opts.Mountpoint {
		return fmt.Errorf("the mount point %s is not a clean path below the memory root %s", opts.Mountpoint, opts.MemoryRoot)
	}
	t := mountTarget{Path: opts.Mountpoint, Root: opts.MemoryRoot, Rel: rel}
	hold := createMountDir
	if fd, err := openNoSymlinks(t.Canon()); err == nil {
		unix.Close(fd)
		if err := dirmode.TakeUp(opts.Mountpoint, opts.Engine.StoreID, opts.Engine.StateDir); err != nil {
			return err
		}
		hold = adoptMountDir
	}
	d, err := hold(t, opts.Engine.StoreID)
	if err != nil {
		return err
	}
	m.dir, m.created = d, true
	return nil
}

// waitWritten waits until every file of the store is in the folder,
// saying how far it is every few seconds.
func (m *Mounted) waitWritten(ctx context.Context) error {
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	said := start
	for {
		left := m.folder.LazyCount()
		if left == 0 {
			return nil
		}
		if time.Since(said) >= 5*time.Second {
			said = time.Now()
			m.log.WithField("files_left", left).Info("writing the store's files into its folder")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the store's files were not all written into %s: %w", m.opts.Mountpoint, ctx.Err())
		case <-tick.C:
		}
	}
}

// closeFolder ends a directory after the final sync: the files it holds
// as synced are removed (with the marker, and the folder if this process
// made it, once empty); what else it holds stays, named in a warning.
func (m *Mounted) closeFolder(ctx context.Context) error {
	left := m.folder.End()
	if len(left) > 0 {
		m.log.WithField("left", left).Warn("the store's folder keeps files that are not in the store (changed after the final sync, or never uploaded); they stay, with the marker, for the next start of this store here")
	}
	jctx, cancel := lastStep(ctx, minJournalClose, JournalCloseTimeout)
	jerr := m.engine.Close(jctx)
	cancel()
	if len(left) == 0 {
		m.removeDir()
	} else if m.dir != nil {
		m.dir.release() // the folder stays: only its parent's descriptor goes
	}
	m.log.Info("memory store's folder closed")
	return jerr
}
