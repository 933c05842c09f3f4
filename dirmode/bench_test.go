package dirmode

import (
	"fmt"
	"testing"
)

// BenchmarkIdleLook: one look of a folder of 10,000 files, none changed
// (the rescan every interval). make bench's S5 measures it in a real
// mount; this is the package's own figure.
func BenchmarkIdleLook(b *testing.B) {
	files := map[string]string{}
	for i := range 10000 {
		files[fmt.Sprintf("/d%02d/f%05d.md", i%50, i)] = fmt.Sprintf("memory %d\n", i)
	}
	t := &testing.T{}
	e := &dirEnv{t: t, dir: b.TempDir() + "/store", state: b.TempDir()}
	e.open(files)
	b.ResetTimer()
	for range b.N {
		e.d.Look()
	}
	b.StopTimer()
	if ops := e.j.take(); len(ops) != 0 {
		b.Fatalf("an idle look journaled %d changes", len(ops))
	}
	e.d.Freeze()
}
