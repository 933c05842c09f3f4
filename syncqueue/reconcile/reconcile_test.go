package reconcile

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// The fixtures: memory m1 at /a.md, its local copy mem_1.
const (
	mem   = "mem_1"
	file  = "mem_1"
	other = "local-2"
	path  = "/a.md"
	base  = "sha-base"
	newer = "sha-new"
	mine  = "sha-mine"
)

type tcase struct {
	name string // starts with the row of docs/sync.md it tries
	feed bool   // decided by DecideFeed
	in   Input
	want []Action
}

// copyOf is memory mem's local copy, agreed on at (path, base), with the
// pending entry p (nil: none).
func copyOf(p *Entry) Input {
	return Input{MemoryID: mem, FileID: file, Local: p, Base: &State{Path: path, SHA: base}}
}

func remote(in Input, path, sha string) Input {
	in.Remote = &State{Path: path, SHA: sha}
	return in
}

func change(fileID, path, sha, origin, baseSHA string, lsn uint64) *Entry {
	return &Entry{FileID: fileID, LSN: lsn, Path: path, SHA: sha, Origin: origin, BaseSHA: baseSHA}
}

func deleted(fileID, path, origin, baseSHA string, lsn uint64) *Entry {
	return &Entry{FileID: fileID, LSN: lsn, Path: path, Deleted: true, Origin: origin, BaseSHA: baseSHA}
}

func at(fileID string, p *Entry) Occupant {
	return Occupant{What: File, FileID: fileID, Found: p, Committed: true, Pending: p}
}

func with(in Input, f func(*Input)) Input { f(&in); return in }

func newMemory(path, sha string) Input {
	return Input{MemoryID: mem, Remote: &State{Path: path, SHA: sha}}
}

var (
	room     = Action{Kind: RoomSeen}
	forgetM  = Action{Kind: Forget, MemoryID: mem}
	seenNew  = Action{Kind: Seen, MemoryID: mem, SHA: newer}
	created  = Action{Kind: SeenCreate, Path: path}
	agreeF   = Action{Kind: Agree, FileID: file}
	agreeO   = Action{Kind: Agree, FileID: other}
	applyF   = Action{Kind: Apply, FileID: file, Path: path}
	settleF  = Action{Kind: Confirm, FileID: file, LSN: 7, MemoryID: mem, SHA: newer, Path: path}
	settleO  = Action{Kind: Confirm, FileID: other, LSN: 9, MemoryID: mem, SHA: newer, Path: path}
	rebaseF  = Action{Kind: Rebase, FileID: file, MemoryID: mem, SHA: newer, Path: path, Reason: ErrRebaseChange}
	applyNew = Action{Kind: Apply, FileID: mem, Path: path}
)

