package journal

import (
	"testing"

	"github.com/memfs/memfs/internal/filestate"
)

// TestAppendTakesTheFileState: Append records the state as the tree hands
// it over, and the pending entry carries the same state back, with the
// Origin the journal knows (the file's base); a state that names an Origin
// itself is refused, with nothing written.
func TestAppendTakesTheFileState(t *testing.T) {
	opts, _ := testOpts()
	j := open(t, t.TempDir(), opts)
	defer closeJ(t, j)
	j.SetBase("mem_a", "mem_a", "sha-a")
	st := filestate.State{FileID: "mem_a", Path: "/a.md", Content: []byte("alpha\n")}
	if _, err := j.Append(st); err != nil {
		t.Fatal(err)
	}
	e, ok := j.Lookup("mem_a")
	want := st
	want.Origin = "mem_a"
	if !ok || e.FileID != want.FileID || e.Origin != want.Origin || e.Path != want.Path || string(e.Content) != string(want.Content) || e.Deleted {
		t.Fatalf("pending entry %+v (found %v), want the state %+v", e.State, ok, want)
	}
	if e.BaseSHA != "sha-a" {
		t.Errorf("pending entry's base sha %q, want sha-a", e.BaseSHA)
	}
	before := j.Stats().FileBytes
	if _, err := j.Append(filestate.State{FileID: "mem_b", Origin: "mem_b", Path: "/b.md", Content: []byte("b")}); err == nil {
		t.Fatal("Append of a state naming its own Origin was accepted")
	}
	if _, ok := j.Lookup("mem_b"); ok || j.Stats().FileBytes != before {
		t.Errorf("a refused Append left an entry (%v) or wrote bytes (%d, was %d)", ok, j.Stats().FileBytes, before)
	}
}
