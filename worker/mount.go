package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
)

// MountOptions configure one mounted store.
type MountOptions struct {
	// Engine configures the sync engine (store, state dir, interval, ...).
	Engine syncqueue.EngineOptions
	// Mountpoint is created if missing; an existing empty directory is
	// accepted; anything else is refused and left as found.
	Mountpoint string
	// MemoryRoot, when set, is the canonical memory root and Mountpoint a
	// canonical path below it (the worker's sessions): the directory must
	// not exist; it is created with mkdirat in its parent, reached from /
	// without following any symlink, and checked again right before the
	// mount, which then happens at Mountpoint.
	MemoryRoot string
	// FS configures the FUSE mount.
	FS fs.MountOptions
	// Mode is how the store is shown (mountmode.go): ModeFUSE (the
	// default), ModeDirectory (plain files in Mountpoint, package
	// dirmode), or ModeAuto (FUSE when this process can mount, else a
	// directory, with one warning saying why).
	Mode string
	// Rescan is how often a directory is looked at whole (default: the
	// sync interval).
	Rescan time.Duration
	// Log receives lifecycle lines (default: logrus's standard logger).
	Log logrus.FieldLogger
	// Status, when set, shows the mount to memfs status, with Labels.
	Status *StatusServer
	Labels MountLabels
	// Metrics, when set, observes the mount (metrics.go).
	Metrics MountMetrics
}

// Mounted is a store mounted at a directory.
type Mounted struct {
	opts    MountOptions
	log     logrus.FieldLogger
	engine  *syncqueue.Engine
	mount   *fs.Mount // nil in directory mode
	folder  *dirmode.Dir
	mode    string    // ModeFUSE or ModeDirectory
	created bool      // this process created the mount directory
	dir     *mountDir // the directory created below MemoryRoot, if set
	metrics StoreMetrics
}

// MountStore checks the mount point, loads the store (replaying any
// journal a previous run left), mounts it and starts the flusher. On
// failure it undoes what it did: nothing is left mounted or created.
func MountStore(ctx context.Context, opts MountOptions) (*Mounted, error) {
	sm := observeStore(&opts)
	m, err := mountStore(ctx, opts, sm)
	if sm != nil {
		if err != nil {
			sm.Done()
			return nil, err
		}
		m.metrics = sm
		sm.Watch(m.engine.Status)
		var folder func() dirmode.Stats
		if m.folder != nil {
			folder = m.folder.Stats
		}
		sm.Shown(m.mode, folder)
	}
	return m, err
}

