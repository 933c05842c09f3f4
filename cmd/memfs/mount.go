package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/history"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("mount", "mount one memory store in the foreground (for people and tests)", runMount)
}

// syncFlags are the options of every command that syncs (docs/sync.md,
// "Passes" and "Deletes").
type syncFlags struct {
	interval, deletions, stateDir string
	quiet                         string // --memory-sync-quiet (syncquiet.go)
	deleteDelay                   time.Duration
	logFormat, logLevel           string
	mountMode                     string // --mount-mode: fuse, directory or auto
}

// syncDefaults are the defaults that differ between the commands that
// sync: memfs up keeps its state in its data dir and logs only warnings
// under its banner.
type syncDefaults struct {
	stateDir, stateDirHelp string
	logLevel               string
}

func (s *syncFlags) add(fs *flag.FlagSet) {
	s.addWith(fs, syncDefaults{stateDir: envOr(defaultStateDir(), "MEMFS_STATE_DIR"),
		stateDirHelp: "journals, conflict logs and lock files (env MEMFS_STATE_DIR)", logLevel: "info"})
}

// addWith adds the flags with d's defaults. "off" means the same on every
// command (docs/sync.md, "Passes"): run without memory. The worker and memfs session
// then run sessions without their stores; memfs mount and memfs up, which
// exist to mount a store, refuse it.
func (s *syncFlags) addWith(fs *flag.FlagSet, d syncDefaults) {
	fs.StringVar(&s.interval, "memory-sync-interval", envOr("15s", "MEMFS_MEMORY_SYNC_INTERVAL"), "how often closed changes are uploaded: a duration of at least 5s. off runs without memory: worker and session run sessions without their memory stores; mount and up refuse it (env MEMFS_MEMORY_SYNC_INTERVAL)")
	fs.StringVar(&s.quiet, "memory-sync-quiet", envOr(syncqueue.DefaultQuiet.String(), "MEMFS_MEMORY_SYNC_QUIET"), quietHelp)
	fs.StringVar(&s.deletions, "memory-sync-deletions", envOr(syncqueue.DeletionsEnabled, "MEMFS_MEMORY_SYNC_DELETIONS"), "enabled, log_only or disabled (env MEMFS_MEMORY_SYNC_DELETIONS)")
	fs.DurationVar(&s.deleteDelay, "memory-sync-delete-delay", 30*time.Second, "how long a local delete must last before it is sent (tests shorten it)")
	fs.StringVar(&s.stateDir, "state-dir", d.stateDir, d.stateDirHelp)
	fs.StringVar(&s.mountMode, "mount-mode", envOr(worker.ModeAuto, "MEMFS_MOUNT_MODE"), "fuse, directory or auto: how a memory store is shown; auto mounts FUSE where this process can, else writes the store into its mount path as a plain folder, with one warning (README, \"Mount modes\"; env MEMFS_MOUNT_MODE)")
	addLogFlagsWith(fs, &s.logFormat, &s.logLevel, d.logLevel)
}

// parseInterval reads --memory-sync-interval: 0 means off.
func (s *syncFlags) parseInterval() (time.Duration, error) {
	if strings.EqualFold(s.interval, "off") {
		return 0, nil
	}
	d, err := time.ParseDuration(s.interval)
	if err != nil {
		return 0, fmt.Errorf("--memory-sync-interval must be a duration like 15s, or off, not %q", s.interval)
	}
	if d < syncqueue.MinInterval {
		return 0, fmt.Errorf("--memory-sync-interval must be at least %s (or off), not %s", syncqueue.MinInterval, d)
	}
	return d, nil
}

// defaultStateDir is /var/lib/memfs as root, else $XDG_STATE_HOME/memfs
// (~/.local/state/memfs).
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/memfs"
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "memfs")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "memfs")
}

