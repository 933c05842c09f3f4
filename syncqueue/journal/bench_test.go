package journal

import (
	"fmt"
	"testing"
)

// BenchmarkPut measures the hot path: a 2 KiB close recorded (one write(2),
// no fdatasync), over 100 files, with group commit and compaction running
// as in production.
func BenchmarkPut(b *testing.B) {
	opts, _ := testOpts()
	opts.GroupCommit = 0 // default
	j := open(b, b.TempDir(), opts)
	content := make([]byte, 2048)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprint("mem_", i)
	}
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := j.Put(ids[i%len(ids)], "/f.md", content); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPutSync is Put followed by Sync (an application's fsync after
// every close), for comparison: what group commit saves.
func BenchmarkPutSync(b *testing.B) {
	opts, _ := testOpts()
	opts.GroupCommit = 0
	j := open(b, b.TempDir(), opts)
	content := make([]byte, 2048)
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, err := j.Put("mem_1", "/f.md", content); err != nil {
			b.Fatal(err)
		}
		if err := j.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
