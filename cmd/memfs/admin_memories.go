package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

var memoriesGroup = &adminGroup{
	name: "memories",
	about: `Reads and writes the memories of a store. A memory is addressed by its path
(/notes/today.md); where a verb says PATH|ID, its id (mem_...) works too.`,
	verbs: []verb{
		{"ls", "STORE [--prefix /dir/] [--depth N]", "list memories", memoriesLs},
		{"cat", "STORE PATH|ID", "print a memory's content", memoriesCat},
		{"put", "STORE PATH [FILE|-]", "create or update a memory from a file or stdin", memoriesPut},
		{"rm", "STORE PATH|ID", "delete a memory (its versions stay)", memoriesRm},
		{"mv", "STORE FROM TO", "move (rename) a memory; it keeps its id", memoriesMv},
	},
}

func init() {
	registerGroup(memoriesGroup, "read and write memories (ls, cat, put, rm, mv)")
}

// resolveMemory finds the memory an argument names: a path (it starts with
// "/") or an id. The memory has no content (basic view) when found by path.
func resolveMemory(a *admin, c *client.Client, storeID, arg string) (*store.Memory, error) {
	if strings.HasPrefix(arg, "/") {
		return c.MemoryByPath(a.ctx, storeID, arg)
	}
	return c.GetMemory(a.ctx, storeID, arg)
}

func memoriesLs(a *admin, args []string) error {
	fs := a.flags("STORE [flags]", `
Lists the memories of a store in path order, following every page: path,
size in bytes, last update and id. --prefix lists one directory's subtree;
--depth 1 lists only its direct children, showing each deeper directory
once (its path ends in /).

Examples:
  memfs memories ls memstore_01abc
  memfs memories ls memstore_01abc --prefix /projects/ --depth 1
  memfs memories ls memstore_01abc --json | jq -r '.[].path'`)
	prefix := fs.String("prefix", "", "list only memories below this directory (e.g. /notes/)")
	depth := fs.Int("depth", 0, "0: the whole subtree; 1: direct children only, deeper directories rolled up")
	pos, err := a.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *depth < 0 {
		return usagef("--depth must be 0 or more")
	}
	p := *prefix
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	if p != "" && !strings.HasPrefix(p, "/") {
		return usagef("--prefix must begin with /, e.g. /notes/")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	items, err := c.AllMemoryItems(a.ctx, pos[0], store.ListMemoriesOptions{PathPrefix: p, Depth: *depth})
	if err != nil {
		return err
	}
	if a.json {
		if items == nil {
			items = []store.MemoryListItem{}
		}
		return a.printJSON(items)
	}
	if len(items) == 0 {
		if p == "" {
			a.note("no memories in %s yet; add one with: memfs memories put %s /notes.md FILE", pos[0], pos[0])
		} else {
			a.note("no memories below %s", p)
		}
		return nil
	}
	tw := a.table("PATH", "SIZE", "UPDATED", "ID")
	for _, it := range items {
		if it.Memory == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\n", oneLine(it.Prefix))
			continue
		}
		m := it.Memory
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", oneLine(m.Path), m.ContentSizeBytes, fmtTime(m.UpdatedAt), m.ID)
	}
	return tw.Flush()
}

func memoriesCat(a *admin, args []string) error {
	a.flags("STORE PATH|ID [flags]", `
Prints a memory's content exactly as stored (no newline is added). With
--json, prints the memory object, content included.

Examples:
  memfs memories cat memstore_01abc /notes/today.md
  memfs memories cat memstore_01abc mem_01xyz --json`)
	pos, c, err := a.parseClient(args, 2, 2)
	if err != nil {
		return err
	}
	m, err := resolveMemory(a, c, pos[0], pos[1])
	if err != nil {
		return err
	}
	if m.Content == nil {
		if m, err = c.GetMemory(a.ctx, pos[0], m.ID); err != nil {
			return err
		}
	}
	if a.json {
		return a.printJSON(m)
	}
	if m.Content != nil {
		_, err = io.WriteString(a.io.stdout, *m.Content)
	}
	return err
}

