package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
