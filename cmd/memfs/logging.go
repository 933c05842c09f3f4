package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
)

// addLogFlags adds --log-format and --log-level (env MEMFS_LOG_FORMAT, MEMFS_LOG_LEVEL).
func addLogFlags(fs *flag.FlagSet, format, level *string) {
	fs.StringVar(format, "log-format", envOr("text", "MEMFS_LOG_FORMAT"), "log format: text or json (env MEMFS_LOG_FORMAT)")
	fs.StringVar(level, "log-level", envOr("info", "MEMFS_LOG_LEVEL"), "log level: debug, info, warn, error (env MEMFS_LOG_LEVEL)")
}

// newLogger builds the process logger; logs go to stderr.
func newLogger(format, level string) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	switch format {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
	}
	lv, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	log.SetLevel(lv)
	return log, nil
}
