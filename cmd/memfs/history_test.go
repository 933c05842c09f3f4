package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// TestHistoryBadInput: each bad argument of the history commands is a
// clear error that writes nothing.
func TestHistoryBadInput(t *testing.T) {
	c := newCLI(t)
	st := strings.TrimSpace(c.ok("", "stores", "create", "notes"))
	c.ok("one\n", "memories", "put", st, "/a.md")
	c.ok("two\n", "memories", "put", st, "/a.md")
	for _, tc := range []struct {
		args  []string
		usage bool   // a usage error (exit 2)
		code  int    // else an exitError's code (0: any other error)
		kind  error  // else errors.Is this
		say   string // the message holds this
	}{
		{args: []string{"show", "--store", st, "/a.md"}, usage: true, say: "PATH@VERSION"},
		{args: []string{"show", "--store", st, "/a.md@yesterday"}, usage: true, say: "RFC 3339"},
		{args: []string{"show", "--store", st, "/nope.md@1h"}, kind: store.ErrNotFound, say: "deleted memory"},
		{args: []string{"show", "/not/on/a/mount.md@1h"}, usage: true, say: "not on a mounted memory store"},
		{args: []string{"restore", "--store", st, "/a.md"}, usage: true, say: "--to"},
		{args: []string{"restore", "--store", st, "/a.md", "--to", "memver_nope"}, kind: store.ErrNotFound},
		{args: []string{"restore", "--store", st, "/a.md", "--to", "1h", "--expect-sha", "00"}, kind: store.ErrPreconditionFailed, say: "changed since you looked"},
		{args: []string{"diff", "--store", st, "/a.md", "soon"}, usage: true, say: "duration ago"},
		{args: []string{"diff", "--store", st, "/a.md", "memver_nope"}, code: diffTrouble},
		{args: []string{"diff", "--store", st, "/a.md", "1h", "2h", "3h"}, usage: true, say: "unexpected argument"},
		{args: []string{"stores", "revert", st}, usage: true, say: "--session ID or --since TIME"},
		{args: []string{"stores", "revert", st, "--session", "sesn_1", "--since", "1h"}, usage: true, say: "one of"},
		{args: []string{"stores", "revert", st, "--since", "1h", "--force"}, usage: true, say: "--force goes with --session"},
		{args: []string{"stores", "revert", st, "--since", "tomorrow"}, usage: true, say: "--since"},
	} {
		_, _, err := c.run("", tc.args...)
		var ue usageError
		var ee exitError
		switch {
		case err == nil:
			t.Errorf("memfs %s: no error", strings.Join(tc.args, " "))
			continue
		case tc.usage && !errors.As(err, &ue):
			t.Errorf("memfs %s: %v, want a usage error", strings.Join(tc.args, " "), err)
		case tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code):
			t.Errorf("memfs %s: %v, want exit %d", strings.Join(tc.args, " "), err, tc.code)
		case tc.kind != nil && !errors.Is(err, tc.kind):
			t.Errorf("memfs %s: %v, want %v", strings.Join(tc.args, " "), err, tc.kind)
		}
		if !strings.Contains(err.Error(), tc.say) {
			t.Errorf("memfs %s: %q does not say %q", strings.Join(tc.args, " "), err, tc.say)
		}
	}
	// Nothing was written: the memory has its two versions.
	if rows := lines(c.ok("", "versions", "ls", st)); len(rows) != 3 {
		t.Errorf("the bad commands wrote versions:\n%v", rows)
	}
}

func TestMountAtFlag(t *testing.T) {
	base := []string{"--api-key", "sk-x", "--store", "memstore_1", "/mnt/x"}
	a, err := parseMountArgs(append([]string{"--at", "2h"}, base...))
	if err != nil || a.at.IsZero() || !a.readOnly {
		t.Errorf("--at 2h: %+v, %v; want a time and read-only", a.at, err)
	}
	for _, bad := range []string{"yesterday", "2999-01-01T00:00:00Z"} {
		if _, err := parseMountArgs(append([]string{"--at", bad}, base...)); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "--at") {
			t.Errorf("--at %s: %v, want a usage error", bad, err)
		}
	}
}

// TestOnMountOutermostMarker: the store of a file on a mount is named by
// the marker at the mount's root; a memory named like the marker deeper
// down (an agent can write one, naming another store) is not a root.
func TestOnMountOutermostMarker(t *testing.T) {
	root := t.TempDir()
	mnt := filepath.Join(root, "mnt", "notes")
	write := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(mnt, fs.MarkerName), string(fs.MarkerContent("memstore_real")))
	write(filepath.Join(mnt, "sub", fs.MarkerName), string(fs.MarkerContent("memstore_other")))
	write(filepath.Join(mnt, "sub", "deep", "a.md"), "a")
	write(filepath.Join(mnt, "bad", fs.MarkerName), "not a marker")
	for _, c := range []struct{ file, store, path string }{
		{filepath.Join(mnt, "sub", "deep", "a.md"), "memstore_real", "/sub/deep/a.md"},
		{filepath.Join(mnt, "bad", "x.md"), "memstore_real", "/bad/x.md"},
		{filepath.Join(mnt, "top.md"), "memstore_real", "/top.md"},
	} {
		st, p, err := onMount(c.file)
		if err != nil || st != c.store || p != c.path {
			t.Errorf("onMount(%s) = %s, %s, %v; want %s, %s", c.file, st, p, err, c.store, c.path)
		}
	}
	if _, _, err := onMount(filepath.Join(root, "elsewhere.md")); !errors.As(err, new(usageError)) {
		t.Errorf("a file on no mount: %v, want a usage error", err)
	}
}

// TestStoresRevertInProcess runs a revert (many memories: its lookups run
// in parallel) in this process, where -race sees it: a session's creates
// and edits, written into the database as the session.
func TestStoresRevertInProcess(t *testing.T) {
	c, db := newCLIWithDB(t)
	st := strings.TrimSpace(c.ok("", "stores", "create", "notes"))
	ctx := context.Background()
	sess := store.SessionActor("sesn_revert")
	for i := 0; i < 30; i++ {
		p := fmt.Sprintf("/keep/%02d.md", i)
		m, err := db.CreateMemory(ctx, st, store.CreateMemoryInput{Path: p, Content: "before\n", Actor: store.APIActor("k")})
		if err != nil {
			t.Fatal(err)
		}
		edited := "injected\n"
		if _, err := db.UpdateMemory(ctx, st, m.ID, store.UpdateMemoryInput{Content: &edited, Actor: sess}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateMemory(ctx, st, store.CreateMemoryInput{Path: fmt.Sprintf("/new/%02d.md", i), Content: "new\n", Actor: sess}); err != nil {
			t.Fatal(err)
		}
	}
	c.ok("", "stores", "revert", st, "--session", "sesn_revert")
	var ms []store.Memory
	c.jsonOut(&ms, "memories", "ls", st)
	if len(ms) != 30 {
		t.Fatalf("after the revert the store holds %d memories, want the 30 kept", len(ms))
	}
	for _, m := range ms {
		if got := c.ok("", "memories", "cat", st, m.Path); got != "before\n" {
			t.Errorf("%s holds %q after the revert", m.Path, got)
		}
	}
}
