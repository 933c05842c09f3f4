package main

// The admin commands (memfs stores, memories, versions) call the API with
// store/client. This file holds what they share: the verb tables and their
// dispatch, the global flags (--api-url, --api-key[-file], --json), argument
// parsing that allows flags after positional arguments, output helpers and
// the hints added to errors.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// defaultAPIURL is where the admin commands look for memfs serve.
const defaultAPIURL = "http://127.0.0.1:8080"

// adminIO is where an admin command reads, writes and finds its
// environment; tests replace it.
type adminIO struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// stdIO is the process's own.
var stdIO = adminIO{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}

// verb is one subcommand of an admin group (memfs GROUP VERB ...).
type verb struct {
	name    string
	args    string // the positional arguments, for the group's help
	summary string
	// run is nil for a verb that is a group of its own (nestedGroups).
	run func(a *admin, args []string) error
}

// nestedGroups are the admin groups reached as a verb of another, by
// "GROUP VERB" (memfs sessions events ls: "sessions events").
var nestedGroups = map[string]*adminGroup{}

// adminGroup is one admin command: memfs stores, memories or versions.
type adminGroup struct {
	name  string
	about string
	verbs []verb
}

// groups are the admin groups registered, by name (for the tests that
// go over every verb).
var groups = map[string]*adminGroup{}

// registerGroup registers g as a command of the memfs binary.
func registerGroup(g *adminGroup, summary string) {
	groups[g.name] = g
	register(g.name, summary, func(args []string) error {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return g.run(ctx, stdIO, args)
	})
}

// run dispatches args to a verb. Errors from the API come back with a hint
// of what to do.
func (g *adminGroup) run(ctx context.Context, aio adminIO, args []string) error {
	if len(args) == 0 {
		g.usage(aio.stderr)
		return usagef("missing a verb")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		g.usage(aio.stdout)
		return flag.ErrHelp
	}
	if sub := nestedGroups[g.name+" "+args[0]]; sub != nil {
		return sub.run(ctx, aio, args[1:])
	}
	for _, v := range g.verbs {
		if v.name == args[0] && v.run != nil {
			a := &admin{ctx: ctx, io: aio, cmd: g.name + " " + v.name}
			return a.explain(v.run(a, args[1:]))
		}
	}
	return usageError{msg: fmt.Sprintf("unknown verb %q (one of %s)", args[0], g.verbNames()), help: "memfs " + g.name}
}

func (g *adminGroup) verbNames() string {
	names := make([]string, len(g.verbs))
	for i, v := range g.verbs {
		names[i] = v.name
	}
	return strings.Join(names, ", ")
}

func (g *adminGroup) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: memfs %s VERB [arguments] [flags]\n\n%s\n\nVerbs:\n", g.name, g.about)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range g.verbs {
		fmt.Fprintf(tw, "  %s %s\t%s\n", v.name, v.args, v.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nEvery verb takes --api-url (env MEMFS_API_URL, default %s),\n"+
		"the admin key from MEMFS_API_KEY or --api-key-file FILE (--api-key KEY works\n"+
		"too, but shows the key to every user in ps), --ca-file FILE (env\n"+
		"MEMFS_CA_FILE: certificates to trust for an https:// URL), --insecure-http\n"+
		"(env MEMFS_INSECURE_HTTP=true: allow plain http:// to another host), and\n"+
		"--json (print the API's JSON, for scripts).\n"+
		"Run 'memfs %s VERB --help' for a verb's flags and examples.\n", defaultAPIURL, g.name)
}

// admin is one run of an admin verb.
type admin struct {
	ctx    context.Context
	io     adminIO
	cmd    string // "memories cat"
	usage  string // "STORE PATH|ID"
	fs     *flag.FlagSet
	apiURL string
	apiKey *keyFlag
	tls    apiTLSFlags
	json   bool
}

// flags starts the verb's flag set with the global flags; usage is the
// positional part of the synopsis, help a paragraph and examples.
func (a *admin) flags(usage, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("memfs "+a.cmd, flag.ContinueOnError)
	fs.StringVar(&a.apiURL, "api-url", "", "the memfs serve API (env MEMFS_API_URL; default "+defaultAPIURL+")")
	a.apiKey = addKeyFlag(fs, "api-key", "the admin API key", "MEMFS_API_KEY")
	a.tls.add(fs)
	fs.BoolVar(&a.json, "json", false, "print the API's JSON objects instead of a readable summary")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: memfs %s %s\n\n%s\n\nFlags:\n", a.cmd, usage, strings.TrimSpace(help))
		fs.PrintDefaults()
	}
	a.fs, a.usage = fs, usage
	return fs
}

// parse parses args, flags anywhere among the positional arguments
// ("--" ends the flags), and checks that there are min to max positional
// arguments (max < 0: no limit).
func (a *admin) parse(args []string, min, max int) ([]string, error) {
	pos, err := parseArgs(a.fs, args, a.io.stdout)
	var ue usageError
	if errors.As(err, &ue) {
		ue.help = "memfs " + a.cmd
		return nil, ue
	}
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) < min:
		return nil, usagef("missing arguments; usage: memfs %s %s", a.cmd, a.usage)
	case max >= 0 && len(pos) > max:
		return nil, usagef("unexpected argument %q; usage: memfs %s %s", pos[max], a.cmd, a.usage)
	}
	return pos, nil
}

