package main

import (
	"maps"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// everyCommand lists every command line that has a --help of its own:
// each command, each verb of each admin group, and conflicts' verbs.
func everyCommand() [][]string {
	var out [][]string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	}) {
		out = append(out, []string{name})
		if g, ok := groups[name]; ok {
			for _, v := range g.verbs {
				out = append(out, []string{name, v.name})
			}
		}
	}
	// The verbs of a nested group (memfs sessions events ls); the group
	// itself is a verb of its parent, listed above.
	for _, name := range slices.Sorted(maps.Keys(nestedGroups)) {
		for _, v := range nestedGroups[name].verbs {
			out = append(out, append(strings.Fields(name), v.name))
		}
	}
	return append(out, []string{"conflicts", "list"}, []string{"conflicts", "show"})
}

// TestHelpOnStdout: every command's help, asked for with --help, -h or
// memfs help, goes to stdout with exit status 0 (so `memfs serve --help |
// less` works) and nothing on stderr.
func TestHelpOnStdout(t *testing.T) {
	t.Parallel()
	cmds := everyCommand()
	if len(cmds) < 15 {
		t.Fatalf("only %d commands found: %v", len(cmds), cmds)
	}
	for _, args := range cmds {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var first string
			for _, form := range [][]string{append(slices.Clone(args), "--help"), append(slices.Clone(args), "-h"), append([]string{"help"}, args...)} {
				r := runMemfs(t, nil, form...)
				if r.code != 0 || r.stderr != "" {
					t.Errorf("memfs %s: exit %d, stderr %q; want 0 and nothing", strings.Join(form, " "), r.code, r.stderr)
				}
				if !strings.HasPrefix(r.stdout, "Usage: ") || !strings.Contains(r.stdout, "memfs "+name) {
					t.Errorf("memfs %s printed no usage of memfs %s on stdout:\n%s", strings.Join(form, " "), name, r.stdout)
				}
				if first == "" {
					first = r.stdout
				} else if r.stdout != first {
					t.Errorf("memfs %s printed another help than --help", strings.Join(form, " "))
				}
			}
		})
	}
	// The flags a command's help must describe.
	for cmd, flags := range map[string][]string{
		"status": {"-state-dir", "-json"},
		"mount":  {"-o value", "-mkdir", "-memory-sync-interval", "-store"},
		"up":     {"-memory-sync-interval", "-memory-sync-deletions", "-memory-sync-delete-delay", "-state-dir", "-log-format", "-log-level"},
	} {
		r := runMemfs(t, nil, cmd, "--help")
		for _, f := range flags {
			if !strings.Contains(r.stdout, "\n  "+f) {
				t.Errorf("memfs %s --help does not describe %s:\n%s", cmd, f, r.stdout)
			}
		}
	}
}

// TestTopLevelHelp: memfs --help, -h and help list every command on
// stdout (exit 0); memfs alone prints the list to stderr (exit 2).
func TestTopLevelHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runMemfs(t, nil, args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("memfs %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		for n := range commands {
			if !strings.Contains(r.stdout, "\n  "+n+" ") {
				t.Errorf("memfs %v does not list %s:\n%s", args, n, r.stdout)
			}
		}
	}
	r := runMemfs(t, nil)
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "Usage: memfs COMMAND") {
		t.Errorf("memfs alone: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"nosuch"}, {"help", "nosuch"}} {
		if r := runMemfs(t, nil, args...); r.code != 2 || !strings.Contains(r.stderr, `unknown command "nosuch"`) {
			t.Errorf("memfs %v: exit %d, stderr %q; want 2 naming the command", args, r.code, r.stderr)
		}
	}
}

// TestUsageErrorsOnce: a flag no command knows, or an argument a command
// takes none of, is reported once, on one line of stderr, with exit
// status 2 and nothing on stdout.
func TestUsageErrorsOnce(t *testing.T) {
	t.Parallel()
	for _, args := range everyCommand() {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runMemfs(t, nil, append(slices.Clone(args), "--no-such-flag")...)
			if r.code != 2 || r.stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", r.code, r.stdout)
			}
			if n := strings.Count(r.stderr, "no-such-flag"); n != 1 || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr names the flag %d times in %d lines, want once in one line:\n%s", n, strings.Count(r.stderr, "\n"), r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "memfs "+args[0]+": ") || !strings.Contains(r.stderr, "--help") {
				t.Errorf("stderr lacks the command or the hint to --help: %q", r.stderr)
			}
		})
	}
	for _, args := range [][]string{{"status", "extra"}, {"serve", "extra"}, {"replay", "extra"}, {"version", "extra"}, {"up", "extra"}} {
		r := runMemfs(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, `unexpected argument "extra"`) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("memfs %v: exit %d, stderr %q; want 2 and one line naming the argument", args, r.code, r.stderr)
		}
	}
	// An admin verb's error points at the verb's help.
	if r := runMemfs(t, nil, "stores", "ls", "--no-such-flag"); !strings.Contains(r.stderr, "see 'memfs stores ls --help'") {
		t.Errorf("memfs stores ls --no-such-flag: %q", r.stderr)
	}
}

