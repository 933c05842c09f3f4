package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// damage is a check failure at an offset, before any decision whether it is
// a torn tail or corruption.
type damage struct {
	off    int64
	reason string
}

// Range is a byte range [From, To) of a journal file.
type Range struct{ From, To int64 }

// scanResult is what scanning a journal image found.
type scanResult struct {
	baseLSN uint64
	// end is the offset just past the last intact record: the file's
	// length if it ends cleanly, else where a torn tail begins.
	end int64
	// torn describes the torn tail at end, nil if there is none.
	torn *damage
	// records is the number of intact records.
	records int
	// lost are the damaged ranges that were skipped: corruption before
	// the tail (see "Damage" in the package doc), each with the first
	// check that failed in it.
	lost []lostRange
	// ctx is what the CONTEXT record names, nil when it was damaged.
	ctx *journalContext
	// session is the session the records were checked as written in:
	// ctx's, else the one assumed.
	session string
}

// lostRange is a damaged range and why its first byte failed.
type lostRange struct {
	Range
	reason string
}

// errVersion wraps ErrUnsupportedVersion with the version found.
type errVersion uint32

func (v errVersion) Error() string {
	return fmt.Sprintf("%v %d (this memfs reads version %d)", ErrUnsupportedVersion, uint32(v), formatVersion)
}
func (v errVersion) Unwrap() error { return ErrUnsupportedVersion }

// decodeHeader checks a file header and returns its base LSN. A damaged
// header is a *damage; version 1 a *refusedError (it is not
// authenticated); an unknown version an errVersion.
func decodeHeader(b []byte) (uint64, error) {
	if len(b) < headerLen {
		return 0, &damage{0, fmt.Sprintf("file header truncated to %d bytes", len(b))}
	}
	if !bytes.Equal(b[:8], magic[:]) {
		return 0, &damage{0, "bad magic"}
	}
	if crc32c(b[:20]) != binary.LittleEndian.Uint32(b[20:]) {
		return 0, &damage{0, "file header checksum mismatch"}
	}
	switch v := binary.LittleEndian.Uint32(b[8:]); v {
	case formatVersion:
	case 1:
		return 0, &refusedError{"a version 1 journal: it carries no authentication, so nothing shows it was written here (take it up, after checking it, with memfs replay --trust-journal)"}
	default:
		return 0, errVersion(v)
	}
	return binary.LittleEndian.Uint64(b[12:]), nil
}

func (d *damage) Error() string { return fmt.Sprintf("offset %d: %s", d.off, d.reason) }

// scanKeys is what scan checks a journal against: the state dir's key and
// identity, the store, and the session to assume when the CONTEXT record
// is damaged. With a nil key nothing of that is checked (Inspect).
type scanKeys struct {
	key  []byte
	want journalContext
	// trust reads version 1 as well, and checks nothing (Adopt).
	trust bool
}