func mountStore(ctx context.Context, opts MountOptions, sm StoreMetrics) (*Mounted, error) {
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	if opts.Engine.Log == nil {
		opts.Engine.Log = opts.Log
	}
	log := opts.Log.WithFields(logrus.Fields{"store": opts.Engine.StoreID, "path": opts.Mountpoint})
	mode, err := ChooseMode(opts.Mode, log)
	if err != nil {
		return nil, err
	}
	if mode == ModeDirectory {
		return mountFolder(ctx, opts, log)
	}
	eng, err := syncqueue.NewEngine(opts.Engine)
	if err != nil {
		return nil, err
	}
	m := &Mounted{opts: opts, log: log, engine: eng, mode: ModeFUSE}
	if opts.MemoryRoot != "" {
		rel, ok := below(opts.MemoryRoot, opts.Mountpoint)
		if !ok || filepath.Join(opts.MemoryRoot, rel) != opts.Mountpoint {
			return nil, fmt.Errorf("the mount point %s is not a clean path below the memory root %s", opts.Mountpoint, opts.MemoryRoot)
		}
		t := mountTarget{Path: opts.Mountpoint, Root: opts.MemoryRoot, Rel: rel}
		if m.dir, err = createMountDir(t, opts.Engine.StoreID); err != nil {
			return nil, err
		}
		m.created = true
	} else if m.created, err = fs.PrepareMountpoint(opts.Mountpoint); err != nil {
		return nil, err
	}
	if err := eng.Open(ctx); err != nil {
		m.removeDir()
		return nil, err
	}
	if m.dir != nil {
		if err := m.dir.verify(opts.Engine.StoreID); err != nil {
			eng.Close(ctx)
			m.removeDir()
			return nil, err
		}
	}
	fsOpts := opts.FS
	if fsOpts.OnUnmountWait == nil {
		fsOpts.OnUnmountWait = m.unmountWaits
	}
	if fsOpts.OnCover == nil {
		// Made before the mount: the watch may call it at once. Its log
		// names the path the kernel will list.
		cr := &coverReport{log: log, metrics: sm}
		if real, err := fs.RealPath(opts.Mountpoint); err == nil && real != opts.Mountpoint {
			cr.log = log.WithField("path", real)
		}
		fsOpts.OnCover = cr.changed
	}
	m.mount, err = fs.MountTree(opts.Mountpoint, eng.Tree(), fsOpts)
	if err != nil {
		eng.Close(ctx)
		m.removeDir()
		return nil, err
	}
	if m.dir != nil {
		// The kernel resolved the path once more: make sure the mount
		// landed at the canonical path and not through a symlink swapped
		// in since verify.
		if mounted, err := fs.IsMounted(opts.Mountpoint); !mounted {
			m.mount.Unmount(ctx)
			eng.Close(ctx)
			m.removeDir()
			if err != nil {
				return nil, fmt.Errorf("check the mount at %s: %w", opts.Mountpoint, err)
			}
			return nil, fmt.Errorf("the store was not mounted at %s: the path changed while mounting; the mount was detached", opts.Mountpoint)
		}
	}
	if d := m.mount.Dir; d != opts.Mountpoint {
		// Reached through a symlink: logged where the kernel lists it.
		m.log = m.log.WithField("path", d)
	}
	eng.Start()
	opts.Status.add(m, opts.Labels)
	m.log.Info("memory store mounted")
	return m, nil
}

// Covered lists what is mounted over or inside the store's mount path now
// (covered.go); nothing for a directory.
func (m *Mounted) Covered() []fs.Cover {
	if m.mount == nil {
		return nil
	}
	return m.mount.Covered()
}

// Mode is how the store is shown: ModeFUSE or ModeDirectory.
func (m *Mounted) Mode() string { return m.mode }

// Folder is the directory the store is written into (directory mode; nil
// for a FUSE mount).
func (m *Mounted) Folder() *dirmode.Dir { return m.folder }

// folderStats is what the directory's watch and looks have done (nil for
// a FUSE mount).
func (m *Mounted) folderStats() *dirmode.Stats {
	if m.folder == nil {
		return nil
	}
	st := m.folder.Stats()
	return &st
}

// SyncNow runs a sync pass at once (SIGUSR1): a directory is looked at
// first, so that what was written in it before is in the pass.
func (m *Mounted) SyncNow(ctx context.Context, deletes, waiveDelay bool) syncqueue.SyncResult {
	if m.folder != nil {
		m.folder.Look()
	}
	return m.engine.SyncNow(ctx, deletes, waiveDelay)
}

// Engine is the store's sync engine.
func (m *Mounted) Engine() *syncqueue.Engine { return m.engine }

// Dir is the mount point.
func (m *Mounted) Dir() string {
	if m.mount == nil {
		return m.folder.Path()
	}
	return m.mount.Dir
}

// Gone is closed when the mount disappears: unmounted by us or from
// outside (umount, fusermount3 -u, umount -l even of a busy mount; see
// fs.Mount.Gone). A directory never goes (nil: never closed).
func (m *Mounted) Gone() <-chan struct{} {
	if m.mount == nil {
		return nil
	}
	return m.mount.Gone()
}

// Left is what Close left in the journal: the engine's final state.
func (m *Mounted) Left() syncqueue.Left { return m.engine.Left() }