var cases = []tcase{
	// A memory gone from the store.
	{name: "R1 gone, no local copy: nothing", in: Input{MemoryID: mem},
		want: []Action{room, {Kind: Skip}}},
	{name: "R24 a memory gone is a sign of room (R2)", in: copyOf(nil),
		want: []Action{room, forgetM, {Kind: Remove, FileID: file}}},
	{name: "R2 gone, nothing pending: the local file goes", in: copyOf(nil),
		want: []Action{room, forgetM, {Kind: Remove, FileID: file}}},
	{name: "R2 gone, read-only mount with a change: the local file goes",
		in:   with(copyOf(change(file, path, mine, mem, base, 7)), func(in *Input) { in.ReadOnly = true }),
		want: []Action{room, forgetM, {Kind: Remove, FileID: file}}},
	{name: "R3 gone, deleted here too: settle the delete", in: copyOf(deleted(file, path, mem, base, 7)),
		want: []Action{room, forgetM, {Kind: Confirm, FileID: file, LSN: 7, Path: path}}},
	{name: "R4 gone, changed here: rebased to no origin, one warning",
		in: copyOf(change(file, "/b.md", mine, mem, base, 7)),
		want: []Action{room, forgetM,
			{Kind: Rebase, FileID: file, Path: "/b.md", Reason: ErrRecreate, StopOnFail: true},
			{Kind: Warn, Path: "/b.md", Reason: WarnRecreate}}},
	{name: "R18 gone, open writes can't be journaled: wait (R24)",
		in:   with(copyOf(nil), func(in *Input) { in.CommitFailed = true }),
		want: []Action{room, {Kind: Fail, FileID: file}}},

	// A memory new to this mount.
	{name: "R5 new, nothing at its path: placed", in: newMemory(path, newer),
		want: []Action{created, applyNew, {Kind: SetBase, FileID: mem}, {Kind: Agree, FileID: mem}}},
	{name: "R5 new, a file with nothing pending at its path: placed",
		in:   with(newMemory(path, newer), func(in *Input) { in.At = at(other, nil) }),
		want: []Action{created, applyNew, {Kind: SetBase, FileID: mem}, {Kind: Agree, FileID: mem}}},
	{name: "R6 new, a directory at its path: skipped",
		in:   with(newMemory(path, newer), func(in *Input) { in.At = Occupant{What: Directory} }),
		want: []Action{created, {Kind: Warn, Path: path, Reason: WarnDirectory}}},
	{name: "R7 new, a local create with the same bytes: adopted",
		in:   with(newMemory(path, newer), func(in *Input) { in.At = at(other, change(other, path, newer, "", "", 9)) }),
		want: []Action{created, settleO, agreeO}},
	{name: "R8 new, our create changed since it was sent: rebased",
		in: with(newMemory(path, newer), func(in *Input) {
			in.SentCreate = newer
			in.At = at(other, change(other, path, mine, "", "", 9))
		}),
		want: []Action{created, {Kind: Rebase, FileID: other, MemoryID: mem, SHA: newer, Path: path, Reason: ErrRebaseChange}, agreeO}},
	{name: "R9 new, a local create with other bytes: store wins",
		in: with(newMemory(path, newer), func(in *Input) {
			in.SentCreate = "sha-other"
			in.At = at(other, change(other, path, mine, "", "", 9))
		}),
		want: []Action{created, {Kind: KeepConflict, FileID: other, Reason: ConflictCreated},
			{Kind: Apply, FileID: other, Path: path}, settleO, agreeO}},
	{name: "R9 new, a file at its path: its open writes journaled first",
		in:   with(newMemory(path, newer), func(in *Input) { in.At = at(other, nil); in.At.Committed = false }),
		want: []Action{created, {Kind: Commit, FileID: other}}},
	{name: "R14 new, another memory's moved file at its path: kept, settled, then R5",
		in: with(newMemory(path, newer), func(in *Input) {
			in.At = at(other, change(other, path, mine, "mem_2", "sha-2", 9))
		}),
		want: []Action{created, {Kind: KeepConflict, FileID: other, Reason: ConflictDisplaced},
			{Kind: Confirm, FileID: other, LSN: 9, Path: path},
			applyNew, {Kind: SetBase, FileID: mem}, {Kind: Agree, FileID: mem}}},

	// A memory this mount has a copy of.
	{name: "R10 our write back, the entry is what was sent: settled",
		in: with(remote(copyOf(change(file, path, newer, mem, base, 7)), path, newer),
			func(in *Input) { in.Sent = []string{newer} }),
		want: []Action{seenNew, settleF, agreeF}},
	{name: "R10 our write back, changed again since: rebased on it",
		in: with(remote(copyOf(change(file, path, mine, mem, base, 7)), path, newer),
			func(in *Input) { in.Sent = []string{"sha-x", newer} }),
		want: []Action{seenNew, rebaseF, agreeF}},
	{name: "R11 an atomic save folded into our update: both settled",
		in: with(remote(copyOf(deleted(file, path, mem, base, 7)), path, newer), func(in *Input) {
			in.Sent = []string{newer}
			in.At = at(other, change(other, path, newer, "", "", 9))
			in.At.Committed = false // R11 reads the file at the path as found
		}),
		want: []Action{seenNew, seenNew, {Kind: Confirm, FileID: file, LSN: 7, Path: path}, settleO, agreeO}},
	{name: "R12 deleted after our update was sent: the delete rebased on it",
		in: with(remote(copyOf(deleted(file, path, mem, base, 7)), path, newer),
			func(in *Input) { in.Sent = []string{newer} }),
		want: []Action{seenNew, seenNew, {Kind: Rebase, FileID: file, MemoryID: mem, SHA: newer, Path: path, Reason: ErrRebaseDelete}, agreeF}},
	{name: "R12 deleted, the store holds the base: nothing to rebase",
		in:   remote(copyOf(deleted(file, path, mem, base, 7)), path, base),
		want: []Action{{Kind: Seen, MemoryID: mem, SHA: base}, agreeF}},
	{name: "R13 unchanged, nothing pending: nothing", in: remote(copyOf(nil), path, base),
		want: []Action{{Kind: Skip}}},
	{name: "R13 unchanged, a change made against this state: it goes up as it is",
		in:   remote(copyOf(change(file, path, mine, mem, base, 7)), path, base),
		want: []Action{{Kind: Skip}}},
	{name: "R13 our write back, a re-create with no origin: the base moves on",
		in: with(remote(copyOf(change(file, path, mine, "", "", 7)), path, newer),
			func(in *Input) { in.Sent = []string{newer} }),
		want: []Action{seenNew, agreeF}},
	{name: "R14 another file with a change at the remote path: kept, settled, then R15",
		in: with(remote(copyOf(nil), "/b.md", newer),
			func(in *Input) { in.At = at(other, change(other, "/b.md", mine, "", "", 9)) }),
		want: []Action{{Kind: KeepConflict, FileID: other, Reason: ConflictDisplaced},
			{Kind: Confirm, FileID: other, LSN: 9, Path: "/b.md"},
			{Kind: Apply, FileID: file, Path: "/b.md"}, {Kind: SetBase, FileID: file}, agreeF}},
	{name: "R14 another file at the remote path with the remote bytes: settled, no conflict (R15)",
		in: with(remote(copyOf(nil), "/b.md", newer),
			func(in *Input) { in.At = at(other, change(other, "/b.md", newer, "", "", 9)) }),
		want: []Action{{Kind: Confirm, FileID: other, LSN: 9, Path: "/b.md"},
			{Kind: Apply, FileID: file, Path: "/b.md"}, {Kind: SetBase, FileID: file}, agreeF}},
	{name: "R14 another file at the remote path: its open writes journaled first",
		in: with(remote(copyOf(nil), "/b.md", newer),
			func(in *Input) { in.At = at(other, nil); in.At.Committed = false }),
		want: []Action{{Kind: Commit, FileID: other}}},
	{name: "R14 our write back, another file at its path: Seen, then its open writes journaled (R10)",
		in: with(remote(copyOf(change(file, path, mine, "mem_9", "sha-9", 7)), path, newer), func(in *Input) {
			in.Sent = []string{newer}
			in.Base = nil
			in.At = at(other, nil)
			in.At.Committed = false
		}),
		want: []Action{seenNew, {Kind: Commit, FileID: other}}},
	{name: "R15 changed in the store, nothing pending: the store's version",
		in:   remote(copyOf(nil), path, newer),
		want: []Action{applyF, {Kind: SetBase, FileID: file}, agreeF}},
	{name: "R16 changed in the store, deleted here: restored, one warning",
		in:   remote(copyOf(deleted(file, path, mem, base, 7)), path, newer),
		want: []Action{{Kind: Warn, Path: path, Reason: WarnRestored}, applyF, settleF, agreeF}},
	{name: "R17 changed the same on both sides: adopted",
		in:   remote(copyOf(change(file, path, newer, mem, base, 7)), path, newer),
		want: []Action{settleF, agreeF}},
	{name: "R18 changed on both sides: store wins",
		in:   remote(copyOf(change(file, path, mine, mem, base, 7)), path, newer),
		want: []Action{{Kind: KeepConflict, FileID: file, Reason: ConflictChanged}, applyF, settleF, agreeF}},
	{name: "R18 open writes can't be journaled: wait, settle nothing",
		in:   with(remote(copyOf(nil), path, newer), func(in *Input) { in.CommitFailed = true }),
		want: []Action{{Kind: Fail, FileID: file}}},

	// From the change feed, nothing fetched.
	{name: "R17 feed: the copy is pending with the feed's bytes: adopted", feed: true,
		in:   remote(copyOf(change(file, path, newer, mem, base, 7)), path, newer),
		want: []Action{settleF, agreeF, seenNew}},
	{name: "R17 feed: other bytes: fetched", feed: true,
		in:   remote(copyOf(change(file, path, mine, mem, base, 7)), path, newer),
		want: nil},
	{name: "R7 feed: a local create at the path with the feed's bytes: adopted", feed: true,
		in:   with(newMemory(path, newer), func(in *Input) { in.At = at(other, change(other, path, newer, "", "", 9)) }),
		want: []Action{settleO, agreeO, seenNew, created}},
	{name: "R7 feed: a file of another memory at the path: fetched", feed: true,
		in:   with(newMemory(path, newer), func(in *Input) { in.At = at(other, change(other, path, newer, "mem_2", "x", 9)) }),
		want: nil},
}

