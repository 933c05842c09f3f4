package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// writeWith writes a journal in a fresh directory with auth a (a real
// Open, Put and Close) and returns the directory and the file's bytes.
func writeWith(t *testing.T, a Auth, contents ...string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.Auth = a
	j := open(t, dir, opts)
	for i, c := range contents {
		put(t, j, "f"+string(rune('a'+i)), "/"+c+".md", c)
	}
	closeJ(t, j)
	b, err := os.ReadFile(journalPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return dir, b
}

// openRefused opens dir with testAuth and checks the journal was refused
// with a reason containing want, kept byte for byte as data, logged, and
// replaced by a fresh journal with nothing pending.
func openRefused(t *testing.T, dir string, data []byte, want string) *Refusal {
	t.Helper()
	opts, hook := testOpts()
	j := open(t, dir, opts)
	r := j.Refused()
	if r == nil || !strings.Contains(r.Reason, want) {
		t.Fatalf("Refused() = %+v, want a reason with %q", r, want)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("pending after a refusal: %+v", p)
	}
	if got, err := os.ReadFile(r.KeptAt); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the refused journal was not kept byte for byte at %q: %v", r.KeptAt, err)
	}
	if !strings.HasPrefix(r.KeptAt, filepath.Join(dir, RefusedDir)+"/") {
		t.Fatalf("kept at %s, not under %s", r.KeptAt, RefusedDir)
	}
	if !hasLog(hook, logrus.ErrorLevel, "JOURNAL REFUSED") {
		t.Fatal("no error logged")
	}
	sa := ListSetAside(dir)
	if len(sa) != 1 || sa[0].Path != r.KeptAt || sa[0].Held || !strings.Contains(sa[0].Reason, want) {
		t.Fatalf("ListSetAside = %+v", sa)
	}
	// The fresh journal is a sound one of this state dir.
	put(t, j, "new", "/new.md", "new")
	closeJ(t, j)
	j = open(t, dir, opts)
	if j.Refused() != nil || len(j.Pending()) != 1 {
		t.Fatalf("after reopening: refused %+v, pending %+v", j.Refused(), j.Pending())
	}
	closeJ(t, j)
	return r
}

// A record re-encoded with a valid CRC but without the key (here: signed
// by another key, and one with its MAC zeroed) is forged: the whole
// journal is refused, the intact records before it included.
func TestForgedRecordRefusesTheJournal(t *testing.T) {
	_, data := writeWith(t, testAuth, "genuine")
	other := testAuth
	other.Key = bytes.Repeat([]byte{0x11}, 32)
	forgers := map[string]*sealer{
		"another key": newSealer(other.Key, testAuth.StoreID, testAuth.Identity, testAuth.Session),
		"no key":      nil, // a zero MAC
	}
	for name, s := range forgers {
		t.Run(name, func(t *testing.T) {
			forged := append(bytes.Clone(data), encodeRecord(&record{typ: recPut, lsn: 99, fileID: "evil", path: "/evil.md", content: []byte("forged")}, s)...)
			dir := withJournal(t, forged)
			openRefused(t, dir, forged, "fails its authentication")
		})
	}
	// The same holds for a genuine record whose payload was changed and
	// its CRCs recomputed.
	t.Run("edited record", func(t *testing.T) {
		edited := bytes.Clone(data)
		i := bytes.LastIndex(edited, []byte("genuine"))
		copy(edited[i:], "GENUINE")
		off := int(testEmptyLen)
		seal(edited[off:])
		openRefused(t, withJournal(t, edited), edited, "fails its authentication")
	})
}

// A journal written with another state dir's identity and key (a scratch
// state dir) is refused, as is one signed with this key but naming
// another identity.
func TestJournalOfAnotherStateDirIsRefused(t *testing.T) {
	scratch := Auth{Key: bytes.Repeat([]byte{0x22}, 32), Identity: "ffffffffffffffffffffffffffffffff", StoreID: testAuth.StoreID}
	_, data := writeWith(t, scratch, "planted")
	openRefused(t, withJournal(t, data), data, "another state dir")

	sameKey := testAuth
	sameKey.Identity = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	_, data = writeWith(t, sameKey, "planted")
	openRefused(t, withJournal(t, data), data, "another state dir")
}

