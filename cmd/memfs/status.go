package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("status", "what every mount on this host is doing: pending changes and why they wait, journals left behind, damage", runStatus)
}

// statusReport is what memfs status shows (its --json form).
type statusReport struct {
	// StateDir is the first state dir looked at; StateDirs all of them
	// (plain memfs status adds memfs up's, see statusDirs).
	StateDir  string                 `json:"state_dir"`
	StateDirs []string               `json:"state_dirs"`
	Live      []worker.ProcessStatus `json:"processes"`
	// OtherMounts are memfs mounts served by processes of another state dir.
	OtherMounts []mountEntry `json:"other_mounts"`
	// DeadMounts are memfs mounts whose process is gone ("Transport
	// endpoint is not connected").
	DeadMounts []mountEntry         `json:"dead_mounts"`
	Left       []worker.LeftJournal `json:"journals_left_behind"`
	Damaged    []string             `json:"damaged_journals"`
	// Refused are journals a mount would not take up (not this state
	// dir's own: see syncqueue/journal's "Authentication"), kept until a
	// human removes them or takes one up (memfs replay --trust-journal).
	Refused []worker.SetAsideJournal `json:"refused_journals"`
	// Held are journals of a session, set aside while another session
	// mounted the store: that session's next run here uploads them, or
	// memfs replay with an API key.
	Held      []worker.SetAsideJournal `json:"held_journals"`
	Conflicts int                      `json:"conflicts"`
	ByStore   map[string]int           `json:"conflicts_by_store"`
	Kept      []conflictEntry          `json:"conflict_log"`
}

// mountEntry is a memfs mount in the kernel's table that no process of
// the state dirs serves.
type mountEntry struct {
	Dir     string `json:"dir"`
	StoreID string `json:"store_id"`
	// Fix is the command that clears a dead mount.
	Fix string `json:"fix,omitempty"`
	// NotAnswering: its process neither answered within
	// mountProbeTimeout nor is gone (hung, or very busy).
	NotAnswering bool `json:"not_answering,omitempty"`
}

// conflictEntry is one kept conflict and the state dir whose log holds it
// (memfs conflicts show --state-dir DIR ID).
type conflictEntry struct {
	syncqueue.Conflict
	StateDir string `json:"state_dir"`
}