// scan decodes the journal image b, calling fn for each intact record in
// order with the record and its raw framed bytes (a subslice of b). A torn
// tail (see the package doc for the exact rules) ends the scan and is
// reported in the result. Anything else that fails a check — a damaged
// header, a record whose checks fail with more data after it, a record
// fn refuses (an impossible LSN or confirmation) — is skipped: the scan
// resynchronises on the next offset where a whole record passes every
// check, and the skipped bytes are reported in res.lost.
//
// The errors are a *refusedError for a journal that is not this state
// dir's own (see "Authentication" in the package doc: a version 1 file,
// a CONTEXT record naming another identity or store, a record whose CRC
// passes and whose MAC fails), and an errVersion for a version this code
// does not know.
func scan(b []byte, k scanKeys, fn func(r *record, raw []byte) error) (scanResult, error) {
	var res scanResult
	base, err := decodeHeader(b)
	off := headerLen
	ml := macLen
	var refused *refusedError
	if k.trust && errors.As(err, &refused) && binary.LittleEndian.Uint32(b[8:]) == 1 {
		base, err, ml = binary.LittleEndian.Uint64(b[12:]), nil, 0
	}
	switch {
	case errors.As(err, new(errVersion)), errors.As(err, &refused):
		return res, err
	case err != nil:
		d, _ := asDamage(err)
		if len(b) <= headerLen {
			if len(b) > 0 {
				res.lost = append(res.lost, lostRange{Range{0, int64(len(b))}, d.reason})
			}
			res.end = int64(len(b))
			return res, nil
		}
		next := resync(b, headerLen, nil, ml)
		res.lost = append(res.lost, lostRange{Range{0, int64(next)}, d.reason})
		off = next
	default:
		res.baseLSN = base
	}
	var s *sealer
	session := k.want.session
	if r, total, d := frameAt(b, off, nil, ml); d == nil && r.typ == recContext {
		c := r.ctx
		switch {
		case k.key == nil:
		case c.identity != k.want.identity:
			return res, &refusedError{fmt.Sprintf("written in another state dir (identity %s; this one is %s)", c.identity, k.want.identity)}
		case c.storeID != k.want.storeID:
			return res, &refusedError{fmt.Sprintf("the journal of another store (%s), not of %s", c.storeID, k.want.storeID)}
		}
		if k.key != nil {
			s = newSealer(k.key, c.storeID, c.identity, c.session)
			if _, _, d := frameAt(b, off, s, ml); d != nil {
				return res, &refusedError{"its CONTEXT record fails its authentication (HMAC): it was not written with this state dir's key"}
			}
		}
		res.ctx, session = &c, c.session
		off += total
	}
	if k.key != nil && s == nil {
		s = newSealer(k.key, k.want.storeID, k.want.identity, session)
	}
	res.session = session
	for off < len(b) {
		r, total, d := frameAt(b, off, s, ml)
		if d != nil && d.torn {
			return torn(res, off, d.reason)
		}
		if d != nil && d.forged {
			return res, &refusedError{fmt.Sprintf("the record at offset %d passes its CRC and fails its authentication (HMAC): it was not written with this state dir's key for this store and session %q, so the whole journal is refused", off, session)}
		}
		if d == nil {
			if r.typ == recContext {
				d = &frameDamage{reason: "a CONTEXT record after the first record"}
			} else if err := fn(r, b[off:off+total]); err != nil {
				d = &frameDamage{reason: err.Error()}
			}
		}
		if d != nil {
			next := resync(b, off+1, s, ml)
			res.lost = append(res.lost, lostRange{Range{int64(off), int64(next)}, d.reason})
			off = next
			continue
		}
		res.records++
		off += total
	}
	res.end = int64(off)
	return res, nil
}

// frameDamage is why the bytes at an offset are not a record; torn when
// they are the torn tail a crash mid-append leaves.
type frameDamage struct {
	reason string
	torn   bool
	// forged: the record passes both CRCs and fails its MAC.
	forged bool
}

