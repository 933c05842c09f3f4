package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fixtureV1 is a journal written by format version 1's encoder, kept as
// bytes in testdata: a change to both the encoder and the decoder can't
// break journals already on users' disks unseen. Regenerate it only for a
// new format version (MEMFS_WRITE_FIXTURE=1 writes it from the script
// below), never to make this test pass.
const fixtureV1 = "testdata/journal-v1"

// writeFixtureScript is the sequence the fixture holds.
func writeFixtureScript(t *testing.T, j *Journal) {
	j.SetBase("mem_a", "mem_a", "sha-a0")
	j.SetBase("mem_b", "mem_b", "sha-b0")
	j.SetBase("mem_c", "mem_c", "sha-c0")
	put(t, j, "mem_a", "/a.md", "a1")
	put(t, j, "local-1", "/new.md", "n1 ✓ naïve")
	del(t, j, "mem_b", "/b.md")
	lc := put(t, j, "mem_c", "/c.md", "c1")
	confirm(t, j, "mem_c", lc, "mem_c", "sha-c1", "/c.md")
	put(t, j, "local-2", "/empty.md", "")
	l3 := put(t, j, "local-3", "/gone.md", "created then removed")
	del(t, j, "local-3", "/gone.md")
	_ = l3
	la := put(t, j, "mem_a", "/dir/renamed.md", "a2\n")
	l4 := put(t, j, "local-4", "/up.md", "uploaded")
	put(t, j, "local-4", "/up.md", "uploaded, then changed")
	confirm(t, j, "local-4", l4, "mem_4", "sha-4", "/up.md") // rebases the newer state
	_ = la
}

func TestVersion1Fixture(t *testing.T) {
	if os.Getenv("MEMFS_WRITE_FIXTURE") == "1" {
		dir := t.TempDir()
		opts, _ := testOpts()
		j := open(t, dir, opts)
		writeFixtureScript(t, j)
		closeJ(t, j)
		b, err := os.ReadFile(journalPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixtureV1, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", fixtureV1, len(b))
		return
	}
	data, err := os.ReadFile(fixtureV1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(journalPath(dir), data, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, _ := testOpts()
	j := open(t, dir, opts)
	if d := j.Damage(); d != nil {
		t.Fatalf("the version 1 fixture reads as damaged: %+v", d)
	}
	type got struct {
		FileID, Origin, BaseSHA, Path, Content string
		Deleted                                bool
	}
	var pending []got
	for _, e := range j.Pending() {
		pending = append(pending, got{e.FileID, e.Origin, e.BaseSHA, e.Path, string(e.Content), e.Deleted})
	}
	want := []got{
		{"local-1", "", "", "/new.md", "n1 ✓ naïve", false},
		{"mem_b", "mem_b", "sha-b0", "/b.md", "", true},
		{"local-2", "", "", "/empty.md", "", false},
		{"mem_a", "mem_a", "sha-a0", "/dir/renamed.md", "a2\n", false},
		{"local-4", "mem_4", "sha-4", "/up.md", "uploaded, then changed", false},
	}
	if !reflect.DeepEqual(pending, want) {
		t.Fatalf("pending entries of the version 1 fixture:\n got %+v\nwant %+v", pending, want)
	}
	// The file on disk is still readable by this version after the open
	// (a compaction may have rewritten it, in the same format).
	if b, err := os.ReadFile(filepath.Join(dir, "journal")); err != nil || !bytes.HasPrefix(b, []byte("MEMFSJNL\x01\x00\x00\x00")) {
		t.Fatalf("journal after open: %v, header %q", err, b[:min(len(b), 12)])
	}
}
