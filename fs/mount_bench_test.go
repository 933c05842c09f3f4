package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/syncqueue/journal"
)

// fileJournal is the sync engine's journal (syncqueue/journal) as the
// tree's Journal, as syncqueue.TreeJournal adapts it (fs's tests can't
// import syncqueue, which imports fs).
type fileJournal struct{ j *journal.Journal }

func (f fileJournal) Append(states ...FileState) error {
	_, err := f.j.Append(states...) // journal.Change is FileState
	return err
}

func (f fileJournal) Sync() error { return f.j.Sync() }

// opTimer is an OpObserver that counts requests and adds up the time the
// mount took to answer them, by kind.
type opTimer struct {
	mu   sync.Mutex
	n    [NumOps]int
	took [NumOps]time.Duration
}

func (o *opTimer) ObserveOp(op Op, took time.Duration, errno syscall.Errno) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if op < NumOps {
		o.n[op]++
		o.took[op] += took
	}
}

func (o *opTimer) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n, o.took = [NumOps]int{}, [NumOps]time.Duration{}
}

// report adds requests/op and, per kind, the kind's requests per file and
// the mount's answer time per request (µs).
func (o *opTimer) report(b *testing.B, files int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := 0
	var kinds []string
	for op := Op(0); op < NumOps; op++ {
		if o.n[op] == 0 {
			continue
		}
		total += o.n[op]
		kinds = append(kinds, fmt.Sprintf("%s %.2f×%.1fµs", op, float64(o.n[op])/float64(files),
			float64(o.took[op].Microseconds())/float64(o.n[op])))
	}
	sort.Strings(kinds)
	b.ReportMetric(float64(total)/float64(files), "requests/op")
	b.Logf("requests per file, and the mount's answer time each: %v", kinds)
}

// mountForBench mounts a tree over the real journal in a fresh directory
// (the product's state dir is on disk: so is the test's temp dir, as a
// rule) with room for n more files, observed by obs.
func mountForBench(b *testing.B, n int, obs OpObserver, files ...File) (string, *Tree) {
	b.Helper()
	needFUSE(b)
	auth := journal.Auth{Key: make([]byte, 32), Identity: "bench", StoreID: mountStoreID}
	j, err := journal.Open(filepath.Join(b.TempDir(), "journal"), journal.Options{Auth: auth})
	if err != nil {
		b.Fatal(err)
	}
	tr, err := NewTree(Options{StoreID: mountStoreID, Journal: fileJournal{j}, MaxFiles: n + len(files) + 1})
	if err != nil {
		b.Fatal(err)
	}
	tr.Load(files)
	dir := b.TempDir()
	m, err := MountTree(dir, tr, MountOptions{AllowOther: true, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Unmount(ctx); err != nil {
			b.Errorf("Unmount: %v", err)
		}
		m.Wait()
		if err := j.Close(ctx); err != nil {
			b.Errorf("close the journal: %v", err)
		}
	})
	return dir, tr
}

// BenchmarkCreateWriteClose is F1's file operation on a mount as the
// product makes it (default_permissions, the real journal on disk): create
// a new file, write 2 KiB, close; each close journals the file. It reports
// the FUSE requests per file, and logs each kind's share and answer time.
func BenchmarkCreateWriteClose(b *testing.B) {
	content := make([]byte, 2048)
	for i := range content {
		content[i] = 'a' + byte(i%26)
	}
	obs := &opTimer{}
	dir, tr := mountForBench(b, b.N, obs)
	if err := os.Mkdir(filepath.Join(dir, "w"), 0o755); err != nil {
		b.Fatal(err)
	}
	obs.reset()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fd, err := unix.Open(filepath.Join(dir, "w", fmt.Sprintf("f%07d.md", i)), unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Write(fd, content); err != nil {
			b.Fatal(err)
		}
		if err := unix.Close(fd); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got := tr.FileCount(); got != b.N {
		b.Fatalf("the tree holds %d files, want %d", got, b.N)
	}
	obs.report(b, b.N)
}

// BenchmarkWarmRead is F2's: open, read and close a file the kernel has
// read before.
func BenchmarkWarmRead(b *testing.B) {
	const n = 100
	var files []File
	for i := 0; i < n; i++ {
		files = append(files, File{FileID: fmt.Sprintf("mem_%d", i), Path: fmt.Sprintf("/r/f%03d.md", i), Content: make([]byte, 2048)})
	}
	obs := &opTimer{}
	dir, _ := mountForBench(b, 0, obs, files...)
	buf := make([]byte, 4096)
	read := func(i int) {
		fd, err := unix.Open(filepath.Join(dir, "r", fmt.Sprintf("f%03d.md", i%n)), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		if k, err := unix.Read(fd, buf); err != nil || k != 2048 {
			b.Fatalf("read %d bytes, %v", k, err)
		}
		if err := unix.Close(fd); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		read(i)
	}
	obs.reset()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		read(i)
	}
	b.StopTimer()
	obs.report(b, b.N)
}
