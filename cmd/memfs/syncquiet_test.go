package main

import (
	"strings"
	"testing"
	"time"
)

// parseQuiet: a duration of at least 100ms shorter than the interval, or
// off; bad values get an error that names the flag and the rule.
func TestParseQuiet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		quiet    string
		interval time.Duration
		want     time.Duration
		err      string
	}{
		{"1s", 15 * time.Second, time.Second, ""},
		{"100ms", 5 * time.Second, 100 * time.Millisecond, ""},
		{"4.9s", 5 * time.Second, 4900 * time.Millisecond, ""},
		{"off", 15 * time.Second, 0, ""},
		{"OFF", 15 * time.Second, 0, ""},
		{"0", 15 * time.Second, 0, ""},
		{"0s", 15 * time.Second, 0, ""},
		{"soon", 0, 0, ""}, // the interval off: no sync, nothing to check
		{"soon", 15 * time.Second, 0, `--memory-sync-quiet must be a duration like 1s, or off, not "soon"`},
		{"", 15 * time.Second, 0, `not ""`},
		{"99ms", 15 * time.Second, 0, "at least 100ms and shorter than --memory-sync-interval (15s), or off, not 99ms"},
		{"-1s", 15 * time.Second, 0, "at least 100ms"},
		{"5s", 5 * time.Second, 0, "shorter than --memory-sync-interval (5s)"},
	} {
		s := syncFlags{quiet: tc.quiet}
		got, err := s.parseQuiet(tc.interval)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q (interval %s): %s, %v; want %s", tc.quiet, tc.interval, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q (interval %s): %s, %v; want an error saying %q", tc.quiet, tc.interval, got, err, tc.err)
		}
	}
}

// Every command that syncs takes --memory-sync-quiet with the same help,
// and refuses a bad one before anything starts (exit 2).
func TestQuietFlagEverywhere(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"mount", "worker", "session", "up"} {
		r := runMemfs(t, nil, cmd, "--help")
		if !strings.Contains(r.stdout, "\n  -memory-sync-quiet string\n    \t"+quietHelp+" (default \"1s\")") {
			t.Errorf("memfs %s --help does not describe -memory-sync-quiet (default 1s):\n%s", cmd, r.stdout)
		}
	}
	dataDir := t.TempDir()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"up", "--data-dir", dataDir, "--memory-sync-quiet", "soon"}, `--memory-sync-quiet must be a duration like 1s, or off, not "soon"`},
		{[]string{"up", "--data-dir", dataDir, "--memory-sync-interval", "5s", "--memory-sync-quiet", "5s"}, "shorter than --memory-sync-interval (5s)"},
		{[]string{"mount", "--store", "memstore_1", "--api-key", "k", "--memory-sync-quiet", "10ms", dataDir}, "at least 100ms"},
		{[]string{"mount", "--store", "memstore_1", "--api-key", "k", "-o", "sync_quiet=1m", dataDir}, "shorter than --memory-sync-interval (15s)"},
	} {
		r := runMemfs(t, []string{"MEMFS_MEMORY_SYNC_QUIET="}, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("memfs %q: exit %d, stderr %q; want 2 saying %q", tc.args, r.code, r.stderr, tc.says)
		}
	}
	r := runMemfs(t, []string{"MEMFS_MEMORY_SYNC_QUIET=nope"}, "up", "--data-dir", dataDir)
	if r.code != 2 || !strings.Contains(r.stderr, `not "nope"`) {
		t.Errorf("MEMFS_MEMORY_SYNC_QUIET=nope: exit %d, stderr %q", r.code, r.stderr)
	}
}
