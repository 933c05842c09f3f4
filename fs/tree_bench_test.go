package fs

import (
	"fmt"
	"testing"

	logtest "github.com/sirupsen/logrus/hooks/test"
)

// benchTree is a tree loaded with n files, 100 to a directory, each with a
// short content; file i has the id fmt.Sprintf("mem_%d", i).
func benchTree(b *testing.B, n int) *Tree {
	b.Helper()
	l, _ := logtest.NewNullLogger()
	tr, err := NewTree(Options{StoreID: testStoreID, Journal: &recJournal{}, Log: l})
	if err != nil {
		b.Fatal(err)
	}
	files := make([]File, n)
	for i := range files {
		files[i] = File{FileID: fmt.Sprintf("mem_%d", i), Path: fmt.Sprintf("/d%d/f%d.md", i/100, i), Content: []byte("hello")}
	}
	tr.Load(files)
	if got := tr.FileCount(); got != n {
		b.Fatalf("loaded %d files, want %d", got, n)
	}
	return tr
}

// BenchmarkTreeApply measures one remote change (a new content for a file
// already in the tree, as the sync engine applies it) on trees of 1,000,
// 10,000 and 100,000 files. Every FUSE call of the mount waits behind it,
// so its cost must not grow with the tree: the files=100000 case reports
// its time per change as a multiple of the files=1000 case's
// (x-files=1000, goal: within 2). With -count, each count's files=100000
// case is measured against the last files=1000 run.
func BenchmarkTreeApply(b *testing.B) {
	var base float64 // ns per change at 1,000 files
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			tr := benchTree(b, n)
			contents := [][]byte{[]byte("one"), []byte("two")}
			changes := make([][]Change, 64)
			for i := range changes {
				k := i * (n / len(changes))
				changes[i] = []Change{{FileID: fmt.Sprintf("mem_%d", k), Path: fmt.Sprintf("/d%d/f%d.md", k/100, k)}}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := changes[i%len(changes)]
				c[0].Content = contents[(i/len(changes))%2]
				if err := tr.Apply(c); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			switch {
			case n == 1000:
				base = ns
			case n == 100000 && base > 0:
				b.ReportMetric(ns/base, "x-files=1000")
			}
		})
	}
}
