package syncqueue

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Left is what an engine's end left undone, read by Close just before it
// releases the journal: the engine's final state, whatever began the end
// (a signal, an unmount from outside, a session's end). The commands turn
// it into their exit status: 0 when it is empty, the "changes left in the
// journal" status otherwise (cmd/memfs, exit.go).
type Left struct {
	StoreID string `json:"store_id"`
	// Changes is how many changes the journal holds that the store does
	// not have (uploads, moves and deletes). The next mount of the store
	// with the same state dir, a worker's session of it, or memfs replay
	// uploads them.
	Changes int `json:"changes"`
	// Deletes is how many of Changes are deletes not sent (a worker's
	// stop sends writes only; a clean end sends at most its per-pass cap).
	Deletes int `json:"deletes"`
	// Reasons counts the other Changes, the uploads, by the reason each
	// waits, as memfs status names them (ReasonUnreachable, ReasonNotUTF8,
	// ReasonCap, ...; ReasonWaiting for one a final sync cut short never
	// tried).
	Reasons map[string]int `json:"reasons,omitempty"`
	// Unjournaled is how many files were closed while the journal could
	// not take them and never reached it: their last changes are lost
	// with the mount. They are not in Changes.
	Unjournaled int `json:"unjournaled"`
	// UnjournaledReasons counts them by the reason status gives
	// (ReasonNoSpace, "I/O error on the journal (EIO)", ...).
	UnjournaledReasons map[string]int `json:"unjournaled_reasons,omitempty"`
}

// Empty reports whether everything the mount was given reached the store
// (or, where the store won, the conflict log).
func (l Left) Empty() bool { return l.Changes == 0 && l.Unjournaled == 0 }

// String says what is left in one line: "3 changes (1 store unreachable,
// 1 content is not UTF-8, 1 delete not sent)", or "nothing".
func (l Left) String() string {
	var parts []string
	if l.Changes > 0 {
		s := plural(l.Changes, "change")
		var rs []string
		for _, r := range slices.Sorted(maps.Keys(l.Reasons)) {
			rs = append(rs, fmt.Sprintf("%d %s", l.Reasons[r], r))
		}
		if l.Deletes > 0 {
			rs = append(rs, plural(l.Deletes, "delete")+" not sent")
		}
		if len(rs) > 0 {
			s += " (" + strings.Join(rs, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if l.Unjournaled > 0 {
		parts = append(parts, plural(l.Unjournaled, "file")+" never journaled"+UnjournaledWhy(l.UnjournaledReasons))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// UnjournaledWhy is " (2 no space for the journal, 1 I/O error on the
// journal (EIO))" for reasons counted, "" for none.
func UnjournaledWhy(reasons map[string]int) string {
	if len(reasons) == 0 {
		return ""
	}
	var rs []string
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		rs = append(rs, fmt.Sprintf("%d %s", reasons[r], r))
	}
	return " (" + strings.Join(rs, ", ") + ")"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Left is what the engine left when it closed (zero before Close, and for
// a read-only store, which has nothing to leave).
func (e *Engine) Left() Left { return e.left }

// leftNow reads what is left from the journal and the tree, with the
// reasons status gives. The engine's goroutines must have stopped.
func (e *Engine) leftNow() Left {
	l := Left{StoreID: e.opts.StoreID}
	if e.journal == nil || e.tree == nil {
		return l
	}
	for _, c := range e.Status().Pending {
		if c.Op == OpNotUploaded {
			continue // kept locally, not in the journal: nothing is left of it
		}
		if c.Op == "unjournaled" {
			l.Unjournaled++
			if l.UnjournaledReasons == nil {
				l.UnjournaledReasons = map[string]int{}
			}
			l.UnjournaledReasons[c.Reason]++
			continue
		}
		l.Changes++
		if c.Op == "delete" {
			l.Deletes++
			continue
		}
		if l.Reasons == nil {
			l.Reasons = map[string]int{}
		}
		l.Reasons[c.Reason]++
	}
	return l
}
