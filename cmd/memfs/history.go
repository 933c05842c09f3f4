package main

// memfs log, show, diff and restore: one memory's history, from its path
// on a mounted store (or --store ID and its store path). The logic of the
// past is in package history; this file finds the memory, reads the
// versions named, and prints.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aymanbagabas/go-udiff"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/history"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// historyCommands are the top-level commands that run as admin verbs
// (their flags, key and errors as memfs versions's), by name.
var historyCommands = map[string]func(a *admin, args []string) error{
	"log":     historyLog,
	"show":    historyShow,
	"diff":    historyDiff,
	"restore": historyRestore,
}

func init() {
	summaries := map[string]string{
		"log":     "a memory's versions, newest first, from its path on a mount",
		"show":    "a memory's content at a version or a time (PATH@VERSION, PATH@TIME)",
		"diff":    "a unified diff of a memory between two versions or times",
		"restore": "write a memory's content at a version or a time back, as a new version",
	}
	for name, run := range historyCommands {
		register(name, summaries[name], func(args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runHistory(ctx, stdIO, name, run, args)
		})
	}
}

// runHistory runs one history command as an admin verb.
func runHistory(ctx context.Context, aio adminIO, name string, run func(a *admin, args []string) error, args []string) error {
	a := &admin{ctx: ctx, io: aio, cmd: name}
	return a.explain(run(a, args))
}

// target is the memory a history command is about.
type target struct {
	storeID string
	path    string        // its store path, as given or found
	memory  *store.Memory // nil when it is deleted (given by id)
	id      string
}

// historyFlags adds --store to a history command's flags.
func historyFlags(a *admin, usage, help string) *string {
	fs := a.flags(usage, help)
	return fs.String("store", "", "the store's id; PATH is then the memory's path in the store (/notes/a.md) or its id (mem_...), not a file on a mount")
}

const targetHelp = `PATH is a file on a mounted store (memfs mount, a worker's session; FUSE
or directory mode, --at too): the store is the one named by the
.anthropic-memory-store marker at the mount's root. With --store ID, PATH is
the memory's path in the store, or its id (mem_...: a deleted memory has no
path any more).`

// findTarget resolves PATH (and --store) to the memory.
func (a *admin) findTarget(c *client.Client, arg, storeID string) (target, error) {
	t := target{storeID: storeID}
	if storeID == "" {
		var err error
		if t.storeID, t.path, err = onMount(arg); err != nil {
			return t, err
		}
	} else if strings.HasPrefix(arg, store.PrefixMemory) {
		m, err := c.GetMemory(a.ctx, storeID, arg)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return target{storeID: storeID, id: arg}, nil // deleted: its versions remain
		case err != nil:
			return t, err
		}
		return target{storeID: storeID, path: m.Path, memory: m, id: m.ID}, nil
	} else {
		t.path = arg
	}
	m, err := c.MemoryByPath(a.ctx, t.storeID, t.path)
	if errors.Is(err, store.ErrNotFound) {
		return t, fmt.Errorf("%w (a deleted memory has no path: find its id with memfs versions ls %s --operation deleted, then give --store %s ID)", err, t.storeID, t.storeID)
	}
	if err != nil {
		return t, err
	}
	// The full view: the precondition of a restore, the "current" of a diff.
	if m, err = c.GetMemory(a.ctx, t.storeID, m.ID); err != nil {
		return t, err
	}
	t.memory, t.id = m, m.ID
	return t, nil
}

// onMount finds the store and the store path of a file on a mount: the
// folder above it holding the store's marker. The outermost such folder
// wins: a file named like the marker deeper down is a memory of the
// store (an agent can write one), never a mount's root, so it can't send
// the command to another store.
func onMount(p string) (storeID, memPath string, err error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", "", err
	}
	root := ""
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, fs.MarkerName)); err == nil {
			if id, ok := markerStore(b); ok {
				root, storeID = dir, id
			}
		}
		if dir == "/" {
			break
		}
	}
	if root == "" {
		return "", "", usagef("%s is not on a mounted memory store (no %s in a folder above it): give --store ID and the memory's path in the store", p, fs.MarkerName)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return "", "", err
	}
	return storeID, "/" + filepath.ToSlash(rel), nil
}

// markerStore reads the store id from a marker's content.
func markerStore(b []byte) (string, bool) {
	rest, ok := strings.CutPrefix(string(b), "version 1\n")
	id := strings.TrimSpace(rest)
	if !ok || !strings.HasPrefix(id, store.PrefixStore) || strings.ContainsAny(id, " \n/") {
		return "", false
	}
	if string(fs.MarkerContent(id)) != strings.TrimRight(string(b), "\n") {
		return "", false
	}
	return id, true
}