// mountUsage is memfs mount --help, before the flags.
const mountUsage = `Usage: memfs mount --api-url URL --api-key-file FILE --store ID [--read-only | --at TIME] [--mkdir] [flags] MOUNTPOINT
       memfs mount -o api_url=URL,api_key_file=FILE[,ro,...] --store ID MOUNTPOINT
       mount.memfs STORE MOUNTPOINT [-sfnv] [-o OPTIONS]   (mount(8)'s helper)

Mounts one memory store at MOUNTPOINT in the foreground. MOUNTPOINT must
be an empty directory (--mkdir creates it and its parents); symlinks on
the way to it are followed, and the store is mounted at the resolved
path, the one printed and listed in /proc/self/mountinfo. Every file
closed on the mount is journaled under --state-dir at once and uploaded
once no file has been closed for --memory-sync-quiet, at the latest at
the next --memory-sync-interval. Ctrl-C, SIGTERM, or unmounting it (umount,
fusermount3 -u, umount -l) runs a final sync (at most 30 s), unmounts and
exits; whatever could not be uploaded stays in the journal and is
replayed by the next 'memfs mount' of the store with the same
--state-dir, or by 'memfs replay'. A second Ctrl-C or SIGTERM stops
waiting (for the final sync, or for a busy mount to be let go): the mount
is detached anyway (lazily if busy) and the journal keeps what was not
uploaded. SIGUSR1 runs a sync pass at once.

--at TIME mounts the store read-only as it was then (an RFC 3339 time, or a
duration ago such as 2h): each memory at its last version at or before
TIME, a memory deleted by then absent, one whose version then is redacted
left out (with a warning). It is built from the memory versions, so it
works with any key that can list them; it shows nothing that happens
later. memfs log, show, diff and restore work on its files.

Exit status: 0 stopped, and everything closed on the mount reached the
store; 1 an error; 2 a usage error; 3 stopped, but changes are left in
the journal (the final sync was cut short, the store was unreachable, or
a change waits: not UTF-8, the store's memory cap, a path conflict).

The admin key comes from --api-key-file (a file only you can read) or
MEMFS_API_KEY. --api-key works too, but shows the key to every user of the
host in ps.

--mkdir creates MOUNTPOINT and its missing parents like mkdir -p; the
mount point is removed at unmount, the parents stay. Without it, a
missing MOUNTPOINT is an error.

-o takes mount(8)-style options, comma-separated, each a spelling of a
flag (a later one wins): ro, rw, uid=N, gid=N, allow_other, api_url=,
api_key_file=, ca_file=, insecure_http, state_dir=, sync_interval=,
sync_quiet=, mount_mode=, file_mode=, dir_mode=, umask=, x-mount.mkdir[=MODE] (--mkdir). Options that mount(8) and
systemd keep for themselves (defaults, noauto, nofail, _netdev, user,
users, x-systemd.*) are ignored; any other is an error naming it. Called
as mount.memfs (ln -s /usr/local/bin/memfs /sbin/mount.memfs), the
binary is mount(8)'s helper for type memfs: it starts memfs mount in the
background and returns once the store is mounted, for /etc/fstab and
systemd .mount units (see docs/operating.md; mount.memfs --help).

Examples:
  memfs mount --api-url http://127.0.0.1:8080 --api-key-file /var/lib/memfs/admin.key --store memstore_... --mkdir /mnt/memory/notes
  MEMFS_API_KEY=$(cat /var/lib/memfs/admin.key) memfs mount --store memstore_... /mnt/memory/notes
  memfs mount -o ro,api_key_file=/var/lib/memfs/admin.key --store memstore_... /mnt/notes
  mount -t memfs -o api_key_file=/var/lib/memfs/admin.key,x-mount.mkdir memstore_... /mnt/notes

Flags:
`

// mountArgs are memfs mount's flags and MOUNTPOINT, checked and resolved.
type mountArgs struct {
	sf                      syncFlags
	apiURL, apiKey, storeID string
	metricsListen           string
	tls                     apiTLS
	readOnly, debug         bool
	at                      time.Time // --at: the store as it was then (zero: as it is)
	mkdir                   mkdirFlag
	mountpoint              string
	interval, quiet         time.Duration
	owner                   fs.Ownership
	allowOther              bool
}

