package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

// The text form of memfs status: one block per mount, a line per field,
// so that it reads at 100 columns whatever the ids (a store id alone is
// 35 characters; a table with a column per field was 150 wide). Long
// errors are cut to the line; --json has them whole.

// statusWidth is the width the text form keeps to, paths aside.
const statusWidth = 100

// keptShown is how many of the latest conflicts the text form lists.
const keptShown = 10

func printStatus(out io.Writer, rep statusReport, now time.Time) {
	for _, d := range rep.StateDirs {
		fmt.Fprintf(out, "state dir %s\n", d)
	}
	fmt.Fprintln(out, "\nMOUNTS")
	n := 0
	for _, p := range rep.Live {
		for _, m := range p.Mounts {
			n++
			printMount(out, p, m, now)
		}
	}
	if n == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	printUnmounted(out, rep.Live, now)
	if len(rep.DeadMounts) > 0 {
		fmt.Fprintln(out, "\nDEAD MOUNTS (their memfs process is gone: \"Transport endpoint is not connected\")")
		for _, e := range rep.DeadMounts {
			fmt.Fprintf(out, "  %s  %s\n    fix: %s   (the next mount of the store replays its journal)\n", e.Dir, e.StoreID, e.Fix)
		}
	}
	if len(rep.OtherMounts) > 0 {
		fmt.Fprintln(out, "\nOTHER MEMFS MOUNTS (served by a process with another state dir)")
		for _, e := range rep.OtherMounts {
			note := ""
			if e.NotAnswering {
				note = "  (not answering)"
			}
			fmt.Fprintf(out, "  %s  %s%s\n", e.Dir, e.StoreID, note)
		}
	}
	printLeft(out, rep.Left, now)
	if len(rep.Damaged) > 0 {
		fmt.Fprintln(out, "\nDAMAGED JOURNALS (salvaged at mount; these copies are kept for a human: inspect, then remove)")
		for _, d := range rep.Damaged {
			size := "?"
			if fi, err := os.Stat(d); err == nil {
				size = humanBytes(fi.Size())
			}
			fmt.Fprintf(out, "  %s  (%s, store %s)\n", d, size, filepath.Base(filepath.Dir(d)))
		}
	}
	if len(rep.Refused) > 0 {
		fmt.Fprintln(out, "\nREFUSED JOURNALS (not this state dir's own: nothing in them was uploaded; inspect, then remove,")
		fmt.Fprintln(out, "  or take one up with memfs replay --trust-journal PATH)")
		for _, r := range rep.Refused {
			fmt.Fprintf(out, "  %s  (store %s, %s ago)\n    %s\n", r.Path, r.StoreID, age(now.Sub(r.Since)), r.Reason)
		}
	}
	if len(rep.Held) > 0 {
		fmt.Fprintln(out, "\nHELD JOURNALS (changes a session left while another session mounted the store)")
		for _, h := range rep.Held {
			who := "session " + h.Session
			if h.Session == "" {
				who = "an API key's mount"
			}
			fmt.Fprintf(out, "  %s  (store %s, written in %s, %s ago)\n    waiting for %s's next run on this host, or memfs replay with an API key\n",
				h.Path, h.StoreID, who, age(now.Sub(h.Since)), who)
		}
	}
	printKept(out, rep, now)
}