// versionOf reads the version ref names of memory t: a version id, or a
// time (its last version at or before it), with its content.
func (a *admin) versionOf(c *client.Client, t target, ref string) (*store.Version, error) {
	if strings.HasPrefix(ref, store.PrefixVersion) {
		v, err := c.GetVersion(a.ctx, t.storeID, ref)
		if err != nil {
			return nil, err
		}
		if v.MemoryID != t.id {
			return nil, usagef("%s is a version of memory %s, not of %s", ref, v.MemoryID, t.describe())
		}
		return v, nil
	}
	at, err := history.ParseTime(ref, time.Now())
	if err != nil {
		return nil, usagef("VERSION: %v, nor a version id (memver_...)", err)
	}
	return history.VersionAt(a.ctx, c, t.storeID, t.id, at)
}

func (t target) describe() string {
	if t.path != "" {
		return t.path
	}
	return t.id
}

func historyLog(a *admin, args []string) error {
	storeID := historyFlags(a, "PATH [flags]", `
Lists a memory's versions, newest first: the version id (what show, diff
and restore take as VERSION), when, the operation (created, modified,
deleted), who (key:ID for an API key, session:ID for a session's token),
its path then (a move shows the new path), size and sha256 (the first 12
hex digits; --json has all of it).

`+targetHelp+`

Examples:
  memfs log /mnt/memory/notes/today.md
  memfs log --store memstore_01abc /notes/today.md --json`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	t, err := a.findTarget(c, pos[0], *storeID)
	if err != nil {
		return err
	}
	vs, err := history.Log(a.ctx, c, t.storeID, t.id)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(vs)
	}
	tw := a.table("VERSION", "TIME", "OPERATION", "BY", "PATH", "SIZE", "SHA256")
	for _, v := range vs {
		sha := "-"
		if v.ContentSHA256 != nil {
			sha = (*v.ContentSHA256)[:min(12, len(*v.ContentSHA256))]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, fmtTime(v.CreatedAt), v.Operation, v.CreatedBy.String(),
			versionPath(&v), versionSize(&v), sha)
	}
	return tw.Flush()
}

// splitRef splits PATH@REF at its last '@'.
func splitRef(arg string) (string, string, bool) {
	i := strings.LastIndex(arg, "@")
	if i <= 0 || i == len(arg)-1 {
		return arg, "", false
	}
	return arg[:i], arg[i+1:], true
}

func historyShow(a *admin, args []string) error {
	storeID := historyFlags(a, "PATH@VERSION | PATH@TIME [flags]", `
Prints a memory's content exactly as it was at VERSION (a version id from
memfs log) or at TIME (an RFC 3339 time, or a duration ago such as 2h or
3d: its last version at or before then). A deleted or redacted version has
no content: that is an error.

`+targetHelp+`

Examples:
  memfs show /mnt/memory/notes/today.md@memver_01xyz
  memfs show /mnt/memory/notes/today.md@2h
  memfs show --store memstore_01abc /notes/today.md@2026-12-01T09:00:00Z`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	p, ref, ok := splitRef(pos[0])
	if !ok {
		return usagef("give PATH@VERSION or PATH@TIME (memfs log PATH lists the versions)")
	}
	t, err := a.findTarget(c, p, *storeID)
	if err != nil {
		return err
	}
	v, err := a.versionOf(c, t, ref)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(v)
	}
	if v.Content == nil {
		return noContent(v)
	}
	_, err = fmt.Fprint(a.io.stdout, *v.Content)
	return err
}

// noContent is the error for a version without content.
func noContent(v *store.Version) error {
	if v.Operation == store.OpDeleted {
		return fmt.Errorf("%s is the memory's deletion: it has no content", v.ID)
	}
	return fmt.Errorf("%s is redacted: its content is gone for ever", v.ID)
}

// diffExit ends memfs diff as diff(1) does: 1 when the contents differ
// (the diff is the output), 2 on trouble.
const (
	diffDiffer  = 1
	diffTrouble = 2
)

func historyDiff(a *admin, args []string) error {
	err := runDiff(a, args)
	var ee exitError
	switch {
	case err == nil, errors.As(err, &ee), errors.Is(err, flag.ErrHelp), errors.As(err, new(usageError)):
		return err // a usage error is 2 already
	}
	return exitError{code: diffTrouble, msg: a.explain(err).Error()}
}