// parseMountArgs parses and checks memfs mount's command line (flags, -o
// options and env vars); what it refuses is a usage error.
func parseMountArgs(args []string) (mountArgs, error) {
	var a mountArgs
	var of ownerFlags
	fset := flag.NewFlagSet("mount", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), mountUsage)
		fset.PrintDefaults()
	}
	fset.StringVar(&a.apiURL, "api-url", envOr("http://127.0.0.1:8080", "MEMFS_API_URL"), "the store service (env MEMFS_API_URL)")
	keyFlag := addKeyFlag(fset, "api-key", "an admin key of the store service", "MEMFS_API_KEY")
	var tlsFlags apiTLSFlags
	tlsFlags.add(fset)
	fset.StringVar(&a.storeID, "store", "", "the memory store id (memstore_...)")
	fset.BoolVar(&a.readOnly, "read-only", false, "mount read-only: nothing on the mount can change")
	at := fset.String("at", "", "mount the store read-only as it was at this time: RFC 3339 (2026-12-01T09:30:00Z) or a duration ago (2h, 3d); built from its memory versions")
	fset.BoolVar(&a.debug, "fuse-debug", false, "log every FUSE request (very verbose)")
	fset.Var(&a.mkdir, "mkdir", "create MOUNTPOINT and its missing parents (like mkdir -p; --mkdir=MODE: the parents' mode, default 0755); without it MOUNTPOINT must exist")
	a.sf.add(fset)
	of.add(fset, "you")
	addMetricsFlag(fset, &a.metricsListen)
	checkOptions := addMountOptionFlag(fset)
	pos, err := parseInterleaved(fset, args)
	if err == nil {
		err = checkOptions()
	}
	if err != nil {
		return a, err
	}
	if len(pos) != 1 {
		return a, usagef("give exactly one MOUNTPOINT")
	}
	a.mountpoint = pos[0]
	if a.storeID == "" {
		return a, usagef("--store is required")
	}
	if *at != "" {
		if a.at, err = history.ParseTime(*at, time.Now()); err != nil {
			return a, usagef("--at: %v", err)
		}
		if a.at.After(time.Now()) {
			return a, usagef("--at %s is in the future", *at)
		}
		a.readOnly = true // the past is read-only
	}
	if a.apiKey, err = keyFlag.resolve(os.Getenv); err != nil {
		return a, err
	}
	if a.apiKey == "" {
		return a, usagef("an admin key is required (%s): the admin key memfs serve wrote to its data dir's admin.key", keyFlag.sources())
	}
	if a.tls, err = tlsFlags.resolve(os.Getenv); err != nil {
		return a, err
	}
	if a.interval, a.quiet, err = a.sf.parseSync(); err != nil {
		return a, usagef("%v", err)
	}
	if a.interval == 0 {
		return a, usagef("--memory-sync-interval off means running without memory: there is nothing to mount")
	}
	var ownerGiven bool
	if a.owner, ownerGiven, a.allowOther, err = of.resolve(); err != nil {
		return a, err
	}
	if !ownerGiven {
		a.owner.UID, a.owner.GID = uint32(os.Getuid()), uint32(os.Getgid())
	}
	return a, nil
}

