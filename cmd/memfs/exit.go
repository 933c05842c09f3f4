package main

import (
	"fmt"
	"strings"

	"github.com/memfs/memfs/syncqueue"
)

// Exit statuses. They are the same for every command and documented in
// docs/operating.md ("Stopping and exit status") and in the --help of the commands that stop
// with changes in hand (mount, session, worker, up, replay), so scripts,
// systemd units and container runtimes can tell the outcomes apart:
//
//	0  done; for a command that syncs: everything closed on its mounts
//	   reached the store (or, where the store won, the conflict log)
//	1  an error (stderr says what)
//	2  a usage error: a bad flag or argument, or a state dir owned by
//	   another user (statedir.ForeignError), nothing was done
//	3  stopped, but changes are left in the journal: the final sync was cut
//	   short by a second signal, the store was unreachable at the end, or a
//	   change waits for a reason (content not UTF-8, the store's memory
//	   cap, a path conflict, refused by the store; a worker's stop leaves
//	   deletes). Nothing is lost: the next mount of the store with the same
//	   state dir, the worker, or memfs replay uploads them.
//
// 3 is computed from what the engines left when they closed
// (syncqueue.Left), never from how the stop began: a second signal that
// only cut short the wait for a busy mount leaves nothing and exits 0.
const exitLeft = 3

// exitError ends a command with its own exit status; its message goes to
// stderr like any error's.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// stopError is how a command that synced ends, from what its engines
// left: nil when nothing is left; an exitLeft error naming each store's
// leftovers and what uploads them (replayedBy) otherwise. err, what else
// went wrong while stopping, wins (exit 1) and carries the leftovers in
// its message; so do files that never reached the journal, since their
// changes are lost, not left. cut says a second signal cut the stop short,
// which explains leftovers but decides nothing.
func stopError(left []syncqueue.Left, cut bool, replayedBy string, err error) error {
	var stores []string
	lost, why := 0, map[string]int{}
	for _, l := range left {
		if l.Changes > 0 {
			stores = append(stores, fmt.Sprintf("%s: %s", l.StoreID, syncqueue.Left{Changes: l.Changes, Deletes: l.Deletes, Reasons: l.Reasons}))
		}
		lost += l.Unjournaled
		for r, n := range l.UnjournaledReasons {
			why[r] += n
		}
	}
	var msgs []string
	if lost > 0 {
		msgs = append(msgs, fmt.Sprintf("%d closed file(s) never reached the journal%s: their last changes are lost", lost, syncqueue.UnjournaledWhy(why)))
	}
	if len(stores) > 0 {
		msgs = append(msgs, "changes are left in the journal ("+strings.Join(stores, "; ")+"): "+replayedBy+" uploads them; memfs status lists them")
	}
	if len(msgs) > 0 && cut {
		msgs = append([]string{"the final sync was cut short by a second signal"}, msgs...)
	}
	msg := strings.Join(msgs, "; ")
	switch {
	case err != nil && msg != "":
		return fmt.Errorf("%w; %s", err, msg)
	case err != nil:
		return err
	case lost > 0:
		return fmt.Errorf("%s", msg)
	case msg != "":
		return exitError{code: exitLeft, msg: msg}
	}
	return nil
}
