package main

import (
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/memfs/memfs/syncqueue"
)

func init() {
	register("conflicts", "list and show local versions that lost to the store (list, show ID)", runConflicts)
}

func runConflicts(args []string) error {
	var sd stateDirFlags
	fset := flag.NewFlagSet("conflicts", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs conflicts list [--state-dir DIR | --data-dir DIR]
       memfs conflicts show [--state-dir DIR | --data-dir DIR] ID

When a file changed both on a mount and in the store, the store wins and
the local version is kept in the conflict log of the state dir. 'list'
prints one line per conflict: its id, time, store and path (then the local
and store sha256). 'show' prints the kept content exactly.

Conflicts are kept 30 days, at most 1,000 — but never dropped while younger
than 7 days, whatever the count.

Flags:
`)
		fset.PrintDefaults()
	}
	sd.add(fset)
	pos, err := parseInterleaved(fset, args)
	if err != nil {
		return err
	}
	stateDir, _, err := sd.dir()
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		pos = []string{"list"}
	}
	log := syncqueue.OpenConflictLog(stateDir, syncqueue.ConflictRetention{})
	switch pos[0] {
	case "list", "ls":
		if len(pos) != 1 {
			return usagef("list takes no arguments")
		}
		all, err := log.List()
		if err != nil {
			return err
		}
		if len(all) == 0 {
			fmt.Fprintf(os.Stderr, "no conflicts in %s\n", syncqueue.ConflictDir(stateDir))
			return nil
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		for _, c := range all {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\tlocal %.12s\tstore %.12s\n", c.ID, c.Time.UTC().Format(time.RFC3339), c.StoreID, c.Path, c.LocalSHA, c.StoreSHA)
		}
		return w.Flush()
	case "show":
		if len(pos) != 2 {
			return usagef("show takes one conflict ID")
		}
		_, content, err := log.Get(pos[1])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(content)
		return err
	}
	return usagef("unknown verb %q: use list or show", pos[0])
}
