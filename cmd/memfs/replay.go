package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("replay", "push journals left behind by a killed mount or worker, with a given key", runReplay)
}

func runReplay(args []string) error {
	var apiURL string
	var sd stateDirFlags
	fset := flag.NewFlagSet("replay", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs replay --api-url URL --api-key-file FILE [--state-dir DIR | --data-dir DIR]

Pushes every journal left in the state dir (changes a killed mount or
worker closed but never uploaded) to the store with the given key (an
admin key of memfs serve). The same preconditions and store-wins rules as a
live sync apply; losers go to the conflict log. The key comes from
--api-key-file or MEMFS_API_KEY (--api-key shows it to every user in ps).

Exit status: 0 every journal went up (or there was nothing to replay);
1 an error (a journal could not be replayed at all: the store unreachable
or unknown, the key refused; it is kept); 2 a usage error; 3 replayed,
but changes are left in the journal (not UTF-8, the store's memory cap, a
path conflict, the store gone unreachable midway).

Example:
  memfs replay --api-key-file /var/lib/memfs/admin.key --state-dir /var/lib/memfs

Flags:
`)
		fset.PrintDefaults()
	}
	fset.StringVar(&apiURL, "api-url", envOr("http://127.0.0.1:8080", "MEMFS_API_URL"), "the store service (env MEMFS_API_URL)")
	keyFlag := addKeyFlag(fset, "api-key", "an admin key of the store service", "MEMFS_API_KEY")
	var tlsFlags apiTLSFlags
	tlsFlags.add(fset)
	sd.add(fset)
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	stateDir, _, err := sd.dir()
	if err != nil {
		return err
	}
	apiKey, err := keyFlag.resolve(os.Getenv)
	if err != nil {
		return err
	}
	if apiKey == "" {
		return usagef("an admin key is required (%s)", keyFlag.sources())
	}
	tls, err := tlsFlags.resolve(os.Getenv)
	if err != nil {
		return err
	}
	log, _ := newLogger("text", "info")
	api, err := client.New(tls.options(client.Options{BaseURL: apiURL, APIKey: apiKey, Logger: log}))
	if err != nil {
		return clientUsage(err)
	}
	journals := worker.LeftJournals(stateDir)
	if len(journals) == 0 {
		fmt.Fprintf(os.Stderr, "nothing to replay in %s\n", stateDir)
		return nil
	}
	var left []syncqueue.Left
	failed := 0
	for _, lj := range journals {
		res, l, err := worker.ReplayStore(context.Background(), api, stateDir, lj.StoreID, log.WithField("store", lj.StoreID))
		left = append(left, l)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (the journal is kept)\n", lj.StoreID, err)
			failed++
			continue
		}
		fmt.Printf("%s: %d uploaded, %d deleted, %s left\n", lj.StoreID, res.Uploaded, res.Deleted, l)
	}
	var failure error
	if failed > 0 {
		failure = fmt.Errorf("%d journal(s) could not be replayed", failed)
	}
	return stopError(left, false, "the next 'memfs replay --state-dir "+stateDir+"' (once the reason is gone)", failure)
}