func TestJournalOfAnotherStoreIsRefused(t *testing.T) {
	other := testAuth
	other.StoreID = "memstore_other"
	_, data := writeWith(t, other, "elsewhere")
	openRefused(t, withJournal(t, data), data, "another store (memstore_other)")
}

// A journal file another user owns, or one others may write, or a
// symlink, is refused; so is one in a directory others could write (the
// directory is closed to them). A directory another user owns is not
// used at all.
func TestJournalOthersCouldWriteIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	_, data := writeWith(t, testAuth, "mine")
	t.Run("owned by another user", func(t *testing.T) {
		dir := withJournal(t, data)
		if err := os.Chown(journalPath(dir), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		openRefused(t, dir, data, "owned by uid 65534")
	})
	t.Run("group-writable", func(t *testing.T) {
		dir := withJournal(t, data)
		if err := os.Chmod(journalPath(dir), 0o620); err != nil {
			t.Fatal(err)
		}
		openRefused(t, dir, data, "writable by other users")
	})
	t.Run("symlink", func(t *testing.T) {
		src := withJournal(t, data)
		dir := t.TempDir()
		if err := os.Symlink(journalPath(src), journalPath(dir)); err != nil {
			t.Fatal(err)
		}
		opts, _ := testOpts()
		j := open(t, dir, opts)
		if r := j.Refused(); r == nil || !strings.Contains(r.Reason, "not a regular file") {
			t.Fatalf("Refused() = %+v", r)
		}
		if got, _ := os.ReadFile(journalPath(src)); !bytes.Equal(got, data) {
			t.Fatal("the symlink's target was changed")
		}
	})
	t.Run("directory others can write", func(t *testing.T) {
		dir := withJournal(t, data)
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		openRefused(t, dir, data, "its directory was writable by other users")
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Fatalf("directory mode %o after Open, want 700", fi.Mode().Perm())
		}
	})
	t.Run("directory of another user", func(t *testing.T) {
		dir := withJournal(t, data)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		opts, _ := testOpts()
		_, err := Open(dir, opts)
		var fe *ForeignDirError
		if !errors.As(err, &fe) || fe.UID != 65534 {
			t.Fatalf("Open = %v, want a *ForeignDirError", err)
		}
		if got, _ := os.ReadFile(journalPath(dir)); !bytes.Equal(got, data) {
			t.Fatal("the journal in a foreign directory was touched")
		}
	})
}

// A flipped byte in a record's MAC fails the record's CRC first: damage,
// salvaged as ever, not a forgery.
func TestFlippedMACByteIsDamage(t *testing.T) {
	data, offs, _ := threeRecords(t)
	damaged := bytes.Clone(data)
	damaged[offs[1]-1] ^= 0x80 // the last byte of the first record: its MAC
	j := open(t, withJournal(t, damaged), func() Options { o, _ := testOpts(); return o }())
	if r := j.Refused(); r != nil {
		t.Fatalf("a flipped MAC byte refused the journal: %+v", r)
	}
	if d := j.Damage(); d == nil || d.Lost[0].From != offs[0] {
		t.Fatalf("Damage() = %+v, want lost bytes from %d", d, offs[0])
	}
	if got := pendingContents(j); got["b"] != "b version one" || len(got) != 2 {
		t.Fatalf("pending after the salvage: %v", got)
	}
}

// A damaged CONTEXT record is damage: the records are checked as written
// in the session of whoever opens the journal, and salvaged when they
// pass; when they were written in another session they fail, and the
// journal is refused and kept, never taken for this session's.
func TestDamagedContextRecord(t *testing.T) {
	_, data := writeWith(t, testAuth, "one", "two")
	damaged := bytes.Clone(data)
	damaged[headerLen+14] ^= 0x01
	j := open(t, withJournal(t, damaged), func() Options { o, _ := testOpts(); return o }())
	if d := j.Damage(); d == nil || d.Lost[0].From != headerLen {
		t.Fatalf("Damage() = %+v", d)
	}
	if got := pendingContents(j); len(got) != 2 {
		t.Fatalf("pending after the salvage: %v", got)
	}
	closeJ(t, j)

	x := testAuth
	x.Session = "sess_x"
	_, data = writeWith(t, x, "one")
	damaged = bytes.Clone(data)
	damaged[headerLen+14] ^= 0x01
	openRefused(t, withJournal(t, damaged), damaged, `session ""`)
}

