package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// fixtureV2 is a journal written by format version 2's encoder (with
// testAuth), kept as bytes in testdata: a change to both the encoder and
// the decoder can't break journals already on users' disks unseen.
// Regenerate it only for a new format version (MEMFS_WRITE_FIXTURE=1
// writes it from the script below), never to make this test pass.
// fixtureV1 is one of version 1, which is refused (not authenticated).
const (
	fixtureV1 = "testdata/journal-v1"
	fixtureV2 = "testdata/journal-v2"
)

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

func TestVersion2Fixture(t *testing.T) {
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
		if err := os.WriteFile(fixtureV2, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", fixtureV2, len(b))
		return
	}
	data, err := os.ReadFile(fixtureV2)
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
		t.Fatalf("the version 2 fixture reads as damaged: %+v", d)
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
		t.Fatalf("pending entries of the version 2 fixture:\n got %+v\nwant %+v", pending, want)
	}
	// The file on disk is still readable by this version after the open
	// (a compaction may have rewritten it, in the same format).
	if b, err := os.ReadFile(filepath.Join(dir, "journal")); err != nil || !bytes.HasPrefix(b, []byte("MEMFSJNL\x02\x00\x00\x00")) {
		t.Fatalf("journal after open: %v, header %q", err, b[:min(len(b), 12)])
	}
}

// A version 1 journal carries no authentication: it is refused, moved
// aside byte for byte, and reported; the mount starts with a fresh
// journal and nothing of it is pending.
func TestVersion1FixtureIsRefusedAndKept(t *testing.T) {
	data, err := os.ReadFile(fixtureV1)
	if err != nil {
		t.Fatal(err)
	}
	dir := withJournal(t, data)
	opts, hook := testOpts()
	j := open(t, dir, opts)
	r := j.Refused()
	if r == nil || !strings.Contains(r.Reason, "version 1") {
		t.Fatalf("Refused() = %+v, want a version 1 refusal", r)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("pending after refusing a version 1 journal: %+v", p)
	}
	if got, _ := os.ReadFile(r.KeptAt); !bytes.Equal(got, data) {
		t.Fatalf("the refused journal was not kept byte for byte at %q", r.KeptAt)
	}
	if !hasLog(hook, logrus.ErrorLevel, "JOURNAL REFUSED") {
		t.Fatal("no error logged")
	}
	if sa := ListSetAside(dir); len(sa) != 1 || sa[0].Path != r.KeptAt || sa[0].Held || !strings.Contains(sa[0].Reason, "version 1") {
		t.Fatalf("ListSetAside = %+v", sa)
	}
}
