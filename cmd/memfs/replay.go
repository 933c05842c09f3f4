package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("replay", "push journals left behind by a killed mount or worker, with a given key", runReplay)
	register("status", "mounts on this host and journals left behind", runStatus)
}

func runReplay(args []string) error {
	var apiURL, apiKey, stateDir string
	fset := flag.NewFlagSet("replay", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs replay --api-url URL --api-key KEY [--state-dir DIR]

Pushes every journal left in the state dir (changes a killed mount or
worker closed but never uploaded) to the store with the given key (an
admin key of memfs serve). The same preconditions and store-wins rules as a
live sync apply; losers go to the conflict log.

Flags:
`)
		fset.PrintDefaults()
	}
	fset.StringVar(&apiURL, "api-url", envOr("http://127.0.0.1:8080", "MEMFS_API_URL"), "the store service (env MEMFS_API_URL)")
	fset.StringVar(&apiKey, "api-key", envOr("", "MEMFS_API_KEY"), "an admin key (env MEMFS_API_KEY)")
	fset.StringVar(&stateDir, "state-dir", envOr(defaultStateDir(), "MEMFS_STATE_DIR"), "the state dir (env MEMFS_STATE_DIR)")
	if _, err := parseInterleaved(fset, args); err != nil {
		return err
	}
	if apiKey == "" {
		return usagef("--api-key (or MEMFS_API_KEY) is required")
	}
	log, _ := newLogger("text", "info")
	api, err := client.New(client.Options{BaseURL: apiURL, APIKey: apiKey, Logger: log})
	if err != nil {
		return usagef("%v", err)
	}
	left := worker.LeftJournals(stateDir)
	if len(left) == 0 {
		fmt.Fprintf(os.Stderr, "nothing to replay in %s\n", stateDir)
		return nil
	}
	failed := 0
	for _, lj := range left {
		res, err := worker.ReplayStore(context.Background(), api, stateDir, lj.StoreID, log.WithField("store", lj.StoreID))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (the journal is kept)\n", lj.StoreID, err)
			failed++
			continue
		}
		fmt.Printf("%s: %d uploaded, %d deleted, %d left\n", lj.StoreID, res.Uploaded, res.Deleted, res.Left)
	}
	if failed > 0 {
		return fmt.Errorf("%d journal(s) could not be replayed", failed)
	}
	return nil
}

func runStatus(args []string) error {
	var stateDir string
	fset := flag.NewFlagSet("status", flag.ContinueOnError)
	fset.StringVar(&stateDir, "state-dir", envOr(defaultStateDir(), "MEMFS_STATE_DIR"), "the state dir (env MEMFS_STATE_DIR)")
	if _, err := parseInterleaved(fset, args); err != nil {
		return err
	}
	mounts, err := fs.Mounts()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MOUNTS\tSTORE\tACCESS")
	n := 0
	for _, m := range mounts {
		if m.FSType == "fuse."+fs.FSType {
			access := "read_write"
			if fi, err := os.Stat(m.Dir); err == nil && fi.Mode().Perm()&0o200 == 0 {
				access = "read_only"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", m.Dir, m.Source, access)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "(none)\t\t")
	}
	w.Flush()
	left := worker.LeftJournals(stateDir)
	conflicts, _ := syncqueue.OpenConflictLog(stateDir, syncqueue.ConflictRetention{}).List()
	fmt.Printf("\nJOURNALS LEFT BEHIND (replayed by the next mount of the store, or memfs replay)\n")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "STORE\tPENDING\tBYTES\tAGE")
	for _, lj := range left {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", lj.StoreID, lj.Pending, lj.Bytes, time.Since(lj.ModTime).Round(time.Second))
	}
	if len(left) == 0 {
		fmt.Fprintln(w, "(none)\t\t\t")
	}
	w.Flush()
	fmt.Printf("\nCONFLICTS KEPT: %d (memfs conflicts list)\n", len(conflicts))
	return nil
}
