package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
)

// addLogFlags adds --log-format and --log-level (env MEMFS_LOG_FORMAT, MEMFS_LOG_LEVEL).
func addLogFlags(fs *flag.FlagSet, format, level *string) {
	addLogFlagsWith(fs, format, level, "info")
}

// addLogFlagsWith is addLogFlags with another default level (memfs up's
// is warn, to keep its banner readable).
func addLogFlagsWith(fs *flag.FlagSet, format, level *string, defLevel string) {
	fs.StringVar(format, "log-format", envOr("text", "MEMFS_LOG_FORMAT"), "log format: text or json (env MEMFS_LOG_FORMAT)")
	fs.StringVar(level, "log-level", envOr(defLevel, "MEMFS_LOG_LEVEL"), "log level: "+strings.Join(logLevels, ", ")+" (env MEMFS_LOG_LEVEL)")
}

// logLevels are the --log-level values, in the order the help and the
// error name them. logrus knows more (trace, fatal, panic, warning); they
// are not offered, so the error can name every accepted value.
var logLevels = []string{"debug", "info", "warn", "error"}

// newLogger builds the process logger; logs go to stderr. A bad format or
// level is an error that names the flag, the value and what is accepted
// (not logrus's own wording).
func newLogger(format, level string) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	switch format {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("invalid --log-format %q: use text or json", format)
	}
	if !slices.Contains(logLevels, level) {
		return nil, fmt.Errorf("invalid --log-level %q: use one of %s", level, strings.Join(logLevels, ", "))
	}
	lv, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: %w", level, err) // unreachable: logLevels are logrus's
	}
	log.SetLevel(lv)
	return log, nil
}
