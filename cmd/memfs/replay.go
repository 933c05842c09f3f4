package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
	"github.com/memfs/memfs/worker"
)

func init() {
	register("replay", "push journals left behind by a killed mount or worker, with a given key", runReplay)
}

// replayUsage is memfs replay --help, before the flags.
const replayUsage = `Usage: memfs replay --api-url URL --api-key-file FILE [--state-dir DIR | --data-dir DIR]
                    [--trust-journal PATH [--store ID]]

Pushes every journal left in the state dir (changes a killed mount or
worker closed but never uploaded) to the store with the given key (an
admin key of memfs serve), and the journals held for a session (changes a
session left while another session mounted the store). The same
preconditions and store-wins rules as a live sync apply; losers go to the
conflict log. The store's versions name the key as the actor of what it
uploads; the log says which session wrote each journal. The key comes
from --api-key-file or MEMFS_API_KEY (--api-key shows it to every user in
ps).

A journal memfs refused (listed by memfs status: a version 1 journal, one
written in another state dir, one another user could write) is never
replayed by itself. --trust-journal PATH takes one up, after you checked
it: its changes become the store's journal in this state dir (which must
hold nothing pending) and are replayed; the file is kept as PATH.trusted.
The store is the one whose journal directory PATH is in, or --store.

Exit status: 0 every journal went up (or there was nothing to replay);
1 an error (a journal could not be replayed at all: the store unreachable
or unknown, the key refused; it is kept); 2 a usage error; 3 replayed,
but changes are left in the journal (not UTF-8, the store's memory cap, a
path conflict, the store gone unreachable midway).

Example:
  memfs replay --api-key-file /var/lib/memfs/admin.key --state-dir /var/lib/memfs

Flags:
`

func runReplay(args []string) error {
	var apiURL string
	var sd stateDirFlags
	fset := flag.NewFlagSet("replay", flag.ContinueOnError)
	var trust, trustStore string
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), replayUsage)
		fset.PrintDefaults()
	}
	fset.StringVar(&apiURL, "api-url", envOr("http://127.0.0.1:8080", "MEMFS_API_URL"), "the store service (env MEMFS_API_URL)")
	keyFlag := addKeyFlag(fset, "api-key", "an admin key of the store service", "MEMFS_API_KEY")
	var tlsFlags apiTLSFlags
	tlsFlags.add(fset)
	fset.StringVar(&trust, "trust-journal", "", "take up the refused journal at `PATH` (see above), then replay")
	fset.StringVar(&trustStore, "store", "", "with --trust-journal: the store `ID` of the journal (default: from PATH)")
	sd.add(fset)
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	stateDir, _, err := sd.dir()
	if err != nil {
		return err
	}
	if trustStore != "" && trust == "" {
		return usagef("--store goes with --trust-journal")
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
	if err := prepareStateDir(stateDir, log); err != nil {
		return err
	}
	if trust != "" {
		if err := trustJournal(stateDir, trust, trustStore); err != nil {
			return err
		}
	}
	return replayAll(api, stateDir, log)
}

// replayAll replays every store's journal in stateDir with api's key, one
// line per store, and says what is left (see stopError).
func replayAll(api *client.Client, stateDir string, log logrus.FieldLogger) error {
	stores := worker.ReplayableStores(stateDir)
	if len(stores) == 0 {
		fmt.Fprintf(os.Stderr, "nothing to replay in %s\n", stateDir)
		return nil
	}
	var left []syncqueue.Left
	failed := 0
	for _, id := range stores {
		res, l, err := worker.ReplayWithKey(context.Background(), api, stateDir, id, log.WithField("store", id))
		left = append(left, l)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (the journal is kept)\n", id, err)
			failed++
			continue
		}
		fmt.Printf("%s: %d uploaded, %d deleted, %s left\n", id, res.Uploaded, res.Deleted, l)
	}
	var failure error
	if failed > 0 {
		failure = fmt.Errorf("%d journal(s) could not be replayed", failed)
	}
	return stopError(left, false, "the next 'memfs replay --state-dir "+stateDir+"' (once the reason is gone)", failure)
}

// trustJournal takes up the journal at path for store (from path when
// ""): memfs replay --trust-journal.
func trustJournal(stateDir, path, store string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if store == "" {
		store = storeOfJournal(stateDir, abs)
		if store == "" {
			return usagef("--trust-journal %s is not in a journal directory of %s/stores: name its store with --store", path, stateDir)
		}
	}
	auth, err := syncqueue.JournalAuth(stateDir, store)
	if err != nil {
		return err
	}
	auth.AnySession = true
	n, err := journal.Adopt(abs, syncqueue.JournalDir(stateDir, store), journal.Options{Auth: auth})
	if err != nil {
		return err
	}
	fmt.Printf("%s: took up %d pending change(s) from %s (kept as %s%s)\n", store, n, path, path, journal.TrustedSuffix)
	return nil
}

// storeOfJournal is the store whose journal directory holds path
// (<state dir>/stores/<id>/...), "" when none does.
func storeOfJournal(stateDir, path string) string {
	sd, err := filepath.Abs(filepath.Join(stateDir, "stores"))
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(sd, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	id, _, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok {
		return ""
	}
	return id
}