// readContent reads a memory's new content from a file, or stdin for ""
// or "-", refusing what the server would refuse anyway with a clearer
// message.
func readContent(a *admin, name string) (string, error) {
	r, label := a.io.stdin, "stdin"
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r, label = f, name
	}
	b, err := io.ReadAll(io.LimitReader(r, store.MaxContentBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", label, err)
	}
	if len(b) > store.MaxContentBytes {
		return "", fmt.Errorf("%s is over %d bytes, the most a memory holds", label, store.MaxContentBytes)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s is not valid UTF-8 text; memories hold text", label)
	}
	return string(b), nil
}

func memoriesPut(a *admin, args []string) error {
	a.flags("STORE PATH [FILE|-] [flags]", `
Writes a memory at PATH with the content of FILE, or of stdin when FILE is -
or missing: creates it if the path is free, else updates it — but only if
nobody changed it since this command looked (a content_sha256 precondition).
Prints created, updated or unchanged with the memory's id.

Examples:
  memfs memories put memstore_01abc /notes/today.md today.md
  echo "remember the milk" | memfs memories put memstore_01abc /todo.md`)
	pos, err := a.parse(args, 2, 3)
	if err != nil {
		return err
	}
	storeID, path := pos[0], pos[1]
	if err := store.ValidatePath(path); err != nil {
		return usagef("%v", err)
	}
	file := ""
	if len(pos) == 3 {
		file = pos[2]
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	content, err := readContent(a, file)
	if err != nil {
		return err
	}
	var m *store.Memory
	verb := "created"
	old, err := c.MemoryByPath(a.ctx, storeID, path)
	switch {
	case errors.Is(err, store.ErrNotFound):
		m, err = c.CreateMemory(a.ctx, storeID, path, content)
	case err != nil:
		return err
	case old.ContentSHA256 == client.SHA256(content):
		m, verb = old, "unchanged"
	default:
		verb = "updated"
		m, err = c.UpdateMemory(a.ctx, storeID, old.ID, store.UpdateMemoryInput{Content: &content, ExpectedSHA256: &old.ContentSHA256})
	}
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(m)
	}
	a.printf("%s %s (%s, %d bytes)\n", verb, oneLine(m.Path), m.ID, m.ContentSizeBytes)
	return nil
}

func memoriesRm(a *admin, args []string) error {
	a.flags("STORE PATH|ID [flags]", `
Deletes a memory. Its version history stays (see memfs versions ls), so its
content can still be read there until redacted. The delete applies only if
the memory did not change since this command looked.

Examples:
  memfs memories rm memstore_01abc /notes/old.md`)
	pos, c, err := a.parseClient(args, 2, 2)
	if err != nil {
		return err
	}
	m, err := resolveMemory(a, c, pos[0], pos[1])
	if err != nil {
		return err
	}
	if err := c.DeleteMemory(a.ctx, pos[0], m.ID, &m.ContentSHA256); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(store.DeletedObject{ID: m.ID, Type: store.TypeMemoryDeleted})
	}
	a.printf("deleted %s (%s)\n", oneLine(m.Path), m.ID)
	return nil
}

func memoriesMv(a *admin, args []string) error {
	a.flags("STORE FROM TO [flags]", `
Moves a memory to a new path. It keeps its id and history; a taken TO is
refused (nothing is overwritten). FROM may be a path or an id.

Examples:
  memfs memories mv memstore_01abc /notes/today.md /archive/2026-07-22.md`)
	pos, err := a.parse(args, 3, 3)
	if err != nil {
		return err
	}
	to := pos[2]
	if err := store.ValidatePath(to); err != nil {
		return usagef("%v", err)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	old, err := resolveMemory(a, c, pos[0], pos[1])
	if err != nil {
		return err
	}
	m, err := c.UpdateMemory(a.ctx, pos[0], old.ID, store.UpdateMemoryInput{Path: &to})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(m)
	}
	a.printf("moved %s -> %s (%s)\n", oneLine(old.Path), oneLine(m.Path), m.ID)
	return nil
}
