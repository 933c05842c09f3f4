// Command memfs is the memfs binary: the store service (serve), the worker
// commands and the admin commands over the API. Every subcommand has
// --help; errors go to stderr with a non-zero exit and say what to do.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
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
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "memfs: unknown command %q; run 'memfs --help' for the list\n", args[0])
		return 2
	}
	err := cmd.run(args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(os.Stderr, "memfs %s: %s (see 'memfs %s --help')\n", args[0], ue.msg, args[0])
		return 2
	}
	fmt.Fprintf(os.Stderr, "memfs %s: %s\n", args[0], err)
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func printUsage() {
	fmt.Fprintln(os.Stderr, "memfs: memory stores as ordinary directories\n\nUsage: memfs COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'memfs COMMAND --help' for a command's flags.")
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