func runStatus(args []string) error {
	var sd stateDirFlags
	var asJSON bool
	fset := flag.NewFlagSet("status", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs status [--state-dir DIR | --data-dir DIR] [--json]

Shows, for every memfs process on this host that uses the state dir, each
mount: the store (id and name), path, access (from the kernel's mount
flags), session and work item, the changes not yet in the store and the
reason each waits (store unreachable, no space for the journal, the
store's memory cap, content not UTF-8, a path conflict, ...), the last
successful sync, the last error, its conflicts and journal size, and an
ERROR for anything mounted over or inside its path (the agent may see
files there that are not the store's). It asks
the processes themselves (a socket each, <state dir>/run/<pid>.sock).
Then what no process holds: mounts whose process died (with the fix),
journals left behind (replayed by the next mount of the store, or memfs
replay), damaged journals, refused journals (not this state dir's own:
never replayed by themselves), journals held for the session that wrote
them, and the conflict log.

It only reads: nothing is changed, replayed or repaired, and it prints
nothing but its answer.

Which state dir: --state-dir, or --data-dir DIR for the state of
'memfs up --data-dir DIR' (DIR/state), or MEMFS_STATE_DIR. With none of
them it shows the default state dir and also memfs up's under the default
data dir, when that exists.

Flags:
`)
		fset.PrintDefaults()
	}
	sd.add(fset)
	fset.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	dir, named, err := sd.dir()
	if err != nil {
		return err
	}
	rep, err := gatherStatus(statusDirs(dir, named, upStateDir(defaultDataDir())))
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printStatus(os.Stdout, rep, time.Now())
	return nil
}

// statusDirs is the state dirs plain memfs status looks at: the one named,
// or else the default and, when it is a directory, upDir — memfs up keeps
// its state under its data dir, and `memfs up` with the default data dir
// is the usual way to try memfs, so plain `memfs status` finds it.
func statusDirs(dir string, named bool, upDir string) []string {
	if named || upDir == dir {
		return []string{dir}
	}
	if fi, err := os.Stat(upDir); err == nil && fi.IsDir() {
		return []string{dir, upDir}
	}
	return []string{dir}
}

// gatherStatus reads the status of every state dir of dirs. It only
// reads: sockets are asked, journals and the conflict log are read, and
// nothing is locked, created or removed.
func gatherStatus(dirs []string) (statusReport, error) {
	rep := statusReport{StateDir: dirs[0], StateDirs: dirs, Live: []worker.ProcessStatus{}, OtherMounts: []mountEntry{},
		DeadMounts: []mountEntry{}, Left: []worker.LeftJournal{}, Damaged: []string{}, Refused: []worker.SetAsideJournal{}, Held: []worker.SetAsideJournal{},
		ByStore: map[string]int{}, Kept: []conflictEntry{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	served := map[string]bool{}
	for _, dir := range dirs {
		for _, p := range worker.ReadStatuses(ctx, dir) {
			rep.Live = append(rep.Live, p)
			for _, m := range p.Mounts {
				served[m.Dir] = true
			}
		}
		// Each journal is read once, for all three lists.
		infos := worker.InspectJournals(dir)
		rep.Left = append(rep.Left, worker.LeftJournals(infos)...)
		for _, info := range infos {
			rep.Damaged = append(rep.Damaged, info.Damaged...)
		}
		refused, held := worker.SetAsideJournals(infos)
		rep.Refused, rep.Held = append(rep.Refused, refused...), append(rep.Held, held...)
		conflicts, err := syncqueue.OpenConflictLog(dir, syncqueue.ConflictRetention{}).List()
		if err != nil {
			return rep, fmt.Errorf("read the conflict log: %w", err)
		}
		for _, c := range conflicts {
			rep.Kept = append(rep.Kept, conflictEntry{Conflict: c, StateDir: dir})
			rep.ByStore[c.StoreID]++
		}
	}
	rep.Conflicts = len(rep.Kept)
	slices.SortStableFunc(rep.Kept, func(a, b conflictEntry) int { return a.Time.Compare(b.Time) })
	mounts, err := fs.Mounts()
	if err != nil {
		return rep, err
	}
	for _, mi := range mounts {
		if mi.FSType != "fuse."+fs.FSType || served[mi.Dir] {
			continue
		}
		e := mountEntry{Dir: mi.Dir, StoreID: mi.Source}
		switch err := probeMount(mi.Dir, mountProbeTimeout); {
		case errors.Is(err, unix.ENOTCONN):
			e.Fix = "umount -l " + shellQuote(mi.Dir)
			rep.DeadMounts = append(rep.DeadMounts, e)
		case errors.Is(err, context.DeadlineExceeded):
			e.NotAnswering = true
			rep.OtherMounts = append(rep.OtherMounts, e)
		default:
			rep.OtherMounts = append(rep.OtherMounts, e)
		}
	}
	return rep, nil
}

// mountProbeTimeout bounds the wait for a mount whose process neither
// answers nor is gone.
const mountProbeTimeout = 2 * time.Second

// probeMount asks the filesystem at dir for its statfs: FUSE sends that
// to the process every time (a stat may be answered from the kernel's
// cache, which hides a dead mount), and a mount whose process is gone
// answers ENOTCONN. A process that does not answer within timeout gives
// context.DeadlineExceeded; the probe is then left behind (it ends when
// memfs status exits).
func probeMount(dir string, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		done <- unix.Statfs(dir, &st)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return context.DeadlineExceeded
	}
}
