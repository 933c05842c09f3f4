package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/statedir"
)

// upStateDir is where memfs up keeps the state (journals, conflicts,
// status sockets) of its worker: <data dir>/state.
func upStateDir(dataDir string) string { return filepath.Join(dataDir, "state") }

// stateDirFlags are --state-dir and --data-dir, for the commands that read
// what mounts left in a state dir (status, conflicts, replay). --data-dir
// names the state of `memfs up --data-dir DIR` without knowing where up
// keeps it.
type stateDirFlags struct {
	stateDir, dataDir string
}

func (f *stateDirFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.stateDir, "state-dir", "", "the state dir of the mounts (env MEMFS_STATE_DIR; default "+defaultStateDir()+")")
	fs.StringVar(&f.dataDir, "data-dir", "", "the --data-dir of memfs up: its state dir is DATA-DIR/state")
}

// dir returns the state dir: --state-dir, DATA-DIR/state, MEMFS_STATE_DIR,
// or the default; named is false for the default. Giving both flags is a
// usage error; a state dir that was named but does not exist is an error
// (a mistyped path would otherwise look like a host with nothing to show).
func (f *stateDirFlags) dir() (dir string, named bool, err error) {
	switch {
	case f.stateDir != "" && f.dataDir != "":
		return "", false, usagef("give --state-dir or --data-dir, not both")
	case f.stateDir != "":
		dir = f.stateDir
	case f.dataDir != "":
		dir = upStateDir(f.dataDir)
	case os.Getenv("MEMFS_STATE_DIR") != "":
		dir = os.Getenv("MEMFS_STATE_DIR")
	default:
		return defaultStateDir(), false, nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if f.dataDir != "" {
			return "", true, fmt.Errorf("no state dir at %s: is %s the --data-dir of a memfs up that has run?", dir, f.dataDir)
		}
		return "", true, fmt.Errorf("no state dir at %s", dir)
	case err != nil:
		return "", true, err
	case !fi.IsDir():
		return "", true, fmt.Errorf("the state dir %s is not a directory", dir)
	}
	return dir, true, nil
}

// ensureStateDir creates the state dir of memfs mount (0700, its parents
// too) before anything is put in it, so that one that can't be made fails
// the command at once with the flag that names it. A default state dir
// below a home directory that does not exist says so.
func ensureStateDir(dir string) error {
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		return nil
	}
	if home, herr := os.UserHomeDir(); herr == nil && dir == defaultStateDir() && os.Getenv("XDG_STATE_HOME") == "" {
		if _, serr := os.Stat(home); errors.Is(serr, os.ErrNotExist) {
			return fmt.Errorf("the state dir %s: %w (your home directory %s does not exist); give one with --state-dir or MEMFS_STATE_DIR", dir, err, home)
		}
	}
	return fmt.Errorf("the state dir %s: %w; give another with --state-dir or MEMFS_STATE_DIR", dir, err)
}

// prepareStateDir is what every command that writes the state dir does
// first: ensureStateDir, then statedir.Prepare, which refuses a state dir
// another user owns (exit 2: nothing was done) and closes one open to
// group or others (one warning).
func prepareStateDir(dir string, log logrus.FieldLogger) error {
	if err := ensureStateDir(dir); err != nil {
		return err
	}
	err := statedir.Prepare(dir, log)
	var fe *statedir.ForeignError
	if errors.As(err, &fe) {
		return exitError{code: 2, msg: err.Error()}
	}
	return err
}
