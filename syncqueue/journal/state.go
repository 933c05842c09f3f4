package journal

import (
	"fmt"
	"slices"

	"github.com/memfs/memfs/internal/filestate"
)

// Entry is the pending state of one file: not yet confirmed by the store.
// Its State (internal/filestate) says where the file is and what it holds
// or that it is gone; its Origin is the memory the file derives from, the
// precondition target of its upload ("" for a file created locally and
// never uploaded: its upload is a create), and a Deleted entry with an
// Origin is a delete of that memory. Entries returned by the Journal are
// copies, except Content, which is shared and must not be modified.
type Entry struct {
	filestate.State
	// BaseSHA is the content_sha256 of Origin as last agreed with the store
	// ("" when Origin is "").
	BaseSHA string
	// LSN is the log sequence number of the record that produced this
	// state; Confirm refers to it.
	LSN uint64
}

// Base is what the store holds for a file as last agreed: the memory and its
// content_sha256.
type Base struct {
	MemoryID string
	SHA      string
}

// knownBase is the base of a file without a pending entry, with the LSN
// whose confirmation established it (0 if SetBase did).
type knownBase struct {
	Base
	lsn uint64
}

// entry is a pending Entry plus the record that reproduces it on replay
// (what compaction writes). For a PUT, Entry.Content is the tail of rec.
type entry struct {
	Entry
	rec []byte
	// baseLSN is the LSN whose confirmation established Origin/BaseSHA
	// (0 if unknown): a Confirm of it or anything older is stale.
	baseLSN uint64
	// handedOut is set once Pending returned this entry: an upload of it
	// may be in flight, so dropping it must leave a tombstone.
	handedOut bool
}

// state is the journal's in-memory state. It is changed only by apply, so a
// live journal and a replay of its file reach the same pending entries.
// All fields are guarded by Journal.mu.
type state struct {
	pending map[string]*entry // by FileID
	// bases holds the base of files without a pending entry (SetBase, and
	// Confirm releasing an entry). A pending entry's own Origin/BaseSHA
	// take precedence. In memory only.
	bases map[string]knownBase
	// tombs maps the FileID of a never-uploaded file whose pending entry
	// was dropped by a DELETE while its upload may have been in flight to
	// that DELETE's LSN. A later Confirm of the older state means the store
	// now holds a memory nobody has locally: it becomes a pending delete.
	// Live only (replay has no uploads in flight).
	tombs map[string]uint64
	// lastLSN is the highest LSN assigned (or read from the file).
	lastLSN uint64
	// liveBytes is the sum of len(rec) over pending: the size of a
	// compacted journal minus its header.
	liveBytes int64
	// seal signs the records the state re-encodes (a rebase).
	seal *sealer
}

func newState(seal *sealer) state {
	return state{
		seal:    seal,
		pending: make(map[string]*entry),
		bases:   make(map[string]knownBase),
		tombs:   make(map[string]uint64),
	}
}

// baseOf returns the origin and base sha a new state of fileID is made
// against.
func (s *state) baseOf(fileID string) Base {
	if e := s.pending[fileID]; e != nil {
		return Base{e.Origin, e.BaseSHA}
	}
	return s.bases[fileID].Base
}

// baseLSNOf returns the LSN whose confirmation established fileID's base.
func (s *state) baseLSNOf(fileID string) uint64 {
	if e := s.pending[fileID]; e != nil {
		return e.baseLSN
	}
	return s.bases[fileID].lsn
}

// checkConfirm reports whether a CONFIRM of (fileID, lsn) is consistent with
// the state: a pending entry at or after lsn, whose base was not confirmed
// at lsn or later already (a repeated confirmation).
func (s *state) checkConfirm(fileID string, lsn uint64) error {
	e := s.pending[fileID]
	if e == nil {
		return fmt.Errorf("%w: %s has no pending entry (confirmed lsn %d)", ErrNotPending, fileID, lsn)
	}
	if e.LSN < lsn {
		return fmt.Errorf("%w: %s's pending entry has lsn %d, older than the confirmed lsn %d", ErrNotPending, fileID, e.LSN, lsn)
	}
	if e.baseLSN >= lsn {
		return fmt.Errorf("%w: %s's state as of lsn %d was confirmed already (at lsn %d)", ErrNotPending, fileID, lsn, e.baseLSN)
	}
	return nil
}

