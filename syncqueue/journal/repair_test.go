package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sirupsen/logrus"
)

// threeRecords writes PUT a v1, PUT b v1, PUT a v2 (the last one long) and
// returns the journal bytes, the offset of each record, and the pending
// state after the first two.
func threeRecords(t *testing.T) (data []byte, offs []int64, before []Entry) {
	t.Helper()
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	offs = append(offs, j.Stats().FileBytes)
	put(t, j, "a", "/a.md", "a version one")
	offs = append(offs, j.Stats().FileBytes)
	put(t, j, "b", "/b.md", "b version one")
	offs = append(offs, j.Stats().FileBytes)
	before = j.Pending()
	put(t, j, "a", "/a.md", string(bytes.Repeat([]byte("a version two "), 20)))
	closeJ(t, j)
	data, err := os.ReadFile(journalPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return data, offs, before
}

// withJournal makes a fresh directory holding data as its journal.
func withJournal(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(journalPath(dir), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTornTailEveryCut(t *testing.T) {
	data, offs, before := threeRecords(t)
	last := offs[2]
	for cut := last; cut < int64(len(data)); cut++ {
		dir := withJournal(t, data[:cut])
		opts, hook := testOpts()
		j, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		if got := j.Pending(); !reflect.DeepEqual(got, before) {
			t.Fatalf("cut at %d: pending %+v, want %+v", cut, got, before)
		}
		if got := fileSize(t, journalPath(dir)); got != last {
			t.Fatalf("cut at %d: file is %d bytes, want it truncated to %d", cut, got, last)
		}
		if torn := hasLog(hook, logrus.WarnLevel, "torn"); torn != (cut > last) {
			t.Fatalf("cut at %d: torn-tail warning logged = %v", cut, torn)
		}
		// The next record lands where the torn one was, and replays.
		lsn := put(t, j, "c", "/c.md", "after the cut")
		closeJ(t, j)
		j = open(t, dir, opts)
		if e, ok := pendingByID(j)["c"]; !ok || e.LSN != lsn || len(j.Pending()) != 3 {
			t.Fatalf("cut at %d: record written after the repair did not replay: %+v", cut, j.Pending())
		}
		closeJ(t, j)
	}
}

func TestZeroedTail(t *testing.T) {
	data, _, _ := threeRecords(t)
	dir := withJournal(t, append(bytes.Clone(data), make([]byte, 4096)...))
	opts, hook := testOpts()
	j := open(t, dir, opts)
	p := pendingByID(j)
	if len(p) != 2 || len(p["a"].Content) != 14*20 {
		t.Fatalf("pending: %+v", j.Pending())
	}
	if got := fileSize(t, journalPath(dir)); got != int64(len(data)) {
		t.Fatalf("file is %d bytes, want the zeros cut (%d)", got, len(data))
	}
	if !hasLog(hook, logrus.WarnLevel, "torn") {
		t.Fatal("no warning for the zeroed tail")
	}
}

// A checksum failure in the last record, with nothing after it, is a torn
// write (the size reached the disk, not all the data).
func TestBadChecksumInLastRecordIsTorn(t *testing.T) {
	data, offs, before := threeRecords(t)
	for _, tail := range []int{0, 100} { // nothing, or zeros, after it
		d := append(bytes.Clone(data), make([]byte, tail)...)
		d[len(data)-5] ^= 0x40
		dir := withJournal(t, d)
		opts, _ := testOpts()
		j := open(t, dir, opts)
		if got := j.Pending(); !reflect.DeepEqual(got, before) {
			t.Fatalf("pending %+v, want %+v", got, before)
		}
		if got := fileSize(t, journalPath(dir)); got != offs[2] {
			t.Fatalf("file is %d bytes, want %d", got, offs[2])
		}
		closeJ(t, j)
	}
}

// A journal damaged before its tail is salvaged: every record that passes
// its checks — before and after the damage — is replayed, the damaged bytes
// are reported, and the damaged file is kept byte for byte.
func TestDamageIsSalvagedNeverSkipped(t *testing.T) {
	data, offs, _ := threeRecords(t)
	long := string(bytes.Repeat([]byte("a version two "), 20))
	all := map[string]string{"a": long, "b": "b version one"}
	flip := func(off int64) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x01; return b }
	}
	cases := []struct {
		name   string
		damage func([]byte) []byte
		at     int64             // where the first lost range begins
		want   map[string]string // pending after the salvage
	}{
		{"payload byte of the first record", flip(offs[0] + 20), offs[0], all},
		{"payload byte of the middle record", flip(offs[1] + 16), offs[1], map[string]string{"a": long}},
		{"checksum of the first record", flip(offs[0] + 9), offs[0], all},
		{"length of the first record", flip(offs[0]), offs[0], all},
		{"high byte of the first length", func(b []byte) []byte { b[offs[0]+3] = 0x7f; return b }, offs[0], all},
		{"length check of the first record", flip(offs[0] + 5), offs[0], all},
		{"type of the first record", flip(offs[0] + 12), offs[0], all},
		{"magic", flip(1), 0, all},
		{"header base lsn", flip(14), 0, all},
		{"header checksum", flip(22), 0, all},
		{"file shorter than its header", func(b []byte) []byte { return b[:10] }, 0, map[string]string{}},
		{"garbage after a zeroed gap", func(b []byte) []byte {
			return append(append(b, make([]byte, 64)...), "junk that is not a record"...)
		}, int64(len(data)), all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			damaged := tc.damage(bytes.Clone(data))
			dir := withJournal(t, damaged)
			opts, hook := testOpts()
			j := open(t, dir, opts)
			d := j.Damage()
			if d == nil || len(d.Lost) == 0 || d.Lost[0].From != tc.at || d.LostBytes() <= 0 {
				t.Fatalf("Damage() = %+v, want lost bytes from offset %d", d, tc.at)
			}
			if got := pendingContents(j); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("pending after the salvage: %v, want %v", got, tc.want)
			}
			kept, _ := filepath.Glob(filepath.Join(dir, DamagedPrefix+"*"))
			if len(kept) != 1 || kept[0] != d.KeptAt {
				t.Fatalf("kept copies: %v (Damage says %q)", kept, d.KeptAt)
			}
			if got, _ := os.ReadFile(kept[0]); !bytes.Equal(got, damaged) {
				t.Fatal("the kept copy does not hold the damaged journal's bytes")
			}
			if !hasLog(hook, logrus.ErrorLevel, "JOURNAL DAMAGED") {
				t.Fatal("no error logged")
			}
			// The salvaged journal is a clean one: the next Open finds the
			// same pending state and no damage; the copy stays for a human.
			want := j.Pending()
			closeJ(t, j)
			j = open(t, dir, opts)
			if d := j.Damage(); d != nil {
				t.Fatalf("second Open reports damage %+v", d)
			}
			if got := j.Pending(); !reflect.DeepEqual(got, want) {
				t.Fatalf("after reopening the salvaged journal:\n got %+v\nwant %+v", got, want)
			}
			if kept2, _ := filepath.Glob(filepath.Join(dir, DamagedPrefix+"*")); len(kept2) != 1 {
				t.Fatalf("kept copies after the second Open: %v", kept2)
			}
		})
	}
}

