package main

import (
	"fmt"
	"github.com/memfs/memfs/worker"
	"strings"
	"time"

	"github.com/memfs/memfs/syncqueue"
)

// quietHelp is --memory-sync-quiet's help, the same on every command that
// syncs.
const quietHelp = "upload closed changes once no file has been closed for this long, before the interval (which stays the longest a change waits): a duration of at least 100ms, shorter than the interval; 0 or off waits for the interval (env MEMFS_MEMORY_SYNC_QUIET)"

// parseQuiet reads --memory-sync-quiet for the interval parseInterval
// gave: 0 means off (no early passes). With the interval off there is no
// sync, and the quiet period means nothing.
func (s *syncFlags) parseQuiet(interval time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(s.quiet)
	if interval == 0 || strings.EqualFold(v, "off") || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("--memory-sync-quiet must be a duration like 1s, or off, not %q", s.quiet)
	}
	if !syncqueue.QuietValid(d, interval) {
		return 0, fmt.Errorf("--memory-sync-quiet must be at least %s and shorter than --memory-sync-interval (%s), or off, not %s", syncqueue.MinQuiet, interval, d)
	}
	return d, nil
}

// parseSync reads --memory-sync-interval and --memory-sync-quiet.
func (s *syncFlags) parseSync() (interval, quiet time.Duration, err error) {
	if interval, err = s.parseInterval(); err != nil {
		return 0, 0, err
	}
	if s.mountMode, err = worker.ParseMode(s.mountMode); err != nil {
		return 0, 0, fmt.Errorf("--mount-mode: %w", err)
	}
	quiet, err = s.parseQuiet(interval)
	return interval, quiet, err
}
