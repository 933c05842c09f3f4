package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("status", "what every mount on this host is doing: pending changes and why they wait, journals left behind, damage", runStatus)
}

// statusReport is what memfs status shows (its --json form).
type statusReport struct {
	StateDir string                 `json:"state_dir"`
	Live     []worker.ProcessStatus `json:"processes"`
	// OtherMounts are memfs mounts served by processes of another state dir.
	OtherMounts []fs.MountInfo `json:"other_mounts"`
	// DeadMounts are memfs mounts whose process is gone ("Transport
	// endpoint is not connected").
	DeadMounts []fs.MountInfo       `json:"dead_mounts"`
	Left       []worker.LeftJournal `json:"journals_left_behind"`
	Damaged    []string             `json:"damaged_journals"`
	Conflicts  int                  `json:"conflicts"`
}

func runStatus(args []string) error {
	var stateDir string
	var asJSON bool
	fset := flag.NewFlagSet("status", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs status [--state-dir DIR] [--json]

Shows, for every memfs process on this host that uses the state dir, each
mount: store, path, access, session, the changes not yet in the store and
the reason each waits (store unreachable, no space for the journal, the
store's memory cap, content not UTF-8, a path conflict, ...), the last
successful sync and the last error. Then what no process holds: mounts
whose process died (with the fix), journals left behind (replayed by the
next mount of the store, or memfs replay), copies of damaged journals,
and the conflict log. It only reads: nothing is changed, replayed or
repaired. memfs up keeps its state in <data dir>/state.

Flags:
`)
		fset.PrintDefaults()
	}
	fset.StringVar(&stateDir, "state-dir", envOr(defaultStateDir(), "MEMFS_STATE_DIR"), "the state dir (env MEMFS_STATE_DIR)")
	fset.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	rep, err := gatherStatus(stateDir)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printStatus(os.Stdout, rep)
	return nil
}

func gatherStatus(stateDir string) (statusReport, error) {
	rep := statusReport{StateDir: stateDir}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep.Live = worker.ReadStatuses(ctx, stateDir)
	served := map[string]bool{}
	for _, p := range rep.Live {
		for _, m := range p.Mounts {
			served[m.Dir] = true
		}
	}
	mounts, err := fs.Mounts()
	if err != nil {
		return rep, err
	}
	for _, mi := range mounts {
		if mi.FSType != "fuse."+fs.FSType || served[mi.Dir] {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(mi.Dir, &st); errors.Is(err, syscall.ENOTCONN) {
			rep.DeadMounts = append(rep.DeadMounts, mi)
		} else {
			rep.OtherMounts = append(rep.OtherMounts, mi)
		}
	}
	rep.Left = worker.LeftJournals(stateDir)
	for _, info := range worker.InspectJournals(stateDir) {
		rep.Damaged = append(rep.Damaged, info.Damaged...)
	}
	conflicts, _ := syncqueue.OpenConflictLog(stateDir, syncqueue.ConflictRetention{}).List()
	rep.Conflicts = len(conflicts)
	return rep, nil
}

func printStatus(out io.Writer, rep statusReport) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "MOUNTS (state dir %s)\n", rep.StateDir)
	fmt.Fprintln(w, "PATH\tSTORE\tACCESS\tSESSION\tPENDING\tLAST SYNC\tLAST ERROR")
	n := 0
	var pending [][]string
	for _, p := range rep.Live {
		for _, m := range p.Mounts {
			n++
			s := m.Sync
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Dir, m.StoreID, m.Access, orDash(m.SessionID),
				pendingSummary(s), lastSync(s), lastError(s))
			for _, c := range s.Pending {
				why := c.Reason
				if c.Error != "" && reasonsWithDetail[c.Reason] {
					why += ": " + clip(c.Error)
				}
				pending = append(pending, []string{m.StoreID, c.Path, c.Op, why})
			}
			if s.Damaged != nil {
				pending = append(pending, []string{m.StoreID, "(journal)", "damaged", fmt.Sprintf("%d bytes could not be read at mount; the damaged copy is %s", s.Damaged.LostBytes, s.Damaged.KeptAt)})
			}
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "(none)")
	}
	w.Flush()
	if len(pending) > 0 {
		fmt.Fprintln(out, "\nCHANGES NOT YET IN THE STORE")
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "STORE\tPATH\tCHANGE\tWAITS BECAUSE")
		for _, r := range pending {
			fmt.Fprintln(w, strings.Join(r, "\t"))
		}
		w.Flush()
	}
	if len(rep.DeadMounts) > 0 {
		fmt.Fprintln(out, "\nDEAD MOUNTS (their memfs process is gone: \"Transport endpoint is not connected\")")
		for _, mi := range rep.DeadMounts {
			fmt.Fprintf(out, "  %s  %s  fix: umount -l %s   (its journal is replayed by the next mount of the store)\n", mi.Dir, mi.Source, mi.Dir)
		}
	}
	if len(rep.OtherMounts) > 0 {
		fmt.Fprintln(out, "\nOTHER MEMFS MOUNTS (served by a process with another state dir)")
		for _, mi := range rep.OtherMounts {
			fmt.Fprintf(out, "  %s  %s\n", mi.Dir, mi.Source)
		}
	}
	fmt.Fprintln(out, "\nJOURNALS LEFT BEHIND (replayed by the next mount of the store, or memfs replay)")
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "STORE\tPENDING\tBYTES\tAGE")
	for _, lj := range rep.Left {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", lj.StoreID, lj.Pending, lj.Bytes, time.Since(lj.ModTime).Round(time.Second))
	}
	if len(rep.Left) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	w.Flush()
	if len(rep.Damaged) > 0 {
		fmt.Fprintln(out, "\nDAMAGED JOURNALS (salvaged at mount; these copies are kept for a human: inspect, then remove)")
		for _, d := range rep.Damaged {
			size := int64(-1)
			if fi, err := os.Stat(d); err == nil {
				size = fi.Size()
			}
			fmt.Fprintf(out, "  %s  (%d bytes, store %s)\n", d, size, filepath.Base(filepath.Dir(d)))
		}
	}
	fmt.Fprintf(out, "\nCONFLICTS KEPT: %d (memfs conflicts list)\n", rep.Conflicts)
}

func pendingSummary(s syncqueue.Status) string {
	if s.ReadOnly {
		return "-"
	}
	out := fmt.Sprintf("%d up, %d del", s.PendingUploads, s.PendingDeletes)
	if s.NoSpace {
		out += ", STATE DIR FULL"
	}
	if s.Unreachable {
		out += ", STORE UNREACHABLE"
	}
	return out
}

func lastSync(s syncqueue.Status) string {
	if s.LastSync == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s ago)", s.LastSync.Format(time.TimeOnly), time.Since(*s.LastSync).Round(time.Second))
}

func lastError(s syncqueue.Status) string {
	if s.LastError == "" {
		return "-"
	}
	return fmt.Sprintf("%s ago: %s", time.Since(*s.LastErrorAt).Round(time.Second), clip(s.LastError))
}

// reasonsWithDetail are the reasons whose error says something the reason
// alone does not (the store's message, the path that is taken); the table
// leaves the others' errors out (--json has them all).
var reasonsWithDetail = map[string]bool{syncqueue.ReasonPath: true, syncqueue.ReasonRefused: true,
	syncqueue.ReasonCredential: true, syncqueue.ReasonCap: false}

// clip shortens an error for a table cell.
func clip(s string) string {
	const maxLen = 140
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