// parseInterleaved parses flags found anywhere in args and returns the
// positional arguments in order: people type `memfs memories cat STORE
// /path --json`. Everything after "--" is positional. -h/--help prints
// the flag set's Usage to stdout and returns flag.ErrHelp (exit 0); see
// parseArgs.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	return parseArgs(fs, args, os.Stdout)
}

// parseArgs is parseInterleaved with help printed to helpOut. The flag
// package prints a bad flag and the whole usage to the flag set's output
// before returning the error, which main printed again: here the flag
// package prints nothing, a bad flag comes back as a usage error (printed
// once by main, exit 2), and help goes to helpOut, never to stderr.
func parseArgs(fs *flag.FlagSet, args []string, helpOut io.Writer) ([]string, error) {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = usage }()
	pos, err := parseLoop(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(helpOut)
		if usage == nil {
			fmt.Fprintf(helpOut, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		} else {
			usage()
		}
		return nil, flag.ErrHelp
	case err != nil:
		return nil, usagef("%v", err)
	}
	return pos, nil
}

// parseFlags parses a command that takes no positional argument: one is a
// usage error rather than silently ignored.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parseInterleaved(fs, args)
	if err == nil && len(pos) > 0 {
		err = usagef("unexpected argument %q: this command takes only flags", pos[0])
	}
	return err
}

func parseLoop(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// client builds the API client from the flags and the environment.
// parseClient is parse, then client: what every verb that talks to the
// store service starts with.
func (a *admin) parseClient(args []string, min, max int) ([]string, *client.Client, error) {
	pos, err := a.parse(args, min, max)
	if err != nil {
		return nil, nil, err
	}
	c, err := a.client()
	if err != nil {
		return nil, nil, err
	}
	return pos, c, nil
}

func (a *admin) client() (*client.Client, error) {
	if a.apiURL == "" {
		a.apiURL = a.io.getenv("MEMFS_API_URL")
	}
	if a.apiURL == "" {
		a.apiURL = defaultAPIURL
	}
	key, err := a.apiKey.resolve(a.io.getenv)
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("no API key: set MEMFS_API_KEY (or pass --api-key-file) to the admin key memfs serve " +
			"wrote to its data dir's admin.key, e.g. export MEMFS_API_KEY=$(cat DATA_DIR/admin.key)")
	}
	tls, err := a.tls.resolve(a.io.getenv)
	if err != nil {
		return nil, err
	}
	c, err := client.New(tls.options(client.Options{BaseURL: a.apiURL, APIKey: key, UserAgent: "memfs-cli"}))
	if err != nil {
		return nil, clientUsage(fmt.Errorf("--api-url: %w", err))
	}
	return c, nil
}

// explain adds to an API error what the user can do about it.
func (a *admin) explain(err error) error {
	var hint string
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.As(err, new(usageError)):
		return err
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	case serviceHint(err, a.apiURL) != "":
		hint = serviceHint(err, a.apiURL)
	case errors.Is(err, store.ErrForbidden):
		hint = "this key may not do that (the admin commands need the admin key), or the store is archived and read-only"
	case errors.Is(err, store.ErrPreconditionFailed):
		hint = "the memory changed while this command ran; look at it again and retry"
	default:
		return err
	}
	return fmt.Errorf("%w\nhint: %s", err, hint)
}

// withServiceHint is err with serviceHint's hint added, if it has one
// (nil stays nil).
func withServiceHint(err error, apiURL string) error {
	if h := serviceHint(err, apiURL); err != nil && h != "" {
		return fmt.Errorf("%w\nhint: %s", err, h)
	}
	return err
}

// serviceHint is what to do about an error that every command talking to
// memfs serve at apiURL can meet: its key refused, the service not
// answering. "" for any other error.
func serviceHint(err error, apiURL string) string {
	switch {
	case errors.As(err, new(*client.CertificateError)):
		return "" // the server answers; its message says what to do
	case errors.Is(err, store.ErrUnauthorized):
		return "the server refused the API key: set MEMFS_API_KEY (or --api-key-file) to the admin key memfs serve wrote to its data dir's admin.key"
	case errors.Is(err, store.ErrUnavailable):
		return fmt.Sprintf("is memfs serve running at %s? (set MEMFS_API_URL or --api-url)", apiURL)
	}
	return ""
}

// printJSON writes v as indented JSON.
func (a *admin) printJSON(v any) error {
	enc := json.NewEncoder(a.io.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table starts an aligned table with a header row; Flush it when done.
func (a *admin) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(a.io.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

// fields starts aligned "label: value" lines; Flush it when done.
func (a *admin) fields() *tabwriter.Writer {
	return tabwriter.NewWriter(a.io.stdout, 0, 0, 1, ' ', 0)
}

// printf writes a line of the readable output.
func (a *admin) printf(format string, args ...any) {
	fmt.Fprintf(a.io.stdout, format, args...)
}

// note writes a remark that is not output (e.g. "no memories") to stderr.
func (a *admin) note(format string, args ...any) {
	fmt.Fprintf(a.io.stderr, format+"\n", args...)
}

// fmtTime formats a timestamp for tables: RFC 3339, UTC, seconds.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// metadataFlag collects repeated --metadata KEY=VALUE flags in order.
type metadataFlag []kv

type kv struct{ key, value string }

func (m *metadataFlag) String() string {
	if m == nil {
		return ""
	}
	parts := make([]string, len(*m))
	for i, p := range *m {
		parts[i] = p.key + "=" + p.value
	}
	return strings.Join(parts, ",")
}

func (m *metadataFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, not %q", s)
	}
	*m = append(*m, kv{k, v})
	return nil
}