func runDiff(a *admin, args []string) error {
	storeID := historyFlags(a, "PATH [FROM [TO]] [flags]", `
Prints a unified diff of a memory's content from FROM to TO: each a version
id (from memfs log) or a time (RFC 3339, or a duration ago such as 2h: the
last version at or before it). Without TO, TO is the store's current
content; without FROM too, FROM is the version before the current one.
A memory that did not exist yet, or was deleted, is empty on that side.
The exit status is diff(1)'s: 0 the same, 1 different, 2 trouble.

`+targetHelp+`

Examples:
  memfs diff /mnt/memory/notes/today.md
  memfs diff /mnt/memory/notes/today.md 1d
  memfs diff --store memstore_01abc /notes/today.md memver_01a memver_01b`)
	pos, c, err := a.parseClient(args, 1, 3)
	if err != nil {
		return err
	}
	t, err := a.findTarget(c, pos[0], *storeID)
	if err != nil {
		return err
	}
	var from, to *store.Version
	switch len(pos) {
	case 1:
		vs, err := history.Log(a.ctx, c, t.storeID, t.id)
		if err != nil {
			return err
		}
		if len(vs) > 1 {
			if from, err = c.GetVersion(a.ctx, t.storeID, vs[1].ID); err != nil {
				return err
			}
		}
	default:
		if from, err = a.sideOf(c, t, pos[1]); err != nil {
			return err
		}
	}
	if len(pos) == 3 {
		if to, err = a.sideOf(c, t, pos[2]); err != nil {
			return err
		}
	}
	fromLabel, fromText := side(t, from, "")
	toLabel, toText := side(t, to, "current")
	if to == nil {
		toText = ""
		if t.memory != nil && t.memory.Content != nil {
			toText = *t.memory.Content
		}
	}
	if fromText == toText {
		return nil
	}
	fmt.Fprint(a.io.stdout, udiff.Unified(fromLabel, toLabel, fromText, toText))
	return exitError{code: diffDiffer}
}

// sideOf is a side of a diff: the version ref names, or nil (empty) when
// the memory had none by then.
func (a *admin) sideOf(c *client.Client, t target, ref string) (*store.Version, error) {
	v, err := a.versionOf(c, t, ref)
	if errors.Is(err, store.ErrNotFound) && !strings.HasPrefix(ref, store.PrefixVersion) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if v.Content == nil && v.RedactedAt != nil {
		return nil, noContent(v)
	}
	return v, nil
}

// side is a diff side's label and text; the label names the version.
func side(t target, v *store.Version, none string) (string, string) {
	if v == nil {
		if none == "" {
			return t.describe() + " (none)", ""
		}
		return t.describe() + " (" + none + ")", ""
	}
	text := ""
	if v.Content != nil {
		text = *v.Content
	}
	return t.describe() + "@" + v.ID, text
}

func historyRestore(a *admin, args []string) error {
	storeID := historyFlags(a, "PATH --to VERSION|TIME [--expect-sha SHA] [flags]", `
Writes a memory's content as it was at VERSION (a version id from memfs
log) or TIME (RFC 3339, or a duration ago such as 2h) back into the store,
as a new version made by this key: nothing is rewritten, and memfs log
shows the restore as the newest version. The write has the memory's
current sha256 as its precondition: a change made meanwhile is refused,
not overwritten. --expect-sha SHA makes that sha the one you saw (in memfs
log --json, say), so a change made since you looked is refused too. A
deleted memory (given by id with --store) is created again at its path
then, under a new id. Mounts of the store show the restored content at
their next sync.

`+targetHelp+`

Examples:
  memfs restore /mnt/memory/notes/today.md --to memver_01xyz
  memfs restore /mnt/memory/notes/today.md --to 2h
  memfs restore --store memstore_01abc mem_01def --to 2026-12-01T09:00:00Z`)
	to := a.fs.String("to", "", "the version (memver_...) or time to go back to (required)")
	expect := a.fs.String("expect-sha", "", "refuse unless the memory's current sha256 is this one")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	if *to == "" {
		return usagef("--to VERSION|TIME is required (memfs log PATH lists the versions)")
	}
	t, err := a.findTarget(c, pos[0], *storeID)
	if err != nil {
		return err
	}
	if *expect != "" {
		if t.memory == nil {
			return fmt.Errorf("--expect-sha: memory %s is deleted: it has no sha now", t.id)
		}
		if t.memory.ContentSHA256 != *expect {
			return store.Errorf(store.ErrPreconditionFailed, "%s holds sha256 %s now, not %s: it changed since you looked", t.describe(), t.memory.ContentSHA256, *expect)
		}
	}
	back, err := a.versionOf(c, t, *to)
	if err != nil {
		return err
	}
	res, err := history.Restore(a.ctx, c, t.storeID, t.memory, back)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(res.Memory)
	}
	switch {
	case res.Unchanged:
		a.printf("unchanged %s: it holds %s's content already\n", t.describe(), back.ID)
	case res.Recreated:
		a.printf("recreated %s (%s) in %s with %s's content\n", res.Memory.Path, res.Memory.ID, t.storeID, back.ID)
	default:
		a.printf("restored %s in %s to %s's content (new version %s)\n", res.Memory.Path, t.storeID, back.ID, res.Memory.MemoryVersionID)
	}
	return nil
}