// pendingContents maps each pending file id to its content.
func pendingContents(j *Journal) map[string]string {
	out := map[string]string{}
	for _, e := range j.Pending() {
		out[e.FileID] = string(e.Content)
	}
	return out
}

// Records with valid checksums that a live journal could not have written
// are skipped and reported; the records around them are replayed.
func TestImpossibleRecordsAreSkipped(t *testing.T) {
	rec := func(r record) []byte { return encodeRecord(&r, testSeal()) }
	// resign gives a record whose type and payload were changed its MAC
	// and checksums again: a record this state dir's key did sign.
	resign := func(b []byte) []byte {
		body := b[frameHeaderLen : len(b)-macLen]
		copy(b[len(b)-macLen:], testSeal().mac(body))
		seal(b)
		return b
	}
	good := rec(record{typ: recPut, lsn: 20, fileID: "z", path: "/z", content: []byte("kept")})
	cases := map[string][][]byte{
		"lsn going backwards": {
			rec(record{typ: recPut, lsn: 5, fileID: "a", path: "/a"}),
			rec(record{typ: recPut, lsn: 3, fileID: "b", path: "/b"}),
		},
		"confirm of nothing pending": {
			rec(record{typ: recPut, lsn: 1, fileID: "a", path: "/a"}),
			rec(record{typ: recConfirm, lsn: 2, fileID: "b", confirmed: 1, memoryID: "m"}),
		},
		"confirm of a future lsn": {
			rec(record{typ: recPut, lsn: 1, fileID: "a", path: "/a"}),
			rec(record{typ: recConfirm, lsn: 2, fileID: "a", confirmed: 7, memoryID: "m"}),
		},
		"empty file id": {
			rec(record{typ: recPut, lsn: 1, path: "/a"}),
		},
		"unknown type": {
			func() []byte {
				b := rec(record{typ: recDelete, lsn: 1, fileID: "a", path: "/a"})
				b[12] = 9
				return resign(b)
			}(),
		},
		"bytes after the last field": {
			func() []byte {
				b := rec(record{typ: recDelete, lsn: 1, fileID: "a", path: "/a"})
				b = append(b[:len(b)-macLen], 0)
				return resign(append(b, make([]byte, macLen)...))
			}(),
		},
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			data := testHeader(0)
			bad := int64(len(data))
			for i, r := range recs {
				if i == len(recs)-1 {
					bad = int64(len(data))
				}
				data = append(data, r...)
			}
			data = append(data, good...)
			opts, _ := testOpts()
			j := open(t, withJournal(t, data), opts)
			d := j.Damage()
			if d == nil || len(d.Lost) != 1 || d.Lost[0].From != bad {
				t.Fatalf("Damage() = %+v, want one lost range from %d", d, bad)
			}
			if got := pendingContents(j); got["z"] != "kept" {
				t.Fatalf("the intact record after the damage was not replayed: %v", got)
			}
		})
	}
}

