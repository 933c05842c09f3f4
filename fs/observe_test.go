package fs

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// opCounter is an OpObserver that counts what it is told.
type opCounter struct {
	mu      sync.Mutex
	ops     map[Op]int
	errnos  map[Op]map[syscall.Errno]int
	nonPos  int // observations with a latency <= 0
	unknown int // ops outside [0, NumOps)
}

func newOpCounter() *opCounter {
	return &opCounter{ops: map[Op]int{}, errnos: map[Op]map[syscall.Errno]int{}}
}

func (c *opCounter) ObserveOp(op Op, took time.Duration, errno syscall.Errno) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops[op]++
	if c.errnos[op] == nil {
		c.errnos[op] = map[syscall.Errno]int{}
	}
	c.errnos[op][errno]++
	if took <= 0 {
		c.nonPos++
	}
	if op >= NumOps {
		c.unknown++
	}
}

func (c *opCounter) count(op Op, errno syscall.Errno) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errnos[op][errno]
}

// TestMountObserver: a mount with an observer reports each request the
// shell's commands make, by kind and errno, with a positive latency.
func TestMountObserver(t *testing.T) {
	obs := newOpCounter()
	m := mountTestTreeWith(t, Options{}, MountOptions{Observer: obs}, File{FileID: "m1", Path: "/old.md", Content: []byte("old\n")})
	m.mustSh(t, "mkdir d && printf 'hello' > d/a && cat d/a old.md >/dev/null && mv d/a d/b && rm d/b && rmdir d && ls >/dev/null")
	m.shFails(t, "ln -s old.md link", "Operation not permitted")
	m.shFails(t, "cat missing.md", "No such file")

	// Exactly one request per call for these; release and releasedir
	// arrive after close(2) returns, so everything is polled for.
	want := []struct {
		op    Op
		errno syscall.Errno
		n     int
	}{
		{OpMkdir, 0, 1},
		{OpCreate, 0, 1},
		{OpRename, 0, 1},
		{OpUnlink, 0, 1},
		{OpRmdir, 0, 1},
		{OpSymlink, syscall.EPERM, 1},
	}
	atLeast := []struct {
		op    Op
		errno syscall.Errno
	}{
		{OpWrite, 0}, {OpFlush, 0}, {OpRelease, 0}, {OpOpen, 0}, {OpRead, 0},
		{OpOpendir, 0}, {OpReaddir, 0}, {OpReleasedir, 0}, {OpLookup, 0}, {OpLookup, syscall.ENOENT},
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		for _, w := range want {
			ok = ok && obs.count(w.op, w.errno) == w.n
		}
		for _, w := range atLeast {
			ok = ok && obs.count(w.op, w.errno) > 0
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			for _, w := range want {
				if got := obs.count(w.op, w.errno); got != w.n {
					t.Errorf("%s errno %d: observed %d, want %d", w.op, w.errno, got, w.n)
				}
			}
			for _, w := range atLeast {
				if obs.count(w.op, w.errno) == 0 {
					t.Errorf("%s errno %d: never observed", w.op, w.errno)
				}
			}
			t.FailNow()
		}
		time.Sleep(10 * time.Millisecond)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.nonPos > 0 || obs.unknown > 0 {
		t.Errorf("%d observations without a positive latency, %d of an unknown op", obs.nonPos, obs.unknown)
	}
}

// TestOpNames: every op has a distinct name (they become metric labels).
func TestOpNames(t *testing.T) {
	seen := map[string]Op{}
	for op := Op(0); op < NumOps; op++ {
		n := op.String()
		if n == "" || n == "unknown" {
			t.Errorf("op %d has no name", op)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("ops %d and %d are both %q", other, op, n)
		}
		seen[n] = op
	}
	if NumOps.String() != "unknown" {
		t.Errorf("NumOps.String() = %q", NumOps.String())
	}
}

type nopObserver struct{}

func (nopObserver) ObserveOp(Op, time.Duration, syscall.Errno) {}

// BenchmarkObservedLookup is the cost observedFS adds to a request:
// compare with BenchmarkRawLookup (the same request unobserved).
func BenchmarkObservedLookup(b *testing.B) {
	o := &observedFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), obs: nopObserver{}}
	benchLookup(b, o)
}

// BenchmarkRawLookup is the baseline of BenchmarkObservedLookup.
func BenchmarkRawLookup(b *testing.B) {
	benchLookup(b, fuse.NewDefaultRawFileSystem())
}

func benchLookup(b *testing.B, fs fuse.RawFileSystem) {
	var h fuse.InHeader
	var out fuse.EntryOut
	b.ReportAllocs()
	for b.Loop() {
		fs.Lookup(nil, &h, "a", &out)
	}
}
