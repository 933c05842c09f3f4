package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server/servertest"
	"github.com/memfs/memfs/store/sqlstore"
)

const testAdminKey = servertest.AdminKey

// cli runs admin commands against a real memfs serve handler on SQLite.
type cli struct {
	t   *testing.T
	env map[string]string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	c, _ := newCLIWithDB(t)
	return c
}

// newCLIWithDB is newCLI with the server's database, for a test that
// writes what the API would not let it (as a session).
func newCLIWithDB(t *testing.T) (*cli, *sqlstore.DB) {
	t.Helper()
	srv := servertest.New(t)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &cli{t: t, env: map[string]string{"MEMFS_API_URL": ts.URL, "MEMFS_API_KEY": testAdminKey}}, srv.DB
}

var adminGroups = map[string]*adminGroup{"stores": storesGroup, "memories": memoriesGroup, "versions": versionsGroup}

// run runs `memfs ARGS...` with stdin and returns stdout, stderr and the error.
func (c *cli) run(stdin string, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	aio := adminIO{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return c.env[k] }}
	var err error
	if run, ok := historyCommands[args[0]]; ok {
		err = runHistory(context.Background(), aio, args[0], run, args[1:])
	} else {
		err = adminGroups[args[0]].run(context.Background(), aio, args[1:])
	}
	return out.String(), errb.String(), err
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run(stdin, args...)
	if err != nil {
		c.t.Fatalf("memfs %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func (c *cli) jsonOut(v any, args ...string) {
	c.t.Helper()
	out := c.ok("", append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("memfs %s --json printed %q: %v", strings.Join(args, " "), out, err)
	}
}

// lines splits output into rows of whitespace-separated fields.
func lines(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func TestStoresCommands(t *testing.T) {
	c := newCLI(t)
	id := strings.TrimSpace(c.ok("", "stores", "create", "team notes", "--description", "shared", "--metadata", "team=infra", "--metadata", "tier=1"))
	if !strings.HasPrefix(id, "memstore_") {
		t.Fatalf("stores create printed %q, want the id", id)
	}
	out := c.ok("", "stores", "ls")
	rows := lines(out)
	if len(rows) != 2 || strings.Join(rows[0], " ") != "ID NAME CREATED ARCHIVED" || rows[1][0] != id || rows[1][1] != "team" {
		t.Errorf("stores ls =\n%s", out)
	}

	// Flags after the positional argument; k= removes a key.
	c.ok("", "stores", "update", id, "--name", "renamed", "--metadata", "tier=", "--metadata", "owner=alice")
	var s store.Store
	c.jsonOut(&s, "stores", "get", id)
	if s.Name != "renamed" || s.Description != "shared" || len(s.Metadata) != 2 || s.Metadata["owner"] != "alice" || s.Metadata["team"] != "infra" {
		t.Errorf("store after update = %+v", s)
	}
	out = c.ok("", "stores", "get", id)
	for _, want := range []string{"name:        renamed", "metadata:    owner=alice", "team=infra"} {
		if !strings.Contains(out, want) {
			t.Errorf("stores get lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := c.run("", "stores", "update", id); !errors.As(err, new(usageError)) {
		t.Errorf("update with nothing to change: err = %v, want a usage error", err)
	}

	c.ok("", "stores", "archive", id)
	if out, errOut, _ := c.run("", "stores", "ls"); out != "" || !strings.Contains(errOut, "no memory stores") {
		t.Errorf("stores ls after archive: %q, %q", out, errOut)
	}
	var all []store.Store
	c.jsonOut(&all, "stores", "ls", "--all")
	if len(all) != 1 || all[0].ArchivedAt == nil {
		t.Errorf("stores ls --all = %+v", all)
	}
	_, _, err := c.run("", "memories", "put", id, "/x.md", "-")
	if !errors.Is(err, store.ErrForbidden) || !strings.Contains(err.Error(), "hint: ") {
		t.Errorf("write to an archived store: err = %v, want ErrForbidden with a hint", err)
	}

	if _, _, err := c.run("", "stores", "rm", id); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("rm without --yes: err = %v", err)
	}
	if out := c.ok("", "stores", "rm", "--yes", id); out != "deleted "+id+"\n" {
		t.Errorf("stores rm printed %q", out)
	}
	if _, _, err := c.run("", "stores", "get", id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get after rm: err = %v, want ErrNotFound", err)
	}
}

func TestMemoriesCommands(t *testing.T) {
	c := newCLI(t)
	st := strings.TrimSpace(c.ok("", "stores", "create", "notes"))

	if out := c.ok("line one\nline two", "memories", "put", st, "/notes/today.md"); !regexp.MustCompile(`^created /notes/today.md \(mem_\w+, 17 bytes\)\n$`).MatchString(out) {
		t.Errorf("put (create) printed %q", out)
	}
	if out := c.ok("line one\nline two", "memories", "put", st, "/notes/today.md", "-"); !strings.HasPrefix(out, "unchanged ") {
		t.Errorf("put (same content) printed %q", out)
	}
	file := filepath.Join(t.TempDir(), "new.md")
	if err := os.WriteFile(file, []byte("v2 ☃"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("", "memories", "put", st, "/notes/today.md", file); !strings.HasPrefix(out, "updated /notes/today.md") {
		t.Errorf("put (update) printed %q", out)
	}
	// Content exactly, no newline added; flags after positionals.
	if out := c.ok("", "memories", "cat", st, "/notes/today.md"); out != "v2 ☃" {
		t.Errorf("cat printed %q", out)
	}
	var m store.Memory
	c.jsonOut(&m, "memories", "cat", st, "/notes/today.md")
	if m.Content == nil || *m.Content != "v2 ☃" || !strings.HasPrefix(m.ID, "mem_") {
		t.Errorf("cat --json = %+v", m)
	}
	if out := c.ok("", "memories", "cat", st, m.ID); out != "v2 ☃" {
		t.Errorf("cat by id printed %q", out)
	}

	c.ok("deep", "memories", "put", st, "/notes/sub/deep.md")
	c.ok("top", "memories", "put", st, "/top.md")
	out := c.ok("", "memories", "ls", st)
	rows := lines(out)
	if len(rows) != 4 || strings.Join(rows[0], " ") != "PATH SIZE UPDATED ID" ||
		rows[1][0] != "/notes/sub/deep.md" || rows[1][1] != "4" || rows[2][0] != "/notes/today.md" || rows[3][0] != "/top.md" {
		t.Errorf("memories ls =\n%s", out)
	}
	out = c.ok("", "memories", "ls", st, "--prefix", "/notes", "--depth", "1")
	rows = lines(out)
	if len(rows) != 3 || rows[1][0] != "/notes/sub/" || rows[1][1] != "-" || rows[2][0] != "/notes/today.md" {
		t.Errorf("memories ls --depth 1 =\n%s", out)
	}
	var items []store.MemoryListItem
	c.jsonOut(&items, "memories", "ls", st, "--prefix", "/notes/", "--depth", "1")
	if len(items) != 2 || items[0].Prefix != "/notes/sub/" || items[1].Memory == nil {
		t.Errorf("memories ls --json = %+v", items)
	}

	if out := c.ok("", "memories", "mv", st, "/top.md", "/notes/top.md"); !strings.HasPrefix(out, "moved /top.md -> /notes/top.md (mem_") {
		t.Errorf("mv printed %q", out)
	}
	if _, _, err := c.run("", "memories", "mv", st, "/notes/top.md", "/notes/today.md"); !errors.Is(err, store.ErrPathConflict) {
		t.Errorf("mv onto a taken path: err = %v, want ErrPathConflict", err)
	}
	if out := c.ok("", "memories", "rm", st, "/notes/top.md"); !strings.HasPrefix(out, "deleted /notes/top.md") {
		t.Errorf("rm printed %q", out)
	}
	_, _, err := c.run("", "memories", "cat", st, "/notes/top.md")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `no memory at path "/notes/top.md"`) {
		t.Errorf("cat after rm: err = %v", err)
	}

	// Refused locally, with a clear message.
	if _, _, err := c.run(strings.Repeat("x", store.MaxContentBytes+1), "memories", "put", st, "/big.md"); err == nil || !strings.Contains(err.Error(), "over 102400 bytes") {
		t.Errorf("put of a too large file: err = %v", err)
	}
	if _, _, err := c.run("", "memories", "put", st, "notes.md"); !errors.As(err, new(usageError)) {
		t.Errorf("put to a relative path: err = %v, want a usage error", err)
	}
}

func TestVersionsCommands(t *testing.T) {
	c := newCLI(t)
	st := strings.TrimSpace(c.ok("", "stores", "create", "notes"))
	c.ok("first", "memories", "put", st, "/a.md")
	c.ok("second", "memories", "put", st, "/a.md")
	c.ok("other", "memories", "put", st, "/b.md")

	out := c.ok("", "versions", "ls", st, "--memory", "/a.md")
	rows := lines(out)
	if len(rows) != 3 || strings.Join(rows[0], " ") != "ID OPERATION PATH SIZE CREATED BY" ||
		rows[1][1] != "modified" || rows[1][3] != "6" || rows[2][1] != "created" || rows[2][2] != "/a.md" || !strings.HasPrefix(rows[2][5], "key:") {
		t.Fatalf("versions ls --memory =\n%s", out)
	}
	if rows := lines(c.ok("", "versions", "ls", st, "--limit", "1")); len(rows) != 2 || rows[1][2] != "/b.md" {
		t.Errorf("versions ls --limit 1 = %v", rows)
	}
	created := rows[2][0]

	out = c.ok("", "versions", "show", st, created)
	if !strings.HasSuffix(out, "\n\nfirst") || !strings.Contains(out, "operation: created") {
		t.Errorf("versions show =\n%s", out)
	}
	if out := c.ok("", "versions", "redact", st, created); out != "redacted "+created+"\n" {
		t.Errorf("redact printed %q", out)
	}
	var v store.Version
	c.jsonOut(&v, "versions", "show", st, created)
	if v.RedactedAt == nil || v.Content != nil || v.Path != nil {
		t.Errorf("redacted version = %+v", v)
	}
	if out := c.ok("", "versions", "show", st, created); !strings.Contains(out, "(redacted)") || strings.Contains(out, "first") {
		t.Errorf("show after redact =\n%s", out)
	}
	// The head of a live memory can't be redacted.
	if _, _, err := c.run("", "versions", "redact", st, rows[1][0]); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("redact the head: err = %v, want ErrInvalid", err)
	}
}

func TestAdminErrorsAndHints(t *testing.T) {
	c := newCLI(t)

	c.env["MEMFS_API_KEY"] = ""
	_, _, err := c.run("", "stores", "ls")
	if err == nil || !strings.Contains(err.Error(), "set MEMFS_API_KEY") || !strings.Contains(err.Error(), "admin.key") {
		t.Errorf("no key: err = %v", err)
	}
	_, _, err = c.run("", "stores", "ls", "--api-key", "wrong-key-0123456789")
	if !errors.Is(err, store.ErrUnauthorized) || !strings.Contains(err.Error(), "hint: the server refused the API key") {
		t.Errorf("bad key: err = %v", err)
	}

	c.env["MEMFS_API_KEY"] = testAdminKey
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, _, err = c.run("", "stores", "ls", "--api-url", dead)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "is memfs serve running at "+dead+"?") {
		t.Errorf("no server: err = %v", err)
	}
	_, _, err = c.run("", "stores", "ls", "--api-url", "localhost:8080")
	if !errors.As(err, new(usageError)) {
		t.Errorf("bad --api-url: err = %v, want a usage error", err)
	}
}

func TestAdminUsage(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"memories"}, "missing a verb"},
		{[]string{"memories", "touch"}, `unknown verb "touch"`},
		{[]string{"memories", "cat", "memstore_1"}, "usage: memfs memories cat STORE PATH|ID"},
		{[]string{"memories", "cat", "memstore_1", "/a", "/b"}, `unexpected argument "/b"`},
		{[]string{"versions", "ls", "memstore_1", "--limit", "x"}, "invalid value"},
	} {
		_, _, err := c.run("", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"memories", "--help"}, {"memories", "put", "--help"}, {"stores", "rm", "-h"}} {
		out, errOut, err := c.run("", args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "Usage: memfs "+args[0]) || errOut != "" {
			t.Errorf("%v: err = %v, want the help on stdout; stdout:\n%s\nstderr:\n%s", args, err, out, errOut)
		}
		if len(args) == 3 && (!strings.Contains(out, "Examples:") || !strings.Contains(out, "-api-key")) {
			t.Errorf("%v help lacks examples or global flags:\n%s", args, out)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		pos       string
		json      bool
		prefix    string
		wantError bool
	}{
		{[]string{"st", "/p", "--json"}, "st /p", true, "", false},
		{[]string{"--json", "st", "--prefix", "/d/", "/p"}, "st /p", true, "/d/", false},
		{[]string{"st", "-", "--prefix=/d/"}, "st -", false, "/d/", false},
		{[]string{"st", "--", "--json"}, "st --json", false, "", false},
		{[]string{"st", "--nope"}, "", false, "", true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		j := fs.Bool("json", false, "")
		p := fs.String("prefix", "", "")
		pos, err := parseInterleaved(fs, tc.args)
		if (err != nil) != tc.wantError {
			t.Errorf("%v: err = %v", tc.args, err)
			continue
		}
		if err == nil && (strings.Join(pos, " ") != tc.pos || *j != tc.json || *p != tc.prefix) {
			t.Errorf("%v: pos %q json %v prefix %q", tc.args, pos, *j, *p)
		}
	}
}

func TestAdminExitCodes(t *testing.T) {
	c := newCLI(t)
	t.Setenv("MEMFS_API_URL", c.env["MEMFS_API_URL"])
	t.Setenv("MEMFS_API_KEY", testAdminKey)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	saved := os.Stderr
	os.Stderr = devnull
	defer func() { os.Stderr = saved }()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"stores", "ls"}, 0},
		{[]string{"stores", "ls", "--help"}, 0},
		{[]string{"stores", "get", "memstore_missing"}, 1},
		{[]string{"stores", "get"}, 2},
		{[]string{"stores", "frobnicate"}, 2},
		{[]string{"versions", "ls", "memstore_1", "--limit", "many"}, 2},
	} {
		if got := run(tc.args); got != tc.want {
			t.Errorf("memfs %v exited %d, want %d", tc.args, got, tc.want)
		}
	}
}

// TestHealthcheckNotOffered: the healthcheck is a memfs extension; a
// server that refuses its route (405 here) gets its own message and a
// hint saying so.
func TestHealthcheckNotOffered(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusMethodNotAllowed)
		fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"Method Not Allowed"}}`)
	}))
	t.Cleanup(ts.Close)
	c := &cli{t: t, env: map[string]string{"MEMFS_API_URL": ts.URL, "MEMFS_API_KEY": testAdminKey}}
	var out, errb bytes.Buffer
	aio := adminIO{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return c.env[k] }}
	err := environmentsGroup.run(context.Background(), aio, []string{"healthcheck", "env_x"})
	if err == nil || !strings.Contains(err.Error(), "Method Not Allowed") || !strings.Contains(err.Error(), "hint: the healthcheck (POST /v1/environments/{id}/healthcheck) is a memfs serve extension") {
		t.Errorf("healthcheck refused 405: err = %v", err)
	}
}