func TestUnsupportedVersionIsLeftInPlace(t *testing.T) {
	h := encodeHeader(0)
	binary.LittleEndian.PutUint32(h[8:], 3)
	binary.LittleEndian.PutUint32(h[20:], crc32c(h[:20]))
	dir := withJournal(t, h)
	opts, _ := testOpts()
	_, err := Open(dir, opts)
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Open: %v", err)
	}
	if got, _ := os.ReadFile(journalPath(dir)); !bytes.Equal(got, h) {
		t.Fatal("journal of an unknown version was touched")
	}
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("second Open (lock released?): %v", err)
	}
}

// A journal that holds nothing but zeros, or nothing at all, was damaged
// (the journal is created with its header by tmp → fsync → rename): its
// records are lost, and that is said as loudly as any damage.
func TestEmptyOrZeroedJournalIsReportedLost(t *testing.T) {
	for _, n := range []int{0, 7, headerLen, int(testEmptyLen), 4096} {
		dir := withJournal(t, make([]byte, n))
		opts, hook := testOpts()
		j := open(t, dir, opts)
		if d := j.Damage(); d == nil || d.Size != int64(n) || d.KeptAt == "" {
			t.Fatalf("%d zero bytes: Damage() = %+v", n, d)
		}
		if !hasLog(hook, logrus.ErrorLevel, "JOURNAL DAMAGED") {
			t.Fatalf("%d zero bytes: nothing logged at error level", n)
		}
		put(t, j, "a", "/a", "x")
		closeJ(t, j)
		j = open(t, dir, opts)
		if len(j.Pending()) != 1 || j.Damage() != nil {
			t.Fatalf("%d zero bytes: after reopening pending %+v, damage %+v", n, j.Pending(), j.Damage())
		}
		closeJ(t, j)
	}
}