// TestLogLevelError: a bad --log-level or --log-format names the flag,
// the value and what is accepted, in memfs's words (not logrus's).
func TestLogLevelError(t *testing.T) {
	t.Parallel()
	r := runMemfs(t, nil, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "verbose")
	want := `memfs serve: invalid --log-level "verbose": use one of debug, info, warn, error (see 'memfs serve --help')` + "\n"
	if r.code != 2 || r.stderr != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
	for _, tc := range []struct{ format, level, want string }{
		{"text", "verbose", `invalid --log-level "verbose": use one of debug, info, warn, error`},
		{"text", "trace", `invalid --log-level "trace": use one of debug, info, warn, error`},
		{"text", "", `invalid --log-level "": use one of debug, info, warn, error`},
		{"yaml", "info", `invalid --log-format "yaml": use text or json`},
	} {
		if _, err := newLogger(tc.format, tc.level); err == nil || err.Error() != tc.want {
			t.Errorf("newLogger(%q, %q) = %v, want %q", tc.format, tc.level, err, tc.want)
		}
	}
	for _, lv := range logLevels {
		if _, err := newLogger("json", lv); err != nil {
			t.Errorf("--log-level %s: %v", lv, err)
		}
	}
}

// TestVersion: memfs --version and memfs version print the same lines on
// stdout; a binary without VCS information (this test binary) says
// unknown rather than failing.
func TestVersion(t *testing.T) {
	t.Parallel()
	a, b := runMemfs(t, nil, "--version"), runMemfs(t, nil, "version")
	if a.code != 0 || b.code != 0 || a.stderr != "" || b.stderr != "" || a.stdout != b.stdout {
		t.Fatalf("--version: %d %q %q; version: %d %q %q", a.code, a.stdout, a.stderr, b.code, b.stdout, b.stderr)
	}
	re := regexp.MustCompile(`^memfs \S+\nrevision: (unknown|[0-9a-f]{40})\ntime: \S+\nmodified: (unknown|true|false)\n` +
		`go: ` + regexp.QuoteMeta(runtime.Version()) + `\nplatform: ` + runtime.GOOS + "/" + runtime.GOARCH + `\n$`)
	if !re.MatchString(a.stdout) {
		t.Errorf("memfs --version printed:\n%s", a.stdout)
	}
}

// TestVersionText: what each kind of build prints.
func TestVersionText(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/memfs/memfs", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	goRun := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/memfs/memfs", Version: "(devel)"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go build in a checkout", vcs, "memfs v1.4.0\nrevision: 0123456789abcdef0123456789abcdef01234567\ntime: 2026-01-02T03:04:05Z\nmodified: true\ngo: go1.26.0\nplatform: linux/arm64\n"},
		{"go run, no VCS", goRun, "memfs (devel)\nrevision: unknown\ntime: unknown\nmodified: unknown\ngo: go1.26.0\nplatform: linux/arm64\n"},
		{"no build info", nil, "memfs unknown\nrevision: unknown\ntime: unknown\nmodified: unknown\ngo: " + runtime.Version() + "\nplatform: linux/arm64\n"},
	} {
		if got := versionText(tc.bi, "linux/arm64"); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// TestSyncFlagsEverywhere: mount, worker, session and up take the same
// sync flags, and their help says the same about --memory-sync-interval
// off, which means what it says: run without memory (mount and up, which
// exist to mount a store, refuse it before anything starts).
func TestSyncFlagsEverywhere(t *testing.T) {
	t.Parallel()
	flagHelp := regexp.MustCompile(`(?m)^  -memory-sync-interval string\n((?:    \t.*\n)+)`)
	var first string
	for _, cmd := range []string{"mount", "worker", "session", "up"} {
		r := runMemfs(t, nil, cmd, "--help")
		for _, f := range []string{"-memory-sync-interval", "-memory-sync-deletions", "-memory-sync-delete-delay", "-state-dir", "-log-format", "-log-level"} {
			if !strings.Contains(r.stdout, "\n  "+f+" ") {
				t.Errorf("memfs %s --help does not describe %s", cmd, f)
			}
		}
		m := flagHelp.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Errorf("memfs %s --help: no -memory-sync-interval:\n%s", cmd, r.stdout)
			continue
		}
		if !strings.Contains(m[1], "off runs without memory") {
			t.Errorf("memfs %s --help does not say what off does:\n%s", cmd, m[1])
		}
		if first == "" {
			first = m[1]
		} else if m[1] != first {
			t.Errorf("memfs %s describes --memory-sync-interval otherwise:\n%s\nthan mount:\n%s", cmd, m[1], first)
		}
	}
	dataDir := t.TempDir()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"up", "--data-dir", dataDir, "--memory-sync-interval", "off"}, "off means running without memory"},
		{[]string{"up", "--data-dir", dataDir, "--memory-sync-interval", "4s"}, "at least 5s"},
		{[]string{"up", "--data-dir", dataDir, "--memory-sync-interval", "soon"}, `not "soon"`},
		{[]string{"up", "--data-dir", dataDir, "--memory-sync-deletions", "sometimes"}, `not "sometimes"`},
		{[]string{"up", "--data-dir", dataDir, "--log-level", "verbose"}, `invalid --log-level "verbose"`},
		{[]string{"mount", "--store", "memstore_1", "--api-key", "k", "--memory-sync-interval", "off", dataDir}, "off means running without memory"},
	} {
		r := runMemfs(t, nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("memfs %q: exit %d, stderr %q; want 2 saying %q", tc.args, r.code, r.stderr, tc.says)
		}
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		t.Errorf("refused runs of memfs up left %v in its data dir", entries)
	}
}
