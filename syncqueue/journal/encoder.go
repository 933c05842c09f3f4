package journal

import (
	"encoding/binary"
	"hash/crc32"
	"strconv"
)

// Format constants; see "File format" in the package doc.
const (
	formatVersion  = 2
	headerLen      = 24
	frameHeaderLen = 12
	maxRecordLen   = 64 << 20
)

// magic opens every journal file.
var magic = [8]byte{'M', 'E', 'M', 'F', 'S', 'J', 'N', 'L'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// recType is a record's type byte.
type recType byte

const (
	recPut     recType = 1
	recDelete  recType = 2
	recConfirm recType = 3
	recContext recType = 4
)

func (t recType) String() string {
	switch t {
	case recPut:
		return "PUT"
	case recDelete:
		return "DELETE"
	case recConfirm:
		return "CONFIRM"
	case recContext:
		return "CONTEXT"
	}
	return "type " + strconv.Itoa(int(t))
}

// record is one decoded (or to-be-encoded) journal record. Which fields are
// used depends on typ; see the package doc.
type record struct {
	typ     recType
	lsn     uint64
	fileID  string
	origin  string // PUT, DELETE
	baseSHA string // PUT, DELETE
	path    string
	content []byte // PUT

	confirmed uint64 // CONFIRM: the LSN of the confirmed state
	memoryID  string // CONFIRM
	sha       string // CONFIRM

	ctx journalContext // CONTEXT
}

// encodeHeader returns a file header carrying baseLSN.
func encodeHeader(baseLSN uint64) []byte {
	h := make([]byte, headerLen)
	copy(h, magic[:])
	binary.LittleEndian.PutUint32(h[8:], formatVersion)
	binary.LittleEndian.PutUint64(h[12:], baseLSN)
	binary.LittleEndian.PutUint32(h[20:], crc32c(h[:20]))
	return h
}

// encodeRecord returns r framed: length, length check, CRC, type, payload,
// MAC (by s). The buffer is allocated at its exact size, so a PUT's
// content ends macLen bytes before its end and callers may keep the
// content as a subslice of the record.
func encodeRecord(r *record, s *sealer) []byte {
	n := 1 + uvarintLen(r.lsn)
	if r.typ != recContext {
		n += strLen(r.fileID) + strLen(r.path)
	}
	switch r.typ {
	case recPut:
		n += strLen(r.origin) + strLen(r.baseSHA) + uvarintLen(uint64(len(r.content))) + len(r.content)
	case recDelete:
		n += strLen(r.origin) + strLen(r.baseSHA)
	case recConfirm:
		n += uvarintLen(r.confirmed) + strLen(r.memoryID) + strLen(r.sha)
	case recContext:
		n += strLen(r.ctx.storeID) + strLen(r.ctx.identity) + strLen(r.ctx.session)
	default:
		panic("syncqueue: encode of unknown record type")
	}
	b := make([]byte, frameHeaderLen, frameHeaderLen+n+macLen)
	b = append(b, byte(r.typ))
	b = binary.AppendUvarint(b, r.lsn)
	if r.typ != recContext {
		b = appendStr(b, r.fileID)
	}
	switch r.typ {
	case recPut:
		b = appendStr(b, r.origin)
		b = appendStr(b, r.baseSHA)
		b = appendStr(b, r.path)
		b = binary.AppendUvarint(b, uint64(len(r.content)))
		b = append(b, r.content...)
	case recDelete:
		b = appendStr(b, r.origin)
		b = appendStr(b, r.baseSHA)
		b = appendStr(b, r.path)
	case recConfirm:
		b = binary.AppendUvarint(b, r.confirmed)
		b = appendStr(b, r.memoryID)
		b = appendStr(b, r.sha)
		b = appendStr(b, r.path)
	case recContext:
		b = appendStr(b, r.ctx.storeID)
		b = appendStr(b, r.ctx.identity)
		b = appendStr(b, r.ctx.session)
	}
	if len(b) != frameHeaderLen+n {
		panic("syncqueue: record size miscomputed")
	}
	b = append(b, s.mac(b[frameHeaderLen:])...)
	seal(b)
	return b
}

// seal sets the length, length check and CRC of a framed record whose
// type, payload and MAC are in place.
func seal(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)-frameHeaderLen-macLen))
	binary.LittleEndian.PutUint32(b[4:], crc32c(b[0:4]))
	binary.LittleEndian.PutUint32(b[8:], crc32c(b[frameHeaderLen:]))
}

// putContent returns the content of an encoded PUT record: the contentLen
// bytes before its MAC (content is the last field).
func putContent(rec []byte, contentLen int) []byte {
	end := len(rec) - macLen
	return rec[end-contentLen : end : end]
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