// apply changes the state by one record, whose framed bytes are raw (kept by
// the pending entry a PUT or DELETE produces). It fails only for a record a
// live journal could not have written (replay treats that as corruption);
// live callers check first, so for them it cannot fail.
func (s *state) apply(r *record, raw []byte) error {
	if r.fileID == "" {
		return fmt.Errorf("%v record lsn %d with an empty file id", r.typ, r.lsn)
	}
	switch r.typ {
	case recPut:
		// A newer state of a file whose earlier one was handed out keeps
		// the mark: that upload may still be in flight (a create answered
		// after the file was renamed, then replaced, as an editor's
		// atomic saves do), and a delete of the file must then leave a
		// tombstone for its answer.
		prev := s.pending[r.fileID]
		s.setPending(&entry{Entry: Entry{
			State:   filestate.State{FileID: r.fileID, Origin: r.origin, Path: r.path, Content: putContent(raw, len(r.content))},
			BaseSHA: r.baseSHA, LSN: r.lsn,
		}, rec: raw, baseLSN: s.baseLSNOf(r.fileID), handedOut: prev != nil && prev.handedOut})
		delete(s.tombs, r.fileID)
	case recDelete:
		if r.origin == "" {
			if e := s.pending[r.fileID]; e != nil && e.handedOut {
				s.tombs[r.fileID] = r.lsn
			}
			s.dropPending(r.fileID)
			break
		}
		s.setPending(&entry{Entry: Entry{
			State:   filestate.State{FileID: r.fileID, Origin: r.origin, Path: r.path, Deleted: true},
			BaseSHA: r.baseSHA, LSN: r.lsn,
		}, rec: raw, baseLSN: s.baseLSNOf(r.fileID)})
		delete(s.tombs, r.fileID)
	case recConfirm:
		if r.confirmed >= r.lsn {
			return fmt.Errorf("CONFIRM record lsn %d confirms lsn %d, not an earlier record", r.lsn, r.confirmed)
		}
		if err := s.checkConfirm(r.fileID, r.confirmed); err != nil {
			return err
		}
		e := s.pending[r.fileID]
		if e.LSN == r.confirmed {
			s.dropPending(r.fileID)
			if r.memoryID == "" {
				delete(s.bases, r.fileID)
			} else {
				s.bases[r.fileID] = knownBase{Base{r.memoryID, r.sha}, r.confirmed}
			}
			break
		}
		// A newer state is pending: rebase it on what the store holds now.
		if e.Deleted && r.memoryID == "" {
			// The newer state is a delete and the store holds nothing:
			// nothing is left to do.
			s.dropPending(r.fileID)
			break
		}
		// The entry's record must carry the new base for a compacted
		// journal to replay the same, so it is re-encoded.
		ne := &entry{Entry: e.Entry, handedOut: e.handedOut, baseLSN: r.confirmed}
		ne.Origin, ne.BaseSHA = r.memoryID, r.sha
		if r.memoryID == "" {
			ne.BaseSHA = ""
		}
		ne.rec = encodeRecord(ne.record(), s.seal)
		if !ne.Deleted {
			ne.Content = putContent(ne.rec, len(e.Content))
		}
		s.setPending(ne)
	default:
		return fmt.Errorf("unknown record type %d", r.typ)
	}
	// Records copied by a compaction are older than the header's base LSN,
	// which replay applies first; so keep the maximum.
	s.lastLSN = max(s.lastLSN, r.lsn)
	return nil
}

func (s *state) setPending(e *entry) {
	if old := s.pending[e.FileID]; old != nil {
		s.liveBytes -= int64(len(old.rec))
	}
	s.pending[e.FileID] = e
	s.liveBytes += int64(len(e.rec))
}

func (s *state) dropPending(fileID string) {
	if old := s.pending[fileID]; old != nil {
		s.liveBytes -= int64(len(old.rec))
		delete(s.pending, fileID)
	}
}

// record returns the PUT or DELETE record that reproduces e.
func (e *entry) record() *record {
	r := &record{typ: recPut, lsn: e.LSN, fileID: e.FileID, origin: e.Origin, baseSHA: e.BaseSHA, path: e.Path, content: e.Content}
	if e.Deleted {
		r.typ, r.content = recDelete, nil
	}
	return r
}

// sortedPending returns the pending entries in LSN order.
func (s *state) sortedPending() []*entry {
	out := make([]*entry, 0, len(s.pending))
	for _, e := range s.pending {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		switch {
		case a.LSN < b.LSN:
			return -1
		case a.LSN > b.LSN:
			return 1
		}
		return 0
	})
	return out
}
