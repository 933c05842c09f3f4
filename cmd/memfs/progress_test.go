package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/syncqueue"
)

// The printer says where a load is at most once per period of its
// elapsed time, nothing for a load shorter than a period, and closes a
// load it reported on.
func TestProgressPrinter(t *testing.T) {
	var b strings.Builder
	p := newProgressPrinter(&b, time.Second)
	at := func(store string, n int, elapsed time.Duration, done bool) {
		p.report(syncqueue.LoadProgress{StoreID: store, Memories: n, Bytes: int64(n) * 30000, Elapsed: elapsed, Done: done})
	}
	at("memstore_fast", 20, 100*time.Millisecond, false)
	at("memstore_fast", 40, 900*time.Millisecond, true)
	for i, ms := range []int{300, 700, 1000, 1300, 1900, 2100, 2200, 4700} {
		at("memstore_slow", 20*(i+1), time.Duration(ms)*time.Millisecond, false)
	}
	at("memstore_slow", 3000, 5*time.Second, true)
	want := "loading memstore_slow: 60 memories (1.7 MiB) so far, 1 s\n" +
		"loading memstore_slow: 120 memories (3.4 MiB) so far, 2 s\n" +
		"loading memstore_slow: 160 memories (4.6 MiB) so far, 4 s\n" +
		"loaded memstore_slow: 3,000 memories (85.8 MiB) in 5.0 s\n"
	if b.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", b.String(), want)
	}
}

// With a period of 0, every page is a line.
func TestProgressEveryPage(t *testing.T) {
	var b strings.Builder
	p := newProgressPrinter(&b, 0)
	p.report(syncqueue.LoadProgress{StoreID: "s", Memories: 20, Bytes: 20})
	p.report(syncqueue.LoadProgress{StoreID: "s", Memories: 25, Bytes: 25, Elapsed: time.Millisecond})
	p.report(syncqueue.LoadProgress{StoreID: "s", Memories: 25, Bytes: 25, Elapsed: time.Millisecond, Done: true})
	if n := strings.Count(b.String(), "loading s:"); n != 2 || !strings.Contains(b.String(), "loaded s: 25 memories (25 B) in 0.0 s\n") {
		t.Errorf("printed:\n%s", b.String())
	}
}

func TestParseProgressEvery(t *testing.T) {
	for in, want := range map[string]time.Duration{"": time.Second, "off": -1, "OFF": -1, "0": 0, "250ms": 250 * time.Millisecond, "2s": 2 * time.Second} {
		if got, err := parseProgressEvery(in); err != nil || got != want {
			t.Errorf("parseProgressEvery(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"soon", "-1s", "1"} {
		if _, err := parseProgressEvery(in); err == nil || !strings.Contains(err.Error(), loadProgressEnv+" must be a duration") {
			t.Errorf("parseProgressEvery(%q): %v, want an error naming %s", in, err, loadProgressEnv)
		}
	}
}

// Not a terminal (a pipe, a file): no printer, whatever the period.
func TestLoadProgressNotATerminal(t *testing.T) {
	t.Setenv(loadProgressEnv, "0")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if fn, err := loadProgress(w); fn != nil || err != nil {
		t.Errorf("loadProgress(a pipe) = %v, %v; want no printer", fn != nil, err)
	}
	t.Setenv(loadProgressEnv, "soon")
	if _, err := loadProgress(w); err == nil {
		t.Error("a bad MEMFS_LOAD_PROGRESS_EVERY is accepted")
	}
}

func TestCommasAndBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -3000: "-3,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 90_000_000: "85.8 MiB", 5 << 30: "5.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
