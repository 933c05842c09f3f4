package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWaitMounted: memfs up's wait for the demo store ends at once when
// the store is mounted (nil), when the demo session or the worker ends
// first (with its reason, never a Go "<nil>"), and on Ctrl-C
// (errStoppedWaiting: the stop begins, not a failure).
func TestWaitMounted(t *testing.T) {
	dir := t.TempDir()
	closed := func(err error) <-chan error {
		ch := make(chan error, 1)
		ch <- err
		return ch
	}
	never := make(chan error)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	for _, tc := range []struct {
		name           string
		ctx            context.Context
		worker, demo   <-chan error
		want           string
		stoppedWaiting bool
	}{
		{name: "the session failed", ctx: bg, worker: never, demo: closed(errors.New("cannot create the memory store's folder")),
			want: "the demo session failed: cannot create the memory store's folder"},
		{name: "the session ended", ctx: bg, worker: never, demo: closed(nil), want: "the demo session ended before its store was mounted at " + dir},
		{name: "the worker stopped", ctx: bg, worker: closed(nil), demo: never, want: "the worker stopped before mounting"},
		{name: "the worker failed", ctx: bg, worker: closed(errors.New("refused")), demo: never, want: "the worker stopped before mounting: refused"},
		{name: "Ctrl-C", ctx: canceled, worker: never, demo: never, stoppedWaiting: true},
	} {
		err := waitMounted(tc.ctx, dir, tc.worker, tc.demo)
		switch {
		case tc.stoppedWaiting:
			if !errors.Is(err, errStoppedWaiting) {
				t.Errorf("%s: %v, want errStoppedWaiting", tc.name, err)
			}
		case err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "<nil>"):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".anthropic-memory-store"), []byte("version 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := waitMounted(bg, dir, never, closed(errors.New("late"))); err != nil {
		t.Errorf("the store is mounted: %v", err)
	}
}