// failures runs every case against the tables rules and feed and returns
// the names of the cases that fail, with what went wrong. A table with a
// rule broken may panic on a case (a later rule relies on an earlier one
// to have taken it): that case fails.
func failures(rules, feed []Rule) map[string]string {
	failed := map[string]string{}
	for _, c := range cases {
		table := rules
		if c.feed {
			table = feed
		}
		if why := try(table, c); why != "" {
			failed[c.name] = why
		}
	}
	return failed
}

func try(table []Rule, c tcase) (why string) {
	defer func() {
		if r := recover(); r != nil {
			why = fmt.Sprint("panic: ", r)
		}
	}()
	got, ids := Evaluate(table, c.in)
	if !reflect.DeepEqual(got, c.want) {
		return fmt.Sprintf("rules %v\n got %s\nwant %s", ids, describe(got), describe(c.want))
	}
	return ""
}

func describe(acts []Action) string {
	var b strings.Builder
	for _, a := range acts {
		fmt.Fprintf(&b, "\n\t%s %+v", kindNames[a.Kind], a)
	}
	return b.String()
}

var kindNames = map[Kind]string{Skip: "Skip", RoomSeen: "RoomSeen", Fail: "Fail", Apply: "Apply", Remove: "Remove",
	Confirm: "Confirm", Rebase: "Rebase", KeepConflict: "KeepConflict", SetBase: "SetBase", Agree: "Agree",
	Forget: "Forget", Seen: "Seen", SeenCreate: "SeenCreate", Warn: "Warn", Commit: "Commit"}

