package journal

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCompactionBoundsTheFile(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.GroupCommit = time.Millisecond
	opts.CompactMinBytes = 16 << 10
	j := open(t, dir, opts)
	content := strings.Repeat("x", 1000)
	// Two files stay pending throughout; eight are edited and confirmed
	// over and over: ~1.8 MB of history.
	put(t, j, "keep-1", "/keep-1", content)
	put(t, j, "keep-2", "/keep-2", content)
	for round := range 200 {
		for f := range 8 {
			id := fmt.Sprintf("f%d", f)
			lsn := put(t, j, id, "/"+id, content)
			confirm(t, j, id, lsn, "mem_"+id, fmt.Sprint(round), "/"+id)
		}
		if round%20 == 19 {
			eventually(t, "compaction to bound the file", func() bool {
				return fileSize(t, journalPath(dir)) <= opts.CompactMinBytes
			})
		}
	}
	want := j.Pending()
	if len(want) != 2 {
		t.Fatalf("pending: %d entries", len(want))
	}
	// Compaction must leave the file replaying to the same state. (The
	// last records may sit below the size that triggers one: compact now.)
	if err := j.compactNow(); err != nil {
		t.Fatal(err)
	}
	if size := fileSize(t, journalPath(dir)); size >= 4<<10 {
		t.Fatalf("after a compaction the journal holds %d bytes for two pending entries", size)
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after compaction and reopen:\n got %+v\nwant %+v", got, want)
	}
	// Nothing pending: back to the bare header.
	for _, e := range want {
		confirm(t, j, e.FileID, e.LSN, "mem", "sha", e.Path)
	}
	eventually(t, "the journal to shrink to its header", func() bool { return fileSize(t, journalPath(dir)) == testEmptyLen })
}

func TestOpenCompactsWhenItPays(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.GroupCommit = 10 * time.Second // no background compaction
	j := open(t, dir, opts)
	for i := range 500 {
		put(t, j, "f", "/f", fmt.Sprintf("%04d%s", i, strings.Repeat("y", 1000)))
	}
	want := j.Pending()
	closeJ(t, j)
	if size := fileSize(t, journalPath(dir)); size < 500*1000 {
		t.Fatalf("journal unexpectedly small before reopen: %d", size)
	}

	j = open(t, dir, opts) // 500 KB < 1 MiB: does not pay yet
	if size := fileSize(t, journalPath(dir)); size < 500*1000 {
		t.Fatalf("compacted below CompactMinBytes: %d", size)
	}
	closeJ(t, j)

	opts.CompactMinBytes = 4 << 10
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after compaction: %+v, want %+v", got, want)
	}
	if size, want := fileSize(t, journalPath(dir)), testEmptyLen+int64(len(j.st.pending["f"].rec)); size != want {
		t.Fatalf("journal is %d bytes after Open, want %d (header + one record)", size, want)
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopen of the compacted journal: %+v", got)
	}
}

// A crash in the middle of a compaction leaves journal.tmp next to an intact
// journal (the rename is the commit point).
func TestLeftoverCompactionIsRemoved(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	put(t, j, "a", "/a", "a1")
	lb := put(t, j, "b", "/b", "b1")
	confirm(t, j, "b", lb, "mem_b", "sha", "/b")
	put(t, j, "c", "/c", "c1")
	want := j.Pending()
	closeJ(t, j)

	// A half-written compaction of some other state.
	other := append(testHeader(99), encodeRecord(&record{typ: recPut, lsn: 1, fileID: "zzz", path: "/z", content: []byte("z")}, testSeal())...)
	if err := os.WriteFile(journalPath(dir)+".tmp", other[:len(other)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir, opts)
	if _, err := os.Stat(journalPath(dir) + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("journal.tmp still there: %v", err)
	}
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pending %+v, want %+v", got, want)
	}
}

// Records written during the unlocked first phase of a compaction are
// carried over to the new file.
func TestCompactionKeepsRecordsWrittenDuringIt(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.GroupCommit = 10 * time.Second // the owner goroutine stays out of it
	opts.CompactMinBytes = 1
	j := open(t, dir, opts)
	for i := range 50 {
		put(t, j, fmt.Sprint("f", i%5), "/f", fmt.Sprint(i))
	}
	var during []uint64
	j.testHookCompactPhase1 = func() {
		for i := range 20 {
			during = append(during, put(t, j, fmt.Sprint("g", i%5), "/g", fmt.Sprint(i)))
		}
		confirm(t, j, "f0", j.st.pending["f0"].LSN, "mem_f0", "sha", "/f")
	}
	if err := j.compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(during) != 20 {
		t.Fatal("the hook did not run")
	}
	want := j.Pending()
	if len(want) != 9 {
		t.Fatalf("pending: %+v", want)
	}
	// Header, 5 compacted records, then the 21 copied over.
	if got := j.Stats().FileBytes; got != fileSize(t, journalPath(dir)) {
		t.Fatalf("size in memory %d, on disk %d", got, fileSize(t, journalPath(dir)))
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pending %+v, want %+v", got, want)
	}
}