// printMount writes one mount's block.
func printMount(out io.Writer, p worker.ProcessStatus, m worker.MountStatus, now time.Time) {
	s := m.Sync
	fmt.Fprintf(out, "%s\n", m.Dir)
	field := func(name, format string, args ...any) {
		fmt.Fprintf(out, "  %-11s %s\n", name, clipTo(fmt.Sprintf(format, args...), statusWidth-14))
	}
	store := m.StoreID
	if m.StoreName != "" {
		store += fmt.Sprintf(" %q", m.StoreName)
	}
	field("store", "%s", store)
	field("process", "pid %d (%s), since %s", p.PID, commandName(p.Command), clock(p.Started, now))
	field("access", "%s", m.Access)
	printMode(field, m, now)
	if m.SessionID != "" || m.WorkID != "" {
		field("session", "%s, work item %s", orDash(m.SessionID), orDash(m.WorkID))
	}
	if s.ReadOnly {
		field("pending", "- (read-only: nothing is uploaded)")
	} else {
		uploads := plural(s.PendingUploads, "upload")
		if s.PendingUnjournaled > 0 {
			uploads += fmt.Sprintf(" (%d not journaled yet)", s.PendingUnjournaled)
		}
		deletes := plural(s.PendingDeletes, "delete")
		if s.NotUploaded > 0 {
			deletes += ", " + plural(s.NotUploaded, "file") + " never uploaded"
		}
		field("pending", "%s, %s; journal %s", uploads, deletes, humanBytes(s.JournalBytes))
	}
	if c := s.Content; c.Fetched < c.Total {
		// Mounted from the listing: the content is still coming.
		field("content", "%d of %d memories fetched; the rest comes in the background, or when read", c.Fetched, c.Total)
	}
	if trouble := troubles(s); len(trouble) > 0 {
		field("now", "%s", strings.Join(trouble, ", "))
	}
	for _, c := range m.Covered {
		// The error on three lines, the mount point whole on its own: it is
		// the part to act on (umount it).
		fmt.Fprintf(out, "  %-11s something is mounted %s the store's mount path:\n", "ERROR", c.Where)
		fmt.Fprintf(out, "  %-11s %s (%s)\n", "", c.MountPoint, c.What())
		fmt.Fprintf(out, "  %-11s the agent may see files that are not the store's\n", "")
	}
	if s.AtCap {
		at := ""
		if s.CapRetryAt != nil {
			at = ", or at " + s.CapRetryAt.Local().Format(time.TimeOnly)
		}
		field("memory cap", "REACHED: new files are tried again once a memory is deleted%s", at)
	}
	if s.LastSync == nil {
		field("last sync", "-")
	} else {
		field("last sync", "%s", clock(*s.LastSync, now))
	}
	if s.LastError == "" || s.LastErrorAt == nil {
		field("last error", "-")
	} else {
		field("last error", "%s: %s", clock(*s.LastErrorAt, now), oneLine(s.LastError))
	}
	field("conflicts", "%d", m.Conflicts)
	switch {
	case m.AsOf != nil:
		field("as of", "%s: the store as it was then, read-only; it follows nothing", m.AsOf.UTC().Format(time.RFC3339Nano))
	case s.Follows == syncqueue.FollowsFeed:
		field("follows", "the store's change feed")
	case s.Follows == syncqueue.FollowsVersions:
		field("follows", "the versions created since the last one seen, every interval (no feed)")
	case s.Follows == syncqueue.FollowsListing:
		field("follows", "listing the store every interval (no feed, no versions)")
	}
	if s.Damaged != nil {
		field("damaged", "%s unreadable in the journal at mount; copy kept at %s", humanBytes(s.Damaged.LostBytes), s.Damaged.KeptAt)
	}
	printWaiting(out, s.Pending)
}

// printMode writes how the store is shown: FUSE, or a directory, with
// what its watch and looks did.
func printMode(field func(name, format string, args ...any), m worker.MountStatus, now time.Time) {
	d := m.Directory
	if d == nil {
		if m.Mode != "" {
			field("mode", "%s", m.Mode)
		}
		return
	}
	found := "an inotify watch and a rescan"
	if !d.Watching {
		found = "the rescan alone (no inotify watch)"
	}
	field("mode", "directory: plain files, changes found by %s", found)
	last := ""
	if !d.LastLook.IsZero() {
		last = fmt.Sprintf("; the last %s, took %.1f ms", clock(d.LastLook, now), d.LastLookMs)
	}
	field("looks", "%d%s", d.Looks, last)
	if d.Overflows+d.Restored+d.Redownloads > 0 {
		field("folder", "%s, %s, %s", plural(d.Overflows, "watch overflow"), plural(d.Restored, "read-only restore"), plural(d.Redownloads, "redownload"))
	}
	if d.MarkerProblem != "" {
		field("ERROR", "the folder's marker file is %s: no change is taken until it is written again", d.MarkerProblem)
	}
}

// troubles are what is wrong with a mount now, for its "now" line.
func troubles(s syncqueue.Status) []string {
	var trouble []string
	if s.Unreachable {
		trouble = append(trouble, "STORE UNREACHABLE")
	}
	if s.NoSpace {
		trouble = append(trouble, "STATE DIR FULL")
	}
	if s.JournalError != "" {
		trouble = append(trouble, strings.ToUpper(s.JournalError)) // I/O ERROR ON THE JOURNAL (EIO)
	}
	if s.Refused != "" {
		trouble = append(trouble, "REFUSED BY THE STORE: "+oneLine(s.Refused))
	}
	if s.RemoteBlocked {
		trouble = append(trouble, "changes from the store wait on this host")
	}
	return trouble
}

// printWaiting writes the "waiting" table of a mount's changes that wait,
// one per line with its reason, nothing when none waits.
func printWaiting(out io.Writer, pending []syncqueue.PendingChange) {
	if len(pending) == 0 {
		return
	}
	fmt.Fprintln(out, "  waiting")
	opw, pathw := 0, 0
	for _, c := range pending {
		opw, pathw = max(opw, len(c.Op)), max(pathw, utf8.RuneCountInString(c.Path))
	}
	for _, c := range pending {
		why := c.Reason
		if c.Error != "" && reasonsWithDetail[c.Reason] {
			why += ": " + oneLine(c.Error)
		}
		fmt.Fprintf(out, "    %-*s  %s%*s  %s\n", opw, c.Op, c.Path, pathw-utf8.RuneCountInString(c.Path), "",
			clipTo(why, max(statusWidth-8-opw-pathw, 40)))
		if c.Reason == syncqueue.ReasonScratch {
			// When it goes up, on a line of its own under the reason.
			fmt.Fprintf(out, "    %*s  %s\n", opw+2+pathw, "", scratchNote(c))
		}
	}
}