// A journal with changes written in another session is set aside for
// that session, untouched; the opener starts fresh. With AnySession it
// is taken up, and what is written to it stays that session's.
func TestJournalOfAnotherSessionIsHeld(t *testing.T) {
	x := testAuth
	x.Session = "sess_x"
	_, data := writeWith(t, x, "by x")

	dir := withJournal(t, data)
	y := testAuth
	y.Session = "sess_y"
	opts, hook := testOpts()
	opts.Auth = y
	j := open(t, dir, opts)
	h := j.Held()
	if h == nil || h.Session != "sess_x" || h.Pending != 1 || j.Refused() != nil {
		t.Fatalf("Held() = %+v, Refused() = %+v", h, j.Refused())
	}
	if len(j.Pending()) != 0 || j.Session() != "sess_y" {
		t.Fatalf("pending %+v, session %q", j.Pending(), j.Session())
	}
	if got, _ := os.ReadFile(h.KeptAt); !bytes.Equal(got, data) || !strings.HasPrefix(h.KeptAt, filepath.Join(dir, HeldDir, "sess_x")+"/") {
		t.Fatalf("held journal at %s not kept as it was", h.KeptAt)
	}
	if !hasLog(hook, logrus.WarnLevel, "written in another session") {
		t.Fatal("no warning logged")
	}
	if sa := ListSetAside(dir); len(sa) != 1 || !sa[0].Held || sa[0].Session != "sess_x" {
		t.Fatalf("ListSetAside = %+v", sa)
	}
	closeJ(t, j)

	// Taken up with AnySession.
	dir = withJournal(t, data)
	any := testAuth
	any.AnySession = true
	opts.Auth = any
	j = open(t, dir, opts)
	if j.Held() != nil || j.Session() != "sess_x" || len(j.Pending()) != 1 {
		t.Fatalf("AnySession: held %+v, session %q, pending %+v", j.Held(), j.Session(), j.Pending())
	}
	put(t, j, "more", "/more.md", "more")
	closeJ(t, j)
	opts.Auth = x
	j = open(t, dir, opts)
	if j.Held() != nil || j.Refused() != nil || len(j.Pending()) != 2 {
		t.Fatalf("reopened as sess_x: held %+v, refused %+v, pending %+v", j.Held(), j.Refused(), j.Pending())
	}
}

// Adopt takes up a refused journal on an operator's word: a version 1
// journal, and one of another state dir, become this state dir's, with
// their pending state; the source is kept, renamed.
func TestAdoptTakesUpARefusedJournal(t *testing.T) {
	v1, err := os.ReadFile(fixtureV1)
	if err != nil {
		t.Fatal(err)
	}
	dir := withJournal(t, v1)
	opts, _ := testOpts()
	n, err := Adopt(journalPath(dir), dir, opts)
	if err != nil || n != 5 {
		t.Fatalf("Adopt of the version 1 journal in place = %d, %v; want 5 changes", n, err)
	}
	j := open(t, dir, opts)
	if j.Refused() != nil || len(j.Pending()) != 5 {
		t.Fatalf("after Adopt: refused %+v, pending %d", j.Refused(), len(j.Pending()))
	}
	if got := pendingContents(j); got["mem_a"] != "a2\n" || got["local-4"] != "uploaded, then changed" {
		t.Fatalf("pending after Adopt: %v", got)
	}
	closeJ(t, j)
	kept, _ := filepath.Glob(filepath.Join(dir, RefusedDir, "*", journalFileName+TrustedSuffix))
	if len(kept) != 1 {
		t.Fatalf("the version 1 journal is not kept: %v", kept)
	}
	if got, _ := os.ReadFile(kept[0]); !bytes.Equal(got, v1) {
		t.Fatal("the kept version 1 journal was changed")
	}
	if sa := ListSetAside(dir); len(sa) != 0 {
		t.Fatalf("still listed as set aside: %+v", sa)
	}

	// One refused as another state dir's, taken up by its path.
	scratch := Auth{Key: bytes.Repeat([]byte{0x22}, 32), Identity: "ffffffffffffffffffffffffffffffff", StoreID: testAuth.StoreID}
	_, data := writeWith(t, scratch, "from elsewhere")
	dir = withJournal(t, data)
	r := openRefused(t, dir, data, "another state dir")
	j = open(t, dir, opts)
	if len(j.Pending()) != 1 {
		t.Fatalf("pending before Adopt: %+v", j.Pending())
	}
	// Adopt refuses while the journal in place holds changes.
	if _, err := Adopt(r.KeptAt, dir, opts); !errors.Is(err, ErrLocked) {
		t.Fatalf("Adopt while open: %v, want ErrLocked", err)
	}
	closeJ(t, j)
	if _, err := Adopt(r.KeptAt, dir, opts); !errors.Is(err, ErrNotRestored) {
		t.Fatalf("Adopt over pending changes: %v, want ErrNotRestored", err)
	}
	j = open(t, dir, opts)
	for _, e := range j.Pending() {
		if err := j.Confirm(e.FileID, e.LSN, "mem_new", "sha", e.Path); err != nil {
			t.Fatal(err)
		}
	}
	closeJ(t, j)
	if n, err := Adopt(r.KeptAt, dir, opts); err != nil || n != 1 {
		t.Fatalf("Adopt = %d, %v", n, err)
	}
	j = open(t, dir, opts)
	if got := pendingContents(j); got["fa"] != "from elsewhere" || j.Refused() != nil {
		t.Fatalf("after Adopt: pending %v, refused %+v", got, j.Refused())
	}
}

