package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/memfs/memfs/store"
)

var storesGroup = &adminGroup{
	name: "stores",
	about: `Manages memory stores: each is a tree of memories (text files by path) that
sessions mount as a directory.`,
	verbs: []verb{
		{"create", "NAME [--description D] [--metadata K=V ...]", "create a store; prints its id", storesCreate},
		{"ls", "[--all]", "list stores", storesLs},
		{"get", "STORE", "show a store", storesGet},
		{"update", "STORE [--name N] [--description D] [--metadata K=V|K= ...]", "rename, describe or tag a store", storesUpdate},
		{"archive", "STORE", "make a store read-only for ever", storesArchive},
		{"rm", "STORE --yes", "delete a store with all its memories and versions", storesRm},
		{"revert", "STORE --session ID | --since TIME [--dry-run] [--force]", "undo a session's changes, or every change since a time", storesRevert},
	},
}

func init() {
	registerGroup(storesGroup, "manage memory stores (create, ls, get, update, archive, rm, revert)")
}

func storesCreate(a *admin, args []string) error {
	fs := a.flags("NAME [flags]", `
Creates a memory store and prints its id (the whole JSON object with --json),
so that scripts can capture it. NAME is 1 to 255 characters and need not be
unique; metadata is up to 16 KEY=VALUE pairs.

Examples:
  memfs stores create notes
  STORE=$(memfs stores create "team notes" --description "shared notes" --metadata team=infra)`)
	desc := fs.String("description", "", "a description (up to 1,024 characters)")
	var md metadataFlag
	fs.Var(&md, "metadata", "a KEY=VALUE metadata pair (repeatable)")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	in := store.CreateStoreInput{Name: pos[0], Description: *desc}
	if len(md) > 0 {
		in.Metadata = map[string]string{}
		for _, p := range md {
			in.Metadata[p.key] = p.value
		}
	}
	s, err := c.CreateStore(a.ctx, in)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	a.printf("%s\n", s.ID)
	return nil
}

func storesLs(a *admin, args []string) error {
	fs := a.flags("[flags]", `
Lists memory stores, newest first, following every page. Archived stores are
left out unless --all is given.

Examples:
  memfs stores ls
  memfs stores ls --all --json | jq -r '.[].id'`)
	all := fs.Bool("all", false, "include archived stores")
	if _, err := a.parse(args, 0, 0); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	stores, err := c.AllStores(a.ctx, store.ListStoresOptions{IncludeArchived: *all})
	if err != nil {
		return err
	}
	if a.json {
		if stores == nil {
			stores = []store.Store{}
		}
		return a.printJSON(stores)
	}
	if len(stores) == 0 {
		a.note("no memory stores yet; create one with: memfs stores create NAME")
		return nil
	}
	tw := a.table("ID", "NAME", "CREATED", "ARCHIVED")
	for _, s := range stores {
		archived := "-"
		if s.ArchivedAt != nil {
			archived = fmtTime(*s.ArchivedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, oneLine(s.Name), fmtTime(s.CreatedAt), archived)
	}
	return tw.Flush()
}

func storesGet(a *admin, args []string) error {
	a.flags("STORE [flags]", `
Shows a memory store: its name, description, metadata and timestamps.

Examples:
  memfs stores get memstore_01abc
  memfs stores get memstore_01abc --json`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := c.GetStore(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	a.printStore(s)
	return nil
}

// printStore writes a store as aligned "field: value" lines.
func (a *admin) printStore(s *store.Store) {
	tw := a.fields()
	fmt.Fprintf(tw, "id:\t%s\n", s.ID)
	fmt.Fprintf(tw, "name:\t%s\n", oneLine(s.Name))
	desc := oneLine(s.Description)
	if desc == "" {
		desc = "-"
	}
	fmt.Fprintf(tw, "description:\t%s\n", desc)
	keys := make([]string, 0, len(s.Metadata))
	for k := range s.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		label := ""
		if i == 0 {
			label = "metadata:"
		}
		fmt.Fprintf(tw, "%s\t%s=%s\n", label, oneLine(k), oneLine(s.Metadata[k]))
	}
	fmt.Fprintf(tw, "created:\t%s\n", fmtTime(s.CreatedAt))
	fmt.Fprintf(tw, "updated:\t%s\n", fmtTime(s.UpdatedAt))
	if s.ArchivedAt != nil {
		fmt.Fprintf(tw, "archived:\t%s (read-only)\n", fmtTime(*s.ArchivedAt))
	}
	tw.Flush()
}

func storesUpdate(a *admin, args []string) error {
	fs := a.flags("STORE [flags]", `
Changes a store's name, description or metadata. --metadata KEY=VALUE sets a
key and --metadata KEY= removes it; keys not named are left alone. An empty
--description "" clears the description.

Examples:
  memfs stores update memstore_01abc --name "team notes"
  memfs stores update memstore_01abc --metadata owner=alice --metadata draft=`)
	var md metadataFlag
	fs.Var(&md, "metadata", "KEY=VALUE sets a metadata key, KEY= removes it (repeatable)")
	name := fs.String("name", "", "the new name")
	desc := fs.String("description", "", "the new description (\"\" clears it)")
	pos, err := a.parse(args, 1, 1)
	if err != nil {
		return err
	}
	var in store.UpdateStoreInput
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name":
			in.Name = name
		case "description":
			in.Description = desc
		}
	})
	if len(md) > 0 {
		in.Metadata = map[string]*string{}
		for _, p := range md {
			if p.value == "" {
				in.Metadata[p.key] = nil
			} else {
				in.Metadata[p.key] = &p.value
			}
		}
	}
	if in.Name == nil && in.Description == nil && in.Metadata == nil {
		return usagef("nothing to change: give --name, --description or --metadata")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	s, err := c.UpdateStore(a.ctx, pos[0], in)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	a.printStore(s)
	return nil
}

func storesArchive(a *admin, args []string) error {
	a.flags("STORE [flags]", `
Archives a store. This is one-way: an archived store keeps its memories and
versions but refuses every write, and can't be attached to new sessions.

Examples:
  memfs stores archive memstore_01abc`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := c.ArchiveStore(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	a.printf("archived %s\n", s.ID)
	return nil
}

func storesRm(a *admin, args []string) error {
	fs := a.flags("STORE --yes [flags]", `
Deletes a store with all its memories and their version history. This can't
be undone, so it asks for --yes. (To keep the history but stop all writes,
archive the store instead.)

Examples:
  memfs stores rm memstore_01abc --yes`)
	yes := fs.Bool("yes", false, "really delete the store and everything in it")
	pos, err := a.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if !*yes {
		return usagef("deleting %s removes all its memories and versions for ever; add --yes to do it", pos[0])
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	d, err := c.DeleteStore(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(d)
	}
	a.printf("deleted %s\n", d.ID)
	return nil
}

// oneLine keeps a user-supplied string on one table line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}
