package journal

import (
	"bytes"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	long := string(bytes.Repeat([]byte("p"), 300)) // multi-byte uvarints
	for _, r := range []record{
		{typ: recPut, lsn: 1, fileID: "mem_1", origin: "mem_1", baseSHA: "abc", path: "/a.md", content: []byte("hello")},
		{typ: recPut, lsn: 1 << 40, fileID: "local-x", path: long, content: []byte{}},
		{typ: recDelete, lsn: 7, fileID: "mem_2", origin: "mem_2", baseSHA: "def", path: "/b.md"},
		{typ: recConfirm, lsn: 9, fileID: "mem_2", confirmed: 8, memoryID: "mem_2", sha: "012", path: "/b.md"},
		{typ: recConfirm, lsn: 10, fileID: "x", confirmed: 3},
	} {
		raw := encodeRecord(&r, testSeal())
		data := append(testHeader(42), raw...)
		var got []*record
		res, err := scan(data, testKeys(), func(d *record, rawGot []byte) error {
			if !bytes.Equal(rawGot, raw) {
				t.Errorf("raw bytes differ")
			}
			got = append(got, d)
			return nil
		})
		if err != nil || res.torn != nil || res.baseLSN != 42 || res.end != int64(len(data)) || len(got) != 1 {
			t.Fatalf("%v: scan = %+v, %v, %d records", r.typ, res, err, len(got))
		}
		if r.typ == recPut && r.content != nil && len(r.content) == 0 {
			r.content = got[0].content // empty either way
		}
		if !reflect.DeepEqual(*got[0], r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got[0], r)
		}
	}
}

// FuzzScan: any bytes after a valid header scan without panicking, and the
// intact prefix is never longer than the input.
func FuzzScan(f *testing.F) {
	good := append(testHeader(0),
		encodeRecord(&record{typ: recPut, lsn: 1, fileID: "a", path: "/a", content: []byte("x")}, testSeal())...)
	f.Add(good[testEmptyLen:])
	f.Add(make([]byte, 40))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, tail []byte) {
		data := append(testHeader(0), tail...)
		res, err := scan(data, testKeys(), func(*record, []byte) error { return nil })
		if err == nil && (res.end < testEmptyLen || res.end > int64(len(data))) {
			t.Fatalf("end %d outside [%d, %d]", res.end, testEmptyLen, len(data))
		}
		if err == nil && res.torn == nil && res.end != int64(len(data)) {
			t.Fatalf("clean scan stopped at %d of %d", res.end, len(data))
		}
	})
}
