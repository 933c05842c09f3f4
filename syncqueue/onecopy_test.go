package syncqueue

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// One copy of each file's bytes (docs/operating.md, "Mounting a store";
// the M1 benchmark): files closed on the mount
// and pending in the journal are held once — the tree shares the
// journal's record — and files loaded from the store once, as decoded.
// The heap grows by about the content, not twice it. Not parallel: it
// reads the process's heap.
func TestTreeAndJournalHoldOneCopy(t *testing.T) {
	const files, size = 40, 60_000
	content := func(i int) string {
		line := fmt.Sprintf("line of file %d of the one-copy test\n", i)
		return strings.Repeat(line, size/len(line)+1)[:size]
	}
	loaded := map[string]string{}
	for i := range files {
		loaded[fmt.Sprintf("/loaded/%02d.md", i)] = content(i)
	}
	e := mgSetup(t, loaded)
	e.start(nil)
	e.waitContent()
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	for i := range files {
		e.mustWrite(fmt.Sprintf("/written/%02d.md", i), content(files+i))
	}
	if n := len(e.pending()); n != files {
		t.Fatalf("%d pending, want %d (the test counts them in the journal)", n, files)
	}
	grew := heap() - before
	t.Logf("%d files of %d bytes closed and pending: the heap grew by %d bytes (%.2f× their content)", files, size, grew, float64(grew)/(files*size))
	if grew > files*size*3/2 {
		t.Errorf("the heap grew by %d bytes for %d bytes of pending files: the tree and the journal hold two copies", grew, files*size)
	}
	// The loaded files: one copy each, as the response decoded them.
	var total int64
	for p := range loaded {
		got, _ := e.read(p)
		total += int64(len(got))
	}
	if total != files*size {
		t.Fatalf("read back %d bytes of loaded files, want %d", total, files*size)
	}
	runtime.KeepAlive(e)
}
