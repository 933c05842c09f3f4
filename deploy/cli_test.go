package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// kitFiles are the deployment files (everything under deploy/ but Go).
func kitFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("found only %d kit files", len(files))
	}
	return files
}

// verbCommands are the memfs commands whose first argument is a verb with
// flags of its own (memfs environments create --help).
var verbCommands = []string{"conflicts", "environments", "memories", "sessions", "stores", "versions"}

// invocation is one memfs command line found in a kit file.
type invocation struct {
	where string   // file:line
	cmd   []string // "worker", or "environments", "create"
	flags []string // without the dashes
}

// shellStop ends a command line inside a line of text.
var shellStop = regexp.MustCompile(`^(>|>>|<|\||&&|;|\)|#)`)

// invocations finds every memfs command line in text: a word "memfs" (or
// a path ending in /memfs) followed by a command the binary lists, then
// its words up to a shell operator. Continued lines are joined; comment
// markers are dropped, so commands shown in comments are checked too.
// Prose ("memfs status, replay ...") names no command exactly and is
// skipped.
func invocations(file, text string, commands []string) []invocation {
	var out []invocation
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line, n := lines[i], i+1
		for strings.HasSuffix(strings.TrimSpace(line), "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(strings.TrimSpace(line), "\\") + " " + strings.TrimLeft(strings.TrimSpace(lines[i]), "#")
		}
		words := strings.Fields(strings.TrimLeft(strings.TrimSpace(line), "#;"))
		for w := 0; w < len(words); w++ {
			if words[w] != "memfs" && !strings.HasSuffix(words[w], "/memfs") || w+1 >= len(words) || !slices.Contains(commands, words[w+1]) {
				continue
			}
			inv := invocation{where: fmt.Sprintf("%s:%d", file, n), cmd: []string{words[w+1]}}
			rest := words[w+2:]
			if slices.Contains(verbCommands, inv.cmd[0]) && len(rest) > 0 {
				inv.cmd, rest = append(inv.cmd, rest[0]), rest[1:]
			}
			for _, a := range rest {
				if shellStop.MatchString(a) {
					break
				}
				if f, ok := strings.CutPrefix(a, "--"); ok {
					f, _, _ = strings.Cut(f, "=")
					inv.flags = append(inv.flags, f)
				}
			}
			out = append(out, inv)
		}
	}
	return out
}

// helpCache runs memfs ... --help once per command.
type helpCache struct {
	t   *testing.T
	bin string
	mu  sync.Mutex
	m   map[string]string
}

func newHelpCache(t *testing.T) *helpCache {
	return &helpCache{t: t, bin: harness.Binary(t), m: map[string]string{}}
}

// help is the help text of a command (stdout and stderr together: help
// goes to one of them, whichever this memfs version chose).
func (h *helpCache) help(cmd ...string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := strings.Join(cmd, " ")
	if s, ok := h.m[key]; ok {
		return s
	}
	out, _ := exec.Command(h.bin, append(cmd, "--help")...).CombinedOutput() // --help may exit 0 or 2
	s := string(out)
	if !strings.Contains(s, "Usage") {
		h.t.Fatalf("memfs %s --help printed no usage:\n%s", key, s)
	}
	h.m[key] = s
	return s
}

var helpFlag = regexp.MustCompile(`(?m)^\s+--?([a-z0-9][a-z0-9-]*)\b`)

func (h *helpCache) flags(cmd ...string) []string {
	var out []string
	for _, m := range helpFlag.FindAllStringSubmatch(h.help(cmd...), -1) {
		out = append(out, m[1])
	}
	return out
}

var commandLine = regexp.MustCompile(`^  ([a-z][a-z-]*)\s+\S`)

// commands are the memfs commands the binary lists in memfs --help: the
// indented lines after "Commands:", up to a blank line.
func (h *helpCache) commands() []string {
	var out []string
	_, list, _ := strings.Cut(h.help(), "Commands:\n")
	for _, l := range strings.Split(list, "\n") {
		if strings.TrimSpace(l) == "" {
			break
		}
		if m := commandLine.FindStringSubmatch(l); m != nil {
			out = append(out, m[1])
		}
	}
	if !slices.Contains(out, "serve") || !slices.Contains(out, "worker") {
		h.t.Fatalf("memfs --help lists no serve/worker commands: %q", out)
	}
	return out
}

