package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/syncqueue"
)

// Loading a large store at mount takes seconds. The engine logs one
// summary line at info when it is loaded; on a terminal, the commands that
// mount also print progress to stderr while it loads, at most once a
// second per store:
//
//	loading memstore_...: 1,200 memories (35.2 MiB) so far, 2 s
//	loaded memstore_...: 3,000 memories (87.9 MiB) in 4.1 s
//
// There is no total: the API has no memory count. A load shorter than a
// second prints nothing; the closing line follows only progress lines. Not
// on a terminal (a service, a pipe, a log file), nothing is printed beyond
// the log. MEMFS_LOAD_PROGRESS_EVERY changes the period ("0" prints at
// every page, "off" never).

// loadProgressEnv is the environment variable that sets the period.
const loadProgressEnv = "MEMFS_LOAD_PROGRESS_EVERY"

// loadProgress returns the OnLoad hook of a command that mounts: a
// progress printer on w when w is a terminal, else nil.
func loadProgress(w *os.File) (func(syncqueue.LoadProgress), error) {
	every, err := parseProgressEvery(os.Getenv(loadProgressEnv))
	if err != nil {
		return nil, usagef("%v", err)
	}
	if every < 0 || !isTerminal(w) {
		return nil, nil
	}
	return newProgressPrinter(w, every).report, nil
}

// parseProgressEvery reads MEMFS_LOAD_PROGRESS_EVERY: "" is a second,
// "off" is -1 (never).
func parseProgressEvery(v string) (time.Duration, error) {
	switch {
	case v == "":
		return time.Second, nil
	case strings.EqualFold(v, "off"):
		return -1, nil
	case v == "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s must be a duration like 1s, 0 (every page) or off, not %q", loadProgressEnv, v)
	}
	return d, nil
}

// isTerminal reports whether f is a terminal (it answers TCGETS).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressPrinter prints load progress, per store, at most once per
// period of the load's own elapsed time (so a test can drive it without a
// clock).
type progressPrinter struct {
	w     io.Writer
	every time.Duration

	mu   sync.Mutex
	next map[string]time.Duration // store -> elapsed time of its next line; GUARDED_BY(mu)
}

func newProgressPrinter(w io.Writer, every time.Duration) *progressPrinter {
	return &progressPrinter{w: w, every: every, next: map[string]time.Duration{}}
}

func (p *progressPrinter) report(lp syncqueue.LoadProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, started := p.next[lp.StoreID]
	if lp.Done {
		if started && next > p.every {
			fmt.Fprintf(p.w, "loaded %s: %s memories (%s) in %.1f s\n", lp.StoreID, commas(lp.Memories), humanBytes(lp.Bytes), lp.Elapsed.Seconds())
		}
		delete(p.next, lp.StoreID)
		return
	}
	if !started {
		next = p.every
	}
	if lp.Elapsed < next {
		p.next[lp.StoreID] = next
		return
	}
	fmt.Fprintf(p.w, "loading %s: %s memories (%s) so far, %d s\n", lp.StoreID, commas(lp.Memories), humanBytes(lp.Bytes), int(lp.Elapsed.Seconds()))
	if p.every > 0 {
		next += ((lp.Elapsed-next)/p.every + 1) * p.every // the first period boundary after now
	} else {
		next = lp.Elapsed + 1 // every page, and the closing line
	}
	p.next[lp.StoreID] = next
}

// commas writes n with thousands separators: 3,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// humanBytes writes a size in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 2 {
		v, i = v/unit, i+1
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB"}[i])
}