func TestRules(t *testing.T) {
	for name, why := range failures(Rules, FeedRules) {
		t.Errorf("%s: %s", name, why)
	}
}

// TestEveryRowHasCases checks that each of R1–R18 has a case.
func TestEveryRowHasCases(t *testing.T) {
	for i := 1; i <= 18; i++ {
		id := "R" + itoa(i)
		found := false
		for _, c := range cases {
			found = found || strings.HasPrefix(c.name, id+" ")
		}
		if !found {
			t.Errorf("no case for %s", id)
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// cites reports whether a case's name cites the row id: it starts with
// it, or names it as a word ("(R24)").
func cites(name, id string) bool {
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if w == id {
			return true
		}
	}
	return false
}

// TestBreakEachRule breaks each rule of both tables twice — removed, and
// its actions replaced — and checks that a case citing the rule's row
// fails each time.
func TestBreakEachRule(t *testing.T) {
	caught, total := 0, 0
	for _, table := range []string{"Rules", "FeedRules"} {
		n := len(Rules)
		if table == "FeedRules" {
			n = len(FeedRules)
		}
		for i := 0; i < n; i++ {
			for _, how := range []string{"removed", "actions replaced"} {
				rules, feed := append([]Rule(nil), Rules...), append([]Rule(nil), FeedRules...)
				target := &rules
				if table == "FeedRules" {
					target = &feed
				}
				r := (*target)[i]
				if how == "removed" {
					*target = append((*target)[:i:i], (*target)[i+1:]...)
				} else {
					(*target)[i].Do = func(*Input) []Action { return []Action{{Kind: Warn, Reason: "broken"}} }
				}
				total++
				hit := false
				for name := range failures(rules, feed) {
					hit = hit || cites(name, r.ID)
				}
				if hit {
					caught++
				} else {
					t.Errorf("%s[%d] %s (%s) %s: no case citing %s fails", table, i, r.ID, r.Note, how, r.ID)
				}
			}
		}
	}
	t.Logf("%d rules (%d + %d), broken %d times, caught %d times", len(Rules)+len(FeedRules), len(Rules), len(FeedRules), total, caught)
}

// BenchmarkDecide measures one decision, over every case in turn.
func BenchmarkDecide(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c := cases[i%len(cases)]
		if c.feed {
			DecideFeed(c.in)
		} else {
			Decide(c.in)
		}
	}
}
