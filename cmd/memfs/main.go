// Command memfs is the memfs binary: the store service (serve), the worker
// commands and the admin commands over the API. Every subcommand has
// --help; errors go to stderr with a non-zero exit and say what to do.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/memfs/memfs/worker"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(args []string) error
}

// commands is the table of subcommands; each file registers its own in init.
var commands = map[string]command{}

func register(name, summary string, run func(args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// usageError is printed with a hint to use --help and exit status 2.
// help, when set, is the command whose --help to suggest ("memfs stores
// ls"); else the hint names the command that ran.
type usageError struct{ msg, help string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

func main() {
	// The agent's tool runner, inside its sandbox (worker/sandbox.go):
	// hidden, and before anything else reads the environment.
	if len(os.Args) == 2 && os.Args[1] == worker.ToolsRunnerCommand {
		os.Exit(worker.RunToolsRunner(os.Stdin, os.Stdout))
	}
	// The same binary is mount(8)'s helper when called as mount.memfs
	// (a symlink in /sbin): see mounthelper.go.
	if filepath.Base(os.Args[0]) == mountHelperName {
		os.Exit(runMountHelper(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:]))
}

// run runs `memfs ARGS...` and returns the exit status. Help goes to
// stdout with status 0, so `memfs serve --help | less` works; an error
// goes to stderr once, by exitStatus.
func run(args []string) int {
	if len(args) == 0 {
		printUsage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printUsage(os.Stdout)
		return 0
	case "help":
		if len(args) == 1 {
			printUsage(os.Stdout)
			return 0
		}
		// memfs help COMMAND [VERB] is memfs COMMAND [VERB] --help.
		return run(append(append([]string{}, args[1:]...), "--help"))
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "memfs: unknown command %q; run 'memfs --help' for the list\n", args[0])
		return 2
	}
	return exitStatus("memfs "+args[0], cmd.run(args[1:]))
}

// exitStatus prints err (if any) to stderr, prefixed with the command
// ("memfs mount"), and returns the exit status: 0 for success and for
// --help, 2 for a usage error, an exitError's own code, else 1.
func exitStatus(name string, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		help := name
		if ue.help != "" {
			help = ue.help
		}
		fmt.Fprintf(os.Stderr, "%s: %s (see '%s --help')\n", name, ue.msg, help)
		return 2
	}
	var ee exitError
	if errors.As(err, &ee) && ee.msg == "" {
		return ee.code // a status that says it all (memfs diff's 1: the contents differ)
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, err)
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "memfs: memory stores as ordinary directories\n\nUsage: memfs COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'memfs COMMAND --help' (or 'memfs help COMMAND') for a command's flags;")
	fmt.Fprintln(w, "'memfs --version' for the version. As mount.memfs (a symlink), the binary is")
	fmt.Fprintln(w, "mount(8)'s helper for the memfs type: see 'memfs mount --help'.")
}

// envOr returns the first non-empty environment variable of names, or def.
func envOr(def string, names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return def
}