// TestKitFlagsExist checks every memfs command line in the kit (unit
// ExecStart lines, the commands shown in comments, the compose commands)
// against the built binary: each flag must be one that command takes.
func TestKitFlagsExist(t *testing.T) {
	h := newHelpCache(t)
	commands := h.commands()
	var all []invocation
	for p, text := range kitFiles(t) {
		all = append(all, invocations(p, text, commands)...)
	}
	b, err := os.ReadFile(filepath.Join("container", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCompose(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range c.Services {
		if len(s.Command) > 0 && slices.Contains(commands, s.Command[0]) && strings.HasPrefix(s.Image, "memfs") {
			all = append(all, invocations("compose.yaml service "+name, "memfs "+strings.Join(s.Command, " "), commands)...)
		}
	}
	seen := map[string]bool{}
	for _, inv := range all {
		seen[inv.cmd[0]] = true
		have := h.flags(inv.cmd...)
		for _, f := range inv.flags {
			if f == "help" {
				continue
			}
			if !slices.Contains(have, f) {
				t.Errorf("%s: memfs %s has no flag --%s", inv.where, strings.Join(inv.cmd, " "), f)
			}
		}
	}
	for _, need := range []string{"serve", "worker", "environments"} {
		if !seen[need] {
			t.Errorf("no memfs %s command line found in the kit: the scan is broken", need)
		}
	}
}

var memfsVar = regexp.MustCompile(`\bMEMFS_[A-Z][A-Z_]*[A-Z]\b`)

// TestKitEnvironmentExists checks every MEMFS_ variable the kit sets or
// names against the help of the commands it is for.
func TestKitEnvironmentExists(t *testing.T) {
	h := newHelpCache(t)
	forFile := map[string][]string{
		filepath.Join("systemd", "memfs-serve.service"):  {"serve"},
		filepath.Join("systemd", "memfs-worker.service"): {"worker"},
		filepath.Join("container", "compose.yaml"):       {"serve", "worker"},
		filepath.Join("container", "Dockerfile"):         {"serve", "worker"},
	}
	for p, text := range kitFiles(t) {
		cmds, ok := forFile[p]
		if !ok {
			cmds = []string{"serve", "worker", "mount"}
		}
		for _, v := range memfsVar.FindAllString(text, -1) {
			if !slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(h.help(c), v) }) {
				t.Errorf("%s names %s, which memfs %s does not read", p, v, strings.Join(cmds, "/"))
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join("container", "compose.yaml"))
	c, err := parseCompose(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range c.Services {
		if name != "serve" && name != "worker" {
			continue
		}
		for v := range s.Environment {
			if strings.HasPrefix(v, "MEMFS_") && !strings.Contains(h.help(name), v) {
				t.Errorf("compose.yaml: service %s sets %s, which memfs %s does not read", name, v, name)
			}
		}
	}
}

// keyProblems finds keys written into a kit file: a memfs key, a key
// variable given a value, a key flag that takes the key itself rather
// than a file, a database URL with a real-looking password.
func keyProblems(text string) []string {
	checks := []struct {
		re  *regexp.Regexp
		why string
	}{
		{regexp.MustCompile(`sk-[A-Za-z0-9_-]{8,}`), "a key"},
		{regexp.MustCompile(`\b(MEMFS|ANTHROPIC)_[A-Z_]*(KEY|SECRET|TOKEN)\b["']?\s*[=:]\s*\S`), "a key variable set in the file"},
		{regexp.MustCompile(`--(admin-key|api-key|environment-key|replay-api-key)(["'\s=,]|$)`), "a key flag that takes the key itself (use its -file twin)"},
		{regexp.MustCompile(`postgres(ql)?://[^:/\s@]+:([^@\s]*[a-z0-9][^@\s]*)@`), "a database password (write PASSWORD as a placeholder)"},
	}
	var p []string
	for _, c := range checks {
		for _, m := range c.re.FindAllString(text, -1) {
			p = append(p, fmt.Sprintf("%s: %q", c.why, m))
		}
	}
	return p
}

func TestKitHoldsNoKeys(t *testing.T) {
	for p, text := range kitFiles(t) {
		for _, prob := range keyProblems(text) {
			t.Errorf("%s: %s", p, prob)
		}
	}
}

func TestKeyProblemsCatch(t *testing.T) {
	for _, bad := range []string{
		"Environment=MEMFS_API_KEY=abc",
		"MEMFS_ADMIN_KEY: hunter2hunter2",
		`command: ["worker", "--environment-key", "x"]`,
		"ExecStart=/usr/local/bin/memfs serve --admin-key=abcdefabcdef",
		"# the key is sk-memfs-admin-0123456789abcdef",
		"MEMFS_DB=postgres://memfs:s3cret@db/memfs",
	} {
		if len(keyProblems(bad)) == 0 {
			t.Errorf("keyProblems(%q) found nothing", bad)
		}
	}
	for _, fine := range []string{
		"--environment-key-file %d/environment.key",
		"the variable MEMFS_REPLAY_API_KEY in worker.env",
		"MEMFS_DB=postgres://memfs:PASSWORD@db.example/memfs",
	} {
		if p := keyProblems(fine); len(p) > 0 {
			t.Errorf("keyProblems(%q) = %q, want nothing", fine, p)
		}
	}
}
