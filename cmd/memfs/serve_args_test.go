package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runMemfsIn is runMemfs with dir as the working directory, where a
// relative --db would be created.
func runMemfsIn(t *testing.T, dir string, args ...string) result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Args = append([]string{"memfs"}, args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run memfs %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("memfs %v did not exit within a minute:\n%s%s", args, out.String(), errb.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// filesUnder lists what is under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel)
		}
		return nil
	})
	return got
}

// TestServeUnknownDBScheme: a --db that is neither a SQLite file nor a
// PostgreSQL URL is a usage error naming the accepted forms, and nothing
// is created: not a SQLite file named after it in the working directory,
// not a database or admin key in the data dir.
func TestServeUnknownDBScheme(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"mysql://x", "mysql:/x", "postgres:db", "file:"} {
		cwd, data := t.TempDir(), filepath.Join(t.TempDir(), "data")
		r := runMemfsIn(t, cwd, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--db", db)
		if r.code != 2 {
			t.Errorf("--db %s: exit %d, want 2; stderr %q", db, r.code, r.stderr)
		}
		for _, want := range []string{db, "file:PATH", "sqlite:PATH", "postgres://", "postgresql://", "nothing was created"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("--db %s: stderr does not say %q: %q", db, want, r.stderr)
			}
		}
		if got := filesUnder(t, cwd); len(got) != 0 {
			t.Errorf("--db %s created %v in the working directory", db, got)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--db %s: the data dir was created (%v)", db, err)
		}
	}
}

// TestServeSQLiteSchemes: sqlite:PATH and file:PATH are SQLite files at
// PATH (not at "sqlite:PATH"); checked with a port already taken, so
// the database is never opened, and with checkDB and sqlitePath.
func TestServeSQLiteSchemes(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite:/d/m.db", "file:/d/m.db", "sqlite:///d/m.db", "/d/m.db"} {
		if err := checkDB(db); err != nil {
			t.Errorf("checkDB(%q): %v", db, err)
		}
		if p := sqlitePath(db); p != "/d/m.db" {
			t.Errorf("sqlitePath(%q) = %q, want /d/m.db", db, p)
		}
	}
	if p := sqlitePath("postgres://h/db"); p != "" {
		t.Errorf("sqlitePath(postgres://h/db) = %q, want none", p)
	}
}

// TestServeMalformedListen: a --listen that is not HOST:PORT, or whose
// port is out of range, is a usage error (exit 2) giving the form, not a
// guess that another memfs serve runs; nothing is created. memfs up's
// --listen likewise.
func TestServeMalformedListen(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--listen", "nonsense"},
		{"serve", "--listen", "127.0.0.1:99999"},
		{"serve", "--listen", "127.0.0.1:-1"},
		{"serve", "--listen", "127.0.0.1:no-such-service"},
		{"up", "--listen", "nonsense"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		r := runMemfs(t, nil, append(args, "--data-dir", data)...)
		if r.code != 2 || !strings.Contains(r.stderr, "HOST:PORT") || !strings.Contains(r.stderr, args[2]) ||
			strings.Contains(r.stderr, "another memfs") {
			t.Errorf("memfs %v: exit %d, stderr %q; want 2 giving the form HOST:PORT and the value", args, r.code, r.stderr)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("memfs %v: the data dir was created (%v)", args, err)
		}
	}
}

// TestServeListenRefusedNotGuessed: an address that can't be bound for
// another reason than being in use (here: not an address of this host)
// exits 1 with the system's error and no guess about another memfs
// serve; one in use keeps the hint.
func TestServeListenRefusedNotGuessed(t *testing.T) {
	t.Parallel()
	r := runMemfs(t, nil, "serve", "--listen", "192.0.2.1:0", "--data-dir", filepath.Join(t.TempDir(), "data"))
	if r.code != 1 || !strings.Contains(r.stderr, "listen on 192.0.2.1:0") || strings.Contains(r.stderr, "another memfs") {
		t.Errorf("--listen 192.0.2.1:0: exit %d, stderr %q; want 1 with the error and no guess", r.code, r.stderr)
	}
	ln, err := listenFirst("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r = runMemfs(t, nil, "serve", "--listen", ln.Addr().String(), "--data-dir", filepath.Join(t.TempDir(), "data"))
	if r.code != 1 || !strings.Contains(r.stderr, "address already in use") || !strings.Contains(r.stderr, "another memfs serve") {
		t.Errorf("--listen taken: exit %d, stderr %q; want 1 with the hint", r.code, r.stderr)
	}
}

// TestServeConnFlags: the connection limits default from the open-file
// limit; one over what it allows, a negative one, or a timeout of 0 is a
// usage error that says why, before anything is created.
func TestServeConnFlags(t *testing.T) {
	t.Parallel()
	if lim, err := connLimits(1024, 0, 0); err != nil || lim.MaxOpen != 768 || lim.MaxUnauthenticated != 576 || lim.MaxPerAddress != 72 {
		t.Errorf("connLimits(1024, 0, 0) = %+v, %v", lim, err)
	}
	if lim, err := connLimits(1024, 400, 10); err != nil || lim.MaxOpen != 400 || lim.MaxUnauthenticated != 300 || lim.MaxPerAddress != 10 {
		t.Errorf("connLimits(1024, 400, 10) = %+v, %v", lim, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-connections", "100000000"}, "more than the open-file limit allows"},
		{[]string{"--max-connections", "-1"}, "must be 1 or more"},
		{[]string{"--max-connections", "100", "--max-connections-per-address", "80"}, "more than the 75 connections left"},
		{[]string{"--idle-timeout", "0s"}, "--idle-timeout and --read-timeout must be more than 0"},
		{[]string{"--read-timeout", "-1s"}, "--idle-timeout and --read-timeout must be more than 0"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		r := runMemfs(t, nil, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", data}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("memfs serve %v: exit %d, stderr %q; want 2 saying %q", c.args, r.code, r.stderr, c.want)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("memfs serve %v: the data dir was created (%v)", c.args, err)
		}
	}
}