// printUnmounted writes the stores of running sessions that someone
// unmounted from outside the worker.
func printUnmounted(out io.Writer, live []worker.ProcessStatus, now time.Time) {
	var lost []worker.UnmountedStore
	for _, p := range live {
		lost = append(lost, p.Unmounted...)
	}
	if len(lost) == 0 {
		return
	}
	fmt.Fprintln(out, "\nUNMOUNTED FROM OUTSIDE (umount while their session runs: it goes on without them)")
	for _, u := range lost {
		fmt.Fprintf(out, "  %s  %s\n", u.Dir, u.StoreID)
		field := func(name, format string, args ...any) {
			fmt.Fprintf(out, "    %-9s %s\n", name, clipTo(fmt.Sprintf(format, args...), statusWidth-14))
		}
		field("ERROR", "unmounted at %s, not by memfs; its final sync ran (writes only)", clock(u.At, now))
		field("session", "%s, work item %s", orDash(u.SessionID), orDash(u.WorkID))
		field("left", "%s", u.Left)
	}
}

// scratchNote says when a create held at a scratch name goes up: by the
// first pass after its hold ends, or, before a pass has seen it, the first
// pass ScratchGrace after the next one.
func scratchNote(c syncqueue.PendingChange) string {
	if c.Until.IsZero() {
		return fmt.Sprintf("uploaded %s after the next pass unless renamed", age(syncqueue.ScratchGrace))
	}
	return fmt.Sprintf("uploaded after %s unless renamed", c.Until.Local().Format(time.TimeOnly))
}

// printLeft writes the journals no process holds.
func printLeft(out io.Writer, left []worker.LeftJournal, now time.Time) {
	fmt.Fprintln(out, "\nJOURNALS LEFT BEHIND (replayed by the next mount of the store, or memfs replay;")
	fmt.Fprintln(out, "  damaged bytes are skipped and the rest salvaged)")
	if len(left) == 0 {
		fmt.Fprintln(out, "  (none)")
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  STORE\tCHANGES\tDELETES\tSIZE\tWRITTEN\tDAMAGED")
	for _, lj := range left {
		damaged := "-"
		if lj.DamagedBytes > 0 {
			damaged = humanBytes(lj.DamagedBytes)
		}
		fmt.Fprintf(w, "  %s\t%d\t%d\t%s\t%s ago\t%s\n", lj.StoreID, lj.Pending, lj.Deletes, humanBytes(lj.Bytes), age(now.Sub(lj.ModTime)), damaged)
	}
	w.Flush()
}

// printKept writes the conflict log: counts per store, then the latest.
func printKept(out io.Writer, rep statusReport, now time.Time) {
	fmt.Fprintf(out, "\nCONFLICTS KEPT: %d (memfs conflicts list; memfs conflicts show ID)\n", rep.Conflicts)
	if rep.Conflicts == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, id := range sortedKeys(rep.ByStore) {
		fmt.Fprintf(w, "  %s\t%d\n", id, rep.ByStore[id])
	}
	w.Flush()
	kept := rep.Kept
	if len(kept) > keptShown {
		fmt.Fprintf(out, "  the latest %d:\n", keptShown)
		kept = kept[len(kept)-keptShown:]
	}
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, c := range kept {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", c.ID, c.StoreID, c.Path)
	}
	w.Flush()
}

// reasonsWithDetail are the reasons whose error says something the reason
// alone does not (the store's message, the path that is taken); the text
// leaves the others' errors out (--json has them all).
var reasonsWithDetail = map[string]bool{syncqueue.ReasonPath: true, syncqueue.ReasonRefused: true,
	syncqueue.ReasonCredential: true}

// clock writes a time of day with its age: "11:43:20 (12s ago)"; a time
// on another day gets its date.
func clock(t, now time.Time) string {
	t = t.Local()
	layout := time.TimeOnly
	if y, m, d := t.Date(); y != now.Local().Year() || m != now.Local().Month() || d != now.Local().Day() {
		layout = time.DateTime
	}
	return fmt.Sprintf("%s (%s ago)", t.Format(layout), age(now.Sub(t)))
}

// age writes a duration to the second, briefly: 12s, 5m03s, 2h05m, 3d04h.
func age(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// commandName is "memfs mount" for "/usr/local/bin/memfs mount".
func commandName(cmd string) string {
	bin, rest, _ := strings.Cut(cmd, " ")
	return strings.TrimSpace(filepath.Base(bin) + " " + rest)
}

// clipTo cuts s to n characters (runes), marking the cut.
func clipTo(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shellSafe is what a path may hold to be pasted into a shell unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes a path for a command to paste: as is when that is
// safe, else in single quotes.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
