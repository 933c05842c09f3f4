package main

import (
	"fmt"
	"time"

	"github.com/memfs/memfs/history"
)

func storesRevert(a *admin, args []string) error {
	fs := a.flags("STORE --session ID | --since TIME [flags]", `
Undoes one session's changes to a store (--session), or every change made
after a time (--since: RFC 3339, or a duration ago such as 2h). Each memory
the changes touched goes back to what it was just before the first of them:
a memory they created is deleted, one they deleted is created again at its
path then (under a new id), one they moved is moved back, one they edited
gets its content back. The result is ordinary new versions made by this
key: nothing is rewritten, and memfs log shows the revert.

With --session, a memory someone else changed after the session's first
change to it is reported and left alone (undoing the session would undo
their change too); --force reverts it anyway. A memory whose earlier
version is redacted, or whose earlier path is taken by another memory now,
is reported and left alone. Every write has the memory's newest sha256 as
its precondition: a change made while this runs is refused, not lost.

--dry-run prints the plan as a table and writes nothing. Exit status: 0
done (or nothing to do), 1 a step failed or was left alone (the table says
which and why), 2 a usage error.

Examples:
  memfs stores revert memstore_01abc --session sesn_01xyz --dry-run
  memfs stores revert memstore_01abc --session sesn_01xyz
  memfs stores revert memstore_01abc --since 2h --dry-run`)
	session := fs.String("session", "", "undo the changes this session made (sesn_...)")
	since := fs.String("since", "", "undo every change made after this time (RFC 3339, or a duration ago: 2h, 3d)")
	dry := fs.Bool("dry-run", false, "print the plan; write nothing")
	force := fs.Bool("force", false, "with --session: revert memories someone else changed since, too")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	var scope history.Scope
	switch {
	case (*session == "") == (*since == ""):
		return usagef("give one of --session ID or --since TIME")
	case *session != "":
		scope.SessionID = *session
	default:
		if scope.Since, err = history.ParseTime(*since, time.Now()); err != nil {
			return usagef("--since: %v", err)
		}
	}
	if *force && *session == "" {
		return usagef("--force goes with --session: --since reverts every change after the time, whoever made it")
	}
	plan, err := history.PlanRevert(a.ctx, c, pos[0], scope, *force)
	if err != nil {
		return err
	}
	var applyErr error
	if !*dry {
		applyErr = history.Apply(a.ctx, c, pos[0], &plan)
	}
	if a.json {
		if err := a.printJSON(plan.Steps); err != nil {
			return err
		}
	} else if err := a.printPlan(plan, *dry); err != nil {
		return err
	}
	skipped := 0
	for _, s := range plan.Steps {
		if s.Skip != "" {
			skipped++
		}
	}
	switch {
	case applyErr != nil:
		return applyErr
	case skipped > 0 && !*dry:
		return fmt.Errorf("%d of the memories were left alone (see the table)", skipped)
	}
	return nil
}

// printPlan prints a revert's steps as a table (what is done, or would be,
// and why a step is left alone).
func (a *admin) printPlan(plan history.Plan, dry bool) error {
	if len(plan.Steps) == 0 {
		a.note("nothing to revert: %s changed nothing in this store", plan.Scope)
		return nil
	}
	head := "RESULT"
	if dry {
		head = "PLAN"
	}
	tw := a.table("MEMORY", "ACTION", "PATH NOW", "BACK TO", "BY", head)
	for _, s := range plan.Steps {
		now, to := dash(s.Path), dash(s.To)
		if s.Back != nil {
			to += " (" + s.Back.ID + ")"
		}
		res := s.Result
		switch {
		case s.Skip != "":
			res = "left alone: " + s.Skip
		case s.Action == history.ActNone:
			res = "nothing to do: as it was"
		case dry && s.Forced:
			res = "would be done (--force: a later change is overwritten)"
		case dry:
			res = "would be done"
		case s.NewMemoryID != "":
			res += " (now " + s.NewMemoryID + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.MemoryID, s.Action, oneLine(now), oneLine(to), s.Head.CreatedBy.String(), res)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