// A held journal goes back in place for its session, in place of an
// empty journal only.
func TestRestoreHeldJournal(t *testing.T) {
	x := testAuth
	x.Session = "sess_x"
	_, data := writeWith(t, x, "by x")
	dir := withJournal(t, data)
	y := testAuth
	y.Session = "sess_y"
	opts, _ := testOpts()
	opts.Auth = y
	j := open(t, dir, opts)
	h := j.Held()
	put(t, j, "fy", "/y.md", "by y")
	if err := Restore(dir, h.KeptAt); !errors.Is(err, ErrLocked) {
		t.Fatalf("Restore while Y's journal is open: %v, want ErrLocked", err)
	}
	closeJ(t, j)
	if err := Restore(dir, h.KeptAt); !errors.Is(err, ErrNotRestored) {
		t.Fatalf("Restore over Y's pending change: %v, want ErrNotRestored", err)
	}
	if err := Restore(dir, journalPath(dir)); err == nil {
		t.Fatal("Restore of a path that is not a held journal worked")
	}
	j = open(t, dir, opts)
	for _, e := range j.Pending() {
		confirm(t, j, e.FileID, e.LSN, "mem_y", "sha", e.Path)
	}
	closeJ(t, j)
	if err := Restore(dir, h.KeptAt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, HeldDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the held directory is left: %v", err)
	}
	opts.Auth = x
	j = open(t, dir, opts)
	if got := pendingContents(j); got["fa"] != "by x" || len(got) != 1 || j.Held() != nil {
		t.Fatalf("X's journal after Restore: pending %v, held %+v", got, j.Held())
	}
}

// A symlink planted as the lock file is not followed: Open fails and its
// target is untouched.
func TestLockFileSymlinkIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, lockFileName)); err != nil {
		t.Fatal(err)
	}
	opts, _ := testOpts()
	if _, err := Open(dir, opts); err == nil {
		t.Fatal("Open with a symlinked lock file worked")
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Fatalf("the lock file's symlink target was changed to %q", b)
	}
}

// A journal cut off before or within its CONTEXT record is damage, not a
// crash of Open.
func TestJournalCutInItsContextRecord(t *testing.T) {
	_, data := writeWith(t, testAuth, "one")
	for _, n := range []int{headerLen, headerLen + 5, int(testEmptyLen) - 1} {
		dir := withJournal(t, data[:n])
		opts, hook := testOpts()
		j := open(t, dir, opts)
		if d := j.Damage(); d == nil || j.Refused() != nil || len(j.Pending()) != 0 {
			t.Fatalf("cut at %d: damage %+v, refused %+v, pending %+v", n, d, j.Refused(), j.Pending())
		}
		if !hasLog(hook, logrus.ErrorLevel, "JOURNAL DAMAGED") {
			t.Fatalf("cut at %d: nothing logged", n)
		}
		closeJ(t, j)
		j = open(t, dir, opts)
		if j.Damage() != nil {
			t.Fatalf("cut at %d: the salvaged journal is damaged again", n)
		}
		closeJ(t, j)
	}
}
