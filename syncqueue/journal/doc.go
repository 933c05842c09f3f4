// Package journal is the durable journal of one mounted store: the local
// changes the store has not confirmed yet.
//
// # Model
//
// Every local file has a stable FileID: the memory id ("mem_...") of a file
// loaded from the store, or a local id ("local-...") of a file created on
// this host. When a changed file is closed (or fsynced) the filesystem calls
// [Journal.Append] with a [Change] holding the file's whole new content;
// an unlink is a Change with Deleted set, and a rename that replaces a
// file is a delete and a put in one Append. The journal coalesces per
// FileID — only the latest state of a file is pending — and remembers,
// with every state, the memory the file derives from (Origin) and the
// content_sha256 that memory had when the local copy last agreed with the
// store (BaseSHA): the precondition of its upload.
//
// The flusher takes [Journal.Pending], uploads each entry, and reports
// success with [Journal.Confirm](fileID, lsn, memoryID, sha, path). If
// nothing newer was recorded for the file meanwhile, the entry is released;
// otherwise the newer entry is rebased on what the store now holds, so its
// own upload carries the right precondition. A file created locally and
// removed before any upload never reaches the store; if its create was
// already in flight, the confirmation turns into a pending delete of the
// memory it created.
//
// Bases of files without pending entries (set by [Journal.SetBase] when the
// filesystem loads a file from the store, and by Confirm) are kept in memory
// only: after a restart the filesystem loads the store again. Every record
// on disk carries the Origin and BaseSHA of the state it produces, so a
// journal replays on its own.
//
// # Durability
//
// Append and Confirm return only after their record was handed to the
// kernel with one write(2) on a file opened O_APPEND — no user-space
// buffering — so a killed process loses nothing that returned. Records reach
// stable storage (fdatasync) when [Journal.Sync] is called (an application's
// fsync) and otherwise within Options.GroupCommit (100 ms by default) of
// being written, by a goroutine the Journal owns.
//
// # Faults
//
// After a failed fdatasync the state of the file's unsynced pages is
// unknown: the kernel may have dropped them, or marked them clean although
// the disk never got them, so retrying the fdatasync and trusting its
// success would silently lose data. The same holds after a failed write
// (other than ENOSPC/EDQUOT, whose partial record is cut off again) or a
// failed cut. The journal never retries the sync, appends to that file
// again, or reads it back: everything pending is in memory, so it writes
// the pending state from memory into a fresh journal.tmp (as a
// compaction writes it), fdatasyncs it, renames it over journal, fsyncs
// the directory and goes on with the new file. It tries at once, then
// every second from the owner goroutine, and at Sync and Close.
//
// Until a fresh file is written the journal is faulted: Append and
// Sync return the *IOError, which wraps the real errno (so a
// close on the mount fails with EIO while the fault lasts, and the file
// keeps its content to be journaled once it is over); confirmations and
// rebases take effect in memory and are written by the recovery;
// Stats.Fault reports the error. A crash while faulted replays the old
// file, as any crash does.
//
// # Directory
//
// One directory per mounted store (Open creates it 0700):
//
//	lock                   flock(LOCK_EX|LOCK_NB) held while open; holds the owner's pid
//	journal                the append-only journal described below
//	journal.tmp            a compaction in progress; removed at Open (the journal is intact)
//	journal.corrupt-<unix> a copy of a damaged journal, kept for a human (see Damage)
//	refused/<unix ns>/     a journal Open refused (see Authentication): journal, reason
//	held/<session>/<unix ns>/journal
//	                       a journal of another session, set aside for it (see Sessions;
//	                       <session> is "-" for changes made with an API key)
//
// # File format (version 2)
//
// All integers are little-endian unless marked uvarint. CRC-32C is the
// Castagnoli CRC-32 (hash/crc32.Castagnoli).
//
// The file starts with a 24-byte header:
//
//	offset size field
//	0      8    magic "MEMFSJNL"
//	8      4    version, uint32 = 2
//	12     8    base LSN, uint64: every LSN this journal assigns from now on
//	            is greater (keeps LSNs monotonic after a compaction
//	            dropped every record)
//	20     4    CRC-32C of bytes 0..19
//
// Records follow back to back, the first a CONTEXT record, the others in
// strictly increasing LSN order:
//
//	offset size  field
//	0      4     length n, uint32: bytes of type + payload (1 ≤ n ≤ 64 MiB)
//	4      4     CRC-32C of bytes 0..3 (the length field alone)
//	8      4     CRC-32C of the n+16 bytes from offset 12 (type, payload, MAC)
//	12     1     type
//	13     n-1   payload
//	12+n   16    MAC: the first 16 bytes of HMAC-SHA256(key, "memfs journal v2" 0x00
//	             || store_id string || identity string || session string
//	             || type || payload), key the state dir's journal key; the
//	             three strings are those of the CONTEXT record (encoded as
//	             payload strings are)
//
// The separate check of the length field means a damaged length is always
// recognised as damage: it can never make the reader take the rest of the
// file for one record that "runs past EOF" and cut it off as a torn tail.
//
// A payload is a sequence of fields; uvarint is encoding/binary's unsigned
// varint and string/bytes are a uvarint byte count followed by the bytes.
// Every payload begins with the record's own LSN. A payload must be
// consumed exactly: bytes left over are damage.
//
//	type 1 PUT      lsn uvarint, file_id string, origin string,
//	                base_sha string, path string, content bytes
//	                The file's whole new content. content comes last so a
//	                pending entry can keep its record bytes and slice the
//	                content out of them.
//	type 2 DELETE   lsn uvarint, file_id string, origin string,
//	                base_sha string, path string
//	                The file was removed. With origin "" (never uploaded) it
//	                only drops the file's pending entry.
//	type 3 CONFIRM  lsn uvarint, file_id string, confirmed_lsn uvarint,
//	                memory_id string, sha string, path string
//	                The store holds the file's state as of confirmed_lsn as
//	                memory_id with content sha at path (memory_id "" for a
//	                delete). Releases the pending entry when its LSN is
//	                confirmed_lsn, rebases it (origin = memory_id, base_sha =
//	                sha) when it is newer.
//	type 4 CONTEXT  lsn uvarint = 0, store_id string, identity string,
//	                session string
//	                Whose journal this is: the store, the state dir (its
//	                identity, a random id created once with the key) and
//	                the session whose credential uploads the changes (""
//	                for an API key). Only as the first record; written by
//	                every writer of a header (creation, compaction,
//	                recovery, salvage).
//
// Replaying the records in order from an empty state yields the pending
// entries; Origin and BaseSHA come from the records themselves.
//
// Version 1 was the same without the CONTEXT record and the MAC (the CRC
// covered type + payload); testdata/journal-v1 is one.
//
// # Authentication
//
// A journal's changes are uploaded with the credential of whoever opens it,
// and the store credits them to that credential; so Open takes up only a
// journal that this state dir's user wrote, for this store (Options.Auth).
// It REFUSES a journal when:
//
//   - the file is not a regular file owned by this process's effective
//     user, or is writable by group or others; or its directory was
//     writable by group or others (Open closes it to them). A directory
//     owned by another user is not used at all: Open fails with a
//     *ForeignDirError and touches nothing;
//   - it is a version 1 journal: it carries no MAC, so nothing shows who
//     wrote it. memfs replay --trust-journal is how an operator who has
//     checked one takes it up;
//   - its CONTEXT record names another state dir identity or another store;
//   - any record (CONTEXT included) passes both its CRCs and fails its MAC.
//     Such a record was written without the key — forged, or spliced in
//     from another journal — and is not damage to salvage around: the
//     whole journal is refused, the records before it included.
//
// A refused journal is moved, byte for byte, to refused/<unix ns>/journal
// with a reason file (never deleted, never overwritten); Open logs an
// error, starts a fresh journal, and Journal.Refused reports it; memfs
// status lists it until a human removes it. Nothing in it is uploaded.
//
// The rule that tells damage from forgery: the CRCs are checked first,
// over the MAC too, so a flipped byte anywhere in a record — payload or
// MAC — fails its CRC, and the damage rules below apply to it. Only a
// record whose CRCs pass is checked against its MAC, and then a mismatch
// is forgery. A damaged CONTEXT record is damage: the records are then
// checked as written in the opener's session, and refused as above when
// they were not.
//
// # Sessions
//
// A journal holds the changes of one session (the CONTEXT record's; ""
// when the credential is an API key), and its MACs bind every record to
// it. Open with Auth.Session Y finding pending changes of session X sets
// the journal aside, untouched, at held/<X>/<unix ns>/journal and starts a
// fresh one: X's changes are never uploaded with Y's credential, which
// would credit them to Y. Journal.Held reports it. [Restore] puts a held
// journal back in place of one with nothing pending: the sync engine does
// that before it opens the journal for X again, so X's next run on this
// host uploads them with X's token. memfs replay (with its API key as the
// actor, and saying so) opens with Auth.AnySession, which takes up a
// journal of any session and keeps writing it as that session's. A
// journal of another session with nothing pending is simply replaced.
//
// # Damage
//
// A crash in the middle of an append leaves a torn tail: a prefix of the last
// record, possibly followed by zeros (the file size reached the disk, the
// data did not). Open cuts a torn tail off (truncate, fsync, one warning
// with the offset and byte count). Precisely, reading a record at offset o is
// a torn tail when:
//
//   - fewer than 12 bytes remain; or
//   - the length check fails and every byte from o+12 to EOF is zero (this
//     includes a zeroed tail); or
//   - the length check passes and the record runs past EOF; or
//   - the record is complete, its CRC fails, and every byte after it is zero.
//
// Anything else that fails a check — a failed length check or CRC followed
// by more non-zero data, a length over 64 MiB, a CRC-valid record that does
// not parse, an unknown type, an LSN not greater than the previous one, a
// CONFIRM of a state that was never recorded, a damaged file header — is
// damage, and Open salvages around it rather than give up every record
// for one bad byte. Records are whole-file states carrying their own base
// (the upload's precondition), so replaying every intact one is safe: a
// stale state becomes a conflict in the store's favour, never an
// overwrite. Precisely:
//
//   - the scan skips the damaged bytes and resynchronises on the next
//     offset where a whole record passes both CRCs and decodes (a false
//     match is a 2^-64 event), then goes on; a record the replay refuses
//     (an impossible LSN or confirmation) is skipped the same way;
//   - every record that passed is replayed, before and after the damage;
//   - a copy of the damaged file is kept, byte for byte, as
//     journal.corrupt-<unix time> (written durably before anything else
//     changes), the journal is rewritten as the salvaged state, and one
//     error names the byte ranges lost and the copy; Journal.Damage
//     reports the same, and memfs status lists the copies until a human
//     removes them.
//
// A journal of zero bytes (or only zeros) lost everything by definition
// (the journal is created with its header by tmp, fsync, rename, so a
// crash can't leave one): it is reported exactly like damage. A journal
// whose header names a version this code does not know is left in place
// and Open returns ErrUnsupportedVersion. testdata/journal-v2 is a journal
// written by version 2, decoded by every later version's tests.
//
// # Space
//
// A full disk must not wedge the journal: the records that shrink it (the
// store's confirmations) and the compaction that frees its history both
// need room to be written. So:
//
//   - Append writes a change only if, after it, the directory still has
//     room for one compaction of the pending state plus 64 KiB (statfs);
//     when it has not, it compacts first if the file's history is what
//     takes the room, and otherwise refuses with ErrNoSpace (which also
//     matches syscall.ENOSPC), writing nothing;
//   - a confirmation, a rebase, or the delete of a memory nobody has (the
//     sync engine's bookkeeping) that can't be written still takes effect
//     in memory: losing one loses no local content, because a replay
//     re-uploads a state the store already holds, and the upload's
//     precondition recognises it. The state is then unsaved, and the
//     owner goroutine compacts (which writes the state as it is) every
//     second until that works;
//   - with nothing pending, a compaction that can't write journal.tmp cuts
//     the journal back to its header in place (ftruncate needs no room).
//
// # Compaction
//
// The journal is bounded by the pending state, not by history: when the file
// exceeds max(Options.CompactMinBytes, 2 × the bytes of the pending entries'
// records) — or holds any record while nothing is pending — the owner
// goroutine rewrites it as the header and CONTEXT record plus one record
// per pending entry (the
// record that produced it, or a re-encoded one after a rebase), in LSN
// order: journal.tmp is written and fsynced without holding the lock, then,
// under the lock, records appended meanwhile are copied over, journal.tmp is
// fsynced again, renamed over journal, and the directory is fsynced. A crash
// at any step leaves either the old or the new journal complete under the
// name journal. Open compacts too, after replay, when it pays.
//
// # Concurrency
//
// A Journal is safe for concurrent use. Journal.mu guards all state. It is
// held across write(2) (microseconds; keeps file order = LSN order and lets
// a failed append be cut off again), across the short second phase of a
// compaction (copy of the records appended during the first phase, one
// fsync, rename, directory fsync), across a recovery after a fault (a
// rare event: it writes the whole pending state), and while logging an
// error; it is not held across the group-commit or Sync fdatasync, nor
// the first compaction phase. Journal.compactMu serialises compactions
// (the owner goroutine's, Open's, and Append's when it needs room) and
// recoveries (both write journal.tmp); lock order:
// compactMu, then mu, never the reverse. Callers must not call the Journal
// from a logrus hook. The directory's flock is a separate, process-level
// lock taken first in Open and released last in Close.
package journal
