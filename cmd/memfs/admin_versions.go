package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/memfs/memfs/store"
)

var versionsGroup = &adminGroup{
	name: "versions",
	about: `Reads a store's memory versions: every create, change and delete of a memory
is kept as an immutable version, newest first, until it is redacted.`,
	verbs: []verb{
		{"ls", "STORE [--memory PATH|ID] [--limit N]", "list versions, newest first", versionsLs},
		{"show", "STORE VERSION", "print a version's details and content", versionsShow},
		{"redact", "STORE VERSION", "wipe a version's content and path for ever", versionsRedact},
	},
}

func init() {
	registerGroup(versionsGroup, "read and redact memory versions (ls, show, redact)")
}

func versionsLs(a *admin, args []string) error {
	fs := a.flags("STORE [flags]", `
Lists memory versions, newest first: id, operation (created, modified,
deleted), path, size, time and who made it (key:ID or session:ID). --memory
keeps one memory's history; a path names a live memory (for a deleted one,
give its id).

Examples:
  memfs versions ls memstore_01abc
  memfs versions ls memstore_01abc --memory /notes/today.md --limit 100
  memfs versions ls memstore_01abc --operation deleted --json`)
	mem := fs.String("memory", "", "only this memory's versions: its path or id")
	op := fs.String("operation", "", "only this operation: created, modified or deleted")
	limit := fs.Int("limit", 20, "how many versions to list at most (0: all)")
	pos, err := a.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must be 0 or more")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	opts := store.ListVersionsOptions{Operation: *op, MemoryID: *mem}
	if strings.HasPrefix(*mem, "/") {
		m, err := c.MemoryByPath(a.ctx, pos[0], *mem)
		if err != nil {
			return fmt.Errorf("%w (for a deleted memory, give its id: see memfs versions ls %s --operation deleted)", err, pos[0])
		}
		opts.MemoryID = m.ID
	}
	if *limit > 0 && *limit < store.MaxListLimit {
		opts.Limit = *limit
	}
	versions := []store.Version{}
	for v, err := range c.Versions(a.ctx, pos[0], opts) {
		if err != nil {
			return err
		}
		versions = append(versions, v)
		if *limit > 0 && len(versions) == *limit {
			break
		}
	}
	if a.json {
		return a.printJSON(versions)
	}
	if len(versions) == 0 {
		a.note("no versions")
		return nil
	}
	tw := a.table("ID", "OPERATION", "PATH", "SIZE", "CREATED", "BY")
	for _, v := range versions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Operation, versionPath(&v), versionSize(&v),
			fmtTime(v.CreatedAt), v.CreatedBy.String())
	}
	return tw.Flush()
}

// versionPath is a version's path for display; redacted versions have none.
func versionPath(v *store.Version) string {
	switch {
	case v.Path != nil:
		return oneLine(*v.Path)
	case v.RedactedAt != nil:
		return "(redacted)"
	}
	return "-"
}

func versionSize(v *store.Version) string {
	if v.ContentSizeBytes == nil {
		return "-"
	}
	return fmt.Sprint(*v.ContentSizeBytes)
}

func versionsShow(a *admin, args []string) error {
	a.flags("STORE VERSION [flags]", `
Prints a version's details, then a blank line and its content exactly as it
was (nothing for a deleted or redacted version).

Examples:
  memfs versions show memstore_01abc memver_01xyz
  memfs versions show memstore_01abc memver_01xyz --json | jq -r .content`)
	pos, c, err := a.parseClient(args, 2, 2)
	if err != nil {
		return err
	}
	v, err := c.GetVersion(a.ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(v)
	}
	tw := a.fields()
	fmt.Fprintf(tw, "id:\t%s\n", v.ID)
	fmt.Fprintf(tw, "memory:\t%s\n", v.MemoryID)
	fmt.Fprintf(tw, "operation:\t%s\n", v.Operation)
	fmt.Fprintf(tw, "path:\t%s\n", versionPath(v))
	if v.ContentSHA256 != nil {
		fmt.Fprintf(tw, "sha256:\t%s\n", *v.ContentSHA256)
	}
	fmt.Fprintf(tw, "size:\t%s\n", versionSize(v))
	fmt.Fprintf(tw, "created:\t%s by %s\n", fmtTime(v.CreatedAt), v.CreatedBy.String())
	if v.RedactedAt != nil {
		fmt.Fprintf(tw, "redacted:\t%s by %s\n", fmtTime(*v.RedactedAt), v.RedactedBy.String())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Content != nil {
		a.printf("\n")
		_, err = io.WriteString(a.io.stdout, *v.Content)
	}
	return err
}

func versionsRedact(a *admin, args []string) error {
	a.flags("STORE VERSION [flags]", `
Redacts a version: its content, path and hash are wiped for ever (they read
back as null); the version itself stays in the history. The current version
of a live memory can't be redacted: change or delete the memory first.

Examples:
  memfs versions redact memstore_01abc memver_01xyz`)
	pos, c, err := a.parseClient(args, 2, 2)
	if err != nil {
		return err
	}
	v, err := c.RedactVersion(a.ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(v)
	}
	a.printf("redacted %s\n", v.ID)
	return nil
}