// UnmountTimeout bounds the EBUSY retries before a lazy detach.
const UnmountTimeout = 10 * time.Second

// JournalCloseTimeout bounds closing the journal: a final fdatasync and
// the release of its lock, both local.
const JournalCloseTimeout = 10 * time.Second

// Close ends the mount: refuse new writes, final sync (deletes included
// only when clean), unmount, release the journal, and remove the mount
// directory if this process created it and it is empty.
//
// Ending ctx (a second signal) cuts the final sync short and detaches a
// busy mount lazily at once; the journal is still closed, under its own
// bound, since it holds what the final sync did not upload. A deadline on
// ctx (a stop's, stop.go) is shared out: the final sync ends
// reserveAfterSync before it and the unmount reserveAfterUnmount before
// it, so that the whole of Close ends about at the deadline.
func (m *Mounted) Close(ctx context.Context, clean bool) error {
	defer m.opts.Status.remove(m)
	if m.metrics != nil {
		// Dropped first: a scrape must not read the engine's status while
		// it closes; the final pass's counts would go with the store's
		// series a moment later anyway.
		m.metrics.Done()
	}
	fctx, cancel := endingBefore(ctx, reserveAfterSync)
	m.engine.Finish(fctx, clean)
	cancel()
	if m.folder != nil {
		return m.closeFolder(ctx)
	}
	uctx, cancel := endingBefore(ctx, reserveAfterUnmount)
	uctx, cancel2 := context.WithTimeout(uctx, UnmountTimeout)
	res, uerr := m.mount.UnmountReport(uctx)
	cancel2()
	cancel()
	m.logUnmount(res)
	jctx, cancel := lastStep(ctx, minJournalClose, JournalCloseTimeout)
	jerr := m.engine.Close(jctx)
	cancel()
	m.removeDir()
	m.log.Info("memory store unmounted")
	return errors.Join(uerr, jerr)
}

// unmountWaits says, the moment a stop's unmount is refused, what the
// stop now waits for and how to cut the wait short: otherwise it is
// silent until the lazy detach.
func (m *Mounted) unmountWaits(ctx context.Context, err error) {
	why := "the unmount was refused"
	if errors.Is(err, unix.EBUSY) {
		why = "the mount is in use (a process has a file open in it or works in it)"
	}
	until := "until the stop's time for it is up"
	if d, ok := ctx.Deadline(); ok {
		until = fmt.Sprintf("for up to %s", time.Until(d).Round(time.Second))
	}
	m.log.WithError(err).Warn(fmt.Sprintf("%s: retrying the unmount %s, then detaching it lazily (it leaves the mount table at once; "+
		"the kernel ends it when the last file open in it closes); during a stop, a second Ctrl-C or SIGTERM detaches it now", why, until))
}

// logUnmount says what the unmount found and did beyond unmounting.
func (m *Mounted) logUnmount(res fs.Unmounted) {
	for _, c := range res.Covers {
		m.log.WithFields(logrus.Fields{"cover": c.Dir, "cover_type": c.FSType, "cover_source": c.Source}).
			Warn("something was mounted over the memory store's mount; it was detached with it")
	}
	if res.Lazy {
		m.log.Warn("the mount was still in use when the time for its unmount was up: detached lazily (MNT_DETACH); the kernel ends it once the last file open in it closes")
	}
	if res.Lingering {
		m.log.Warn("the mount's FUSE connection is still open after the unmount (a copy of the mount in another mount namespace): it ends with this process")
	}
}

// removeDir removes the mount directory if this process created it; a
// directory that still holds files is left with a warning.
func (m *Mounted) removeDir() {
	if !m.created {
		return
	}
	var err error
	if m.dir != nil {
		err = m.dir.remove()
	} else if err = os.Remove(m.opts.Mountpoint); errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		m.log.WithError(err).Warn(fmt.Sprintf("left the mount directory %s in place", m.opts.Mountpoint))
	}
}