// frameAt decodes the record at b[off:], applying the torn-tail rules, and
// checks its MAC with s (not when s is nil).
//
// ml is the length of the MAC after the payload: macLen, or 0 for a
// version 1 journal (read only by Adopt).
func frameAt(b []byte, off int, s *sealer, ml int) (*record, int, *frameDamage) {
	rest := b[off:]
	if len(rest) < frameHeaderLen {
		return nil, 0, &frameDamage{reason: fmt.Sprintf("%d bytes at end of file, less than a record header", len(rest)), torn: true}
	}
	n := binary.LittleEndian.Uint32(rest[0:])
	if crc32c(rest[0:4]) != binary.LittleEndian.Uint32(rest[4:]) {
		if allZero(rest[frameHeaderLen:]) {
			if allZero(rest) {
				return nil, 0, &frameDamage{reason: fmt.Sprintf("%d zero bytes at end of file", len(rest)), torn: true}
			}
			return nil, 0, &frameDamage{reason: "partly written record header at end of file", torn: true}
		}
		return nil, 0, &frameDamage{reason: "record length check mismatch, followed by more data"}
	}
	if n == 0 || n > maxRecordLen {
		return nil, 0, &frameDamage{reason: fmt.Sprintf("record length %d out of range", n)}
	}
	total := frameHeaderLen + int(n) + ml
	if total > len(rest) {
		return nil, 0, &frameDamage{reason: fmt.Sprintf("record of %d bytes runs past end of file (%d bytes left)", total, len(rest)), torn: true}
	}
	if crc32c(rest[frameHeaderLen:total]) != binary.LittleEndian.Uint32(rest[8:]) {
		if allZero(rest[total:]) {
			return nil, 0, &frameDamage{reason: "checksum mismatch in the last record", torn: true}
		}
		return nil, 0, &frameDamage{reason: "record checksum mismatch, followed by more data"}
	}
	body := rest[frameHeaderLen : total-ml]
	if s != nil && !s.verify(body, rest[total-ml:total]) {
		return nil, 0, &frameDamage{reason: "record authentication (HMAC) mismatch", forged: true}
	}
	r, err := decodeBody(body)
	if err != nil {
		return nil, 0, &frameDamage{reason: err.Error()}
	}
	return r, total, nil
}

// resync returns the first offset at or after from where a whole record
// passes its checks (both CRCs and the decoder), or len(b). Two CRC-32Cs
// over independent bytes make a false match about a 2^-64 event. A record
// that passes both CRCs and fails its MAC (s) stops the search too: the
// scan refuses the journal there.
func resync(b []byte, from int, s *sealer, ml int) int {
	for off := from; off+frameHeaderLen <= len(b); off++ {
		if _, _, d := frameAt(b, off, s, ml); d == nil || d.forged {
			return off
		}
	}
	return len(b)
}

func torn(res scanResult, off int, reason string) (scanResult, error) {
	res.end = int64(off)
	res.torn = &damage{int64(off), reason}
	return res, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeBody parses type + payload of a record whose CRC passed. PUT content
// is a subslice of body.
func decodeBody(body []byte) (*record, error) {
	d := fieldReader{b: body[1:]}
	r := &record{typ: recType(body[0])}
	r.lsn = d.uvarint("lsn")
	if r.typ != recContext {
		r.fileID = d.str("file_id")
	}
	switch r.typ {
	case recPut:
		r.origin = d.str("origin")
		r.baseSHA = d.str("base_sha")
		r.path = d.str("path")
		r.content = d.bytes("content")
	case recDelete:
		r.origin = d.str("origin")
		r.baseSHA = d.str("base_sha")
		r.path = d.str("path")
	case recConfirm:
		r.confirmed = d.uvarint("confirmed_lsn")
		r.memoryID = d.str("memory_id")
		r.sha = d.str("sha")
		r.path = d.str("path")
	case recContext:
		r.ctx.storeID = d.str("store_id")
		r.ctx.identity = d.str("identity")
		r.ctx.session = d.str("session")
	default:
		return nil, fmt.Errorf("unknown record type %d", body[0])
	}
	if d.err != nil {
		return nil, fmt.Errorf("%v record: %w", r.typ, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%v record: %d bytes after the last field", r.typ, len(d.b))
	}
	return r, nil
}

// fieldReader reads payload fields, remembering the first error.
type fieldReader struct {
	b   []byte
	err error
}

func (d *fieldReader) uvarint(name string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad uvarint in field %s", name)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *fieldReader) bytes(name string) []byte {
	n := d.uvarint(name)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("field %s of %d bytes runs past the record", name, n)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *fieldReader) str(name string) string { return string(d.bytes(name)) }

// asDamage reports whether err is a *damage.
func asDamage(err error) (*damage, bool) {
	var d *damage
	ok := errors.As(err, &d)
	return d, ok
}