func runMount(args []string) error {
	a, err := parseMountArgs(args)
	if err != nil {
		return err
	}
	sf := a.sf
	log, err := newLogger(sf.logFormat, sf.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	onLoad, err := loadProgress(os.Stderr)
	if err != nil {
		return err
	}
	cl, err := client.New(a.tls.options(client.Options{BaseURL: a.apiURL, APIKey: a.apiKey, Logger: log}))
	if err != nil {
		return clientUsage(err)
	}
	me, err := listenMetrics("mount", a.metricsListen, log)
	if err != nil {
		return err
	}
	defer me.Close()
	mm, err := me.workerMetrics(false)
	if err != nil {
		return err
	}
	// The first SIGINT/SIGTERM ends ctx: the clean stop below. The second
	// ends closeCtx, which Close gets: the final sync stops waiting, the
	// mount is still detached and the journal closed.
	closeCtx, cutShort := context.WithCancel(context.Background())
	defer cutShort()
	ctx, stop := signals(log, cutShort)
	defer stop()
	// What can't work is said first, alone: FUSE, then the state dir
	// (the status socket below goes in it, and would warn first).
	if sf.mountMode == worker.ModeFUSE {
		if err := fs.CheckFUSE(); err != nil {
			return err
		}
	}
	if err := prepareStateDir(sf.stateDir, log); err != nil {
		return err
	}
	if err := prepareMountDir(a.mountpoint, a.mkdir); err != nil {
		return err
	}
	var labels worker.MountLabels
	if !a.at.IsZero() {
		labels.AsOf = &a.at
	}
	status := startStatus(sf.stateDir, log)
	defer status.Close()
	mount := func(st syncqueue.Store) (*worker.Mounted, error) {
		m, err := worker.MountStore(ctx, worker.MountOptions{
			Engine: syncqueue.EngineOptions{
				StoreID: a.storeID, Store: st, StateDir: sf.stateDir, ReadOnly: a.readOnly,
				Interval: a.interval, Quiet: a.quiet, Deletions: sf.deletions, DeleteDelay: sf.deleteDelay,
				Owner: a.owner, OnLoad: onLoad,
			},
			Mountpoint: a.mountpoint,
			Mode:       sf.mountMode,
			FS:         fs.MountOptions{AllowOther: a.allowOther, Debug: a.debug},
			Log:        log,
			Status:     status,
			Labels:     labels,
			Metrics:    mm,
		})
		return m, withServiceHint(err, a.apiURL)
	}
	var m *worker.Mounted
	if a.at.IsZero() {
		m, err = mount(cl)
	} else {
		m, err = mountAt(ctx, closeCtx, a, cl, mount, log)
	}
	if err != nil {
		return err
	}
	outside := waitMountEnd(ctx, m, a.storeID, log)
	err = m.Close(closeCtx, true)
	left := m.Left()
	if outside {
		log.WithField("left", left.String()).Info("unmounted from outside memfs: stopped after a final sync")
	}
	return stopError([]syncqueue.Left{left}, closeCtx.Err() != nil,
		fmt.Sprintf("the next 'memfs mount' of %s with --state-dir %s (or 'memfs replay --state-dir %s')", a.storeID, sf.stateDir, sf.stateDir), err)
}

// mountAt mounts the store as it was at a.at (memfs mount --at). "As
// now" (nothing changed since a.at: the mount's own listing is the past)
// is checked once mounted; if the store changed while it was listed, the
// mount is made again from the versions.
func mountAt(ctx, closeCtx context.Context, a mountArgs, cl *client.Client, mount func(syncqueue.Store) (*worker.Mounted, error), log logrus.FieldLogger) (*worker.Mounted, error) {
	asOf, err := history.NewAsOf(ctx, cl, a.storeID, a.at)
	if err != nil {
		return nil, withServiceHint(err, a.apiURL)
	}
	m, err := mount(asOf)
	if err != nil {
		return nil, err
	}
	switch verr := asOf.Verify(ctx); {
	case errors.Is(verr, history.ErrChangedWhileRead):
		log.Info("the store changed while it was read as it was: mounting it again from its versions")
		if err := m.Close(closeCtx, true); err != nil {
			return nil, err
		}
		if err := prepareMountDir(a.mountpoint, a.mkdir); err != nil {
			return nil, err
		}
		if asOf, err = history.NewAsOfFromVersions(ctx, cl, a.storeID, a.at); err != nil {
			return nil, withServiceHint(err, a.apiURL)
		}
		if m, err = mount(asOf); err != nil {
			return nil, err
		}
	case verr != nil:
		m.Close(closeCtx, true)
		return nil, verr
	}
	snap := asOf.Snapshot()
	fields := logrus.Fields{"at": snap.At.UTC().Format(time.RFC3339Nano), "memories": len(snap.Entries), "versions_read": snap.Versions}
	if len(snap.Redacted) > 0 {
		fields["redacted_left_out"] = len(snap.Redacted)
		log.WithFields(fields).Warn("mounted the store as it was, read-only; memories whose version then is redacted are left out: their path and content are gone for ever")
	} else {
		log.WithFields(fields).Info("mounted the store as it was, read-only")
	}
	return m, nil
}

// waitMountEnd prints that the store is mounted and serves SIGUSR1 until
// ctx ends or the mount is taken away; outside says it was unmounted from
// outside memfs.
func waitMountEnd(ctx context.Context, m *worker.Mounted, storeID string, log logrus.FieldLogger) (outside bool) {
	// SIGUSR1 runs a sync pass at once (for people who don't want to wait
	// for the interval, and for tests). It is caught before the "mounted"
	// line is printed: a SIGUSR1 sent by a script as soon as it reads that
	// line would otherwise be dropped (Go ignores an un-notified SIGUSR1).
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	fmt.Printf("memfs mount: %s mounted at %s (Ctrl-C to unmount)\n", storeID, m.Dir())
	gone := m.Gone()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-gone:
			// umount, fusermount3 -u or umount -l (a systemd .mount unit
			// stopping, an operator): a normal stop, like Ctrl-C. The tree
			// outlives the mount, so the final sync uploads everything
			// closed on it, deletes included; it can no longer show the
			// store's changes, and need not.
			return true
		case <-usr1:
			res := m.SyncNow(ctx, true, false)
			log.WithFields(map[string]any{"uploaded": res.Uploaded, "deleted": res.Deleted, "failed": res.Failed, "left": res.Left}).Info("sync pass on SIGUSR1")
		}
	}
}
