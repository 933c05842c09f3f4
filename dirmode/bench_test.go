package dirmode

import (
	"fmt"
	"syscall"
	"testing"
	"time"
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
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for range b.N {
		e.d.Look()
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	b.StopTimer()
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	if ops := e.j.take(); len(ops) != 0 {
		b.Fatalf("an idle look journaled %d changes", len(ops))
	}
	e.d.Freeze()
}
