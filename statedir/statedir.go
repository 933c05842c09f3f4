// Package statedir prepares the state directory of memfs (journals,
// conflict logs, mount records, status sockets) and holds the two things
// that make its journals this state dir's own: an identity and a journal
// key.
//
// # Ownership
//
// A journal replayed from the state dir is uploaded with the credential of
// whoever mounts the store next, so nobody but the state dir's user may be
// able to put one there. [Prepare] creates the state dir and the
// directories memfs keeps in it with mode 0700, refuses one owned by
// another user (a *ForeignError: memfs exits 2), and takes the group and
// other bits off one that has them, with one warning. The journal package
// checks each journal file and its directory again when it opens one.
//
// # Identity and key
//
//	identity     16 random bytes, hex: names this state dir in every journal
//	journal.key  32 random bytes: the HMAC-SHA256 key of its journals
//
// Both are created once, mode 0600, by writing a temporary file, fsyncing
// it and hard-linking it to its name: the link fails if the name exists,
// so two processes starting at once agree on one, and a reader never sees
// a half-written file. They are never overwritten: a file that is short,
// unreadable, or not owned by this user is an error, never a reason to
// make a new one (that would disown every journal written so far).
package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store/durable"
)

// Subdirs are the directories memfs keeps in a state dir: Prepare checks
// them with the state dir itself.
var Subdirs = []string{"stores", "mounts", "run", "conflicts", "work", "log"}

// File names in the state dir.
const (
	IdentityFile = "identity"
	KeyFile      = "journal.key"
	// KeyLen is the length of the journal key.
	KeyLen = 32
)

// ForeignError is a state dir (or a directory in it) owned by a user other
// than this process's effective user: memfs refuses to use it.
type ForeignError struct {
	Path string
	UID  uint32 // its owner
	EUID int    // this process's effective uid
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("the state dir %s is owned by uid %d, not by this process's user (uid %d): another user could plant journals in it; give memfs a state dir of its own (--state-dir) or chown it", e.Path, e.UID, e.EUID)
}

// Prepare creates dir (and its parents) with mode 0700 if it does not
// exist, and checks dir and the Subdirs that exist in it: each must be a
// directory owned by the effective user (else a *ForeignError); group or
// other permission bits are removed, with one warning for them all.
func Prepare(dir string, log logrus.FieldLogger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var fixed []string
	for _, p := range append([]string{dir}, subPaths(dir)...) {
		ok, err := checkDir(p)
		if errors.Is(err, fs.ErrNotExist) && p != dir {
			continue
		}
		if err != nil {
			return err
		}
		if !ok {
			fixed = append(fixed, p)
		}
	}
	if len(fixed) > 0 && log != nil {
		log.WithField("dirs", strings.Join(fixed, ",")).Warn("the state dir was open to other users (group or other permission bits): removed them; it is 0700 now")
	}
	return nil
}

func subPaths(dir string) []string {
	out := make([]string, len(Subdirs))
	for i, s := range Subdirs {
		out[i] = filepath.Join(dir, s)
	}
	return out
}

// checkDir checks one directory of the state dir (CloseDir); ok is false
// when group/other bits had to be removed.
func checkDir(p string) (ok bool, err error) {
	perm, err := CloseDir(p, "the state dir path")
	return err == nil && perm&0o077 == 0, err
}

// CloseDir checks that p is a directory owned by the effective user (a
// *ForeignError if another user owns it, which is then left as it is) and
// takes the group and other bits off its mode. It returns the permission
// bits p had. what names p in errors ("the state dir path", "journal
// directory"). The state dir and each journal directory are checked so.
func CloseDir(p, what string) (perm uint32, err error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return 0, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("%s %s is not a directory", what, p)
	}
	if euid := os.Geteuid(); st.Uid != uint32(euid) {
		return 0, &ForeignError{Path: p, UID: st.Uid, EUID: euid}
	}
	perm = st.Mode & 0o777
	if perm&0o077 != 0 {
		if err := os.Chmod(p, os.FileMode(perm&0o700)); err != nil {
			return perm, fmt.Errorf("remove the group and other permissions of %s %s: %w", what, p, err)
		}
	}
	return perm, nil
}

// Keys are a state dir's identity and journal key.
type Keys struct {
	Identity string
	Key      []byte
}

// LoadKeys returns the identity and journal key of the state dir dir,
// creating each the first time (see the package doc).
func LoadKeys(dir string) (Keys, error) {
	id, err := loadOrCreate(filepath.Join(dir, IdentityFile), func() []byte {
		return []byte(hex.EncodeToString(random(16)) + "\n")
	})
	if err != nil {
		return Keys{}, err
	}
	identity := strings.TrimSpace(string(id))
	if len(identity) != 32 {
		return Keys{}, fmt.Errorf("the state dir identity %s is damaged (%d characters, want 32); it is never replaced by memfs: move it away only if no journal in the state dir matters", filepath.Join(dir, IdentityFile), len(identity))
	}
	key, err := loadOrCreate(filepath.Join(dir, KeyFile), func() []byte { return random(KeyLen) })
	if err != nil {
		return Keys{}, err
	}
	if len(key) != KeyLen {
		return Keys{}, fmt.Errorf("the journal key %s is damaged (%d bytes, want %d); it is never replaced by memfs: the journals it signed can't be replayed without it", filepath.Join(dir, KeyFile), len(key), KeyLen)
	}
	return Keys{Identity: identity, Key: key}, nil
}

// loadOrCreate reads path, first creating it with gen's bytes if it does
// not exist (tmp, fsync, link: exclusive and never half-written).
func loadOrCreate(path string, gen func() []byte) ([]byte, error) {
	for range 2 {
		b, err := readOwn(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return b, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		tmp := fmt.Sprintf("%s.tmp-%d-%x", path, os.Getpid(), random(8))
		if err := durable.WriteFile(tmp, gen(), 0o600); err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		err = os.Link(tmp, path)
		os.Remove(tmp)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if err := durable.SyncDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
	}
	return readOwn(path)
}

// readOwn reads a secret file that must be a regular file of this user's,
// closed to group and others.
func readOwn(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s is not a regular file", path)
	case st.Uid != uint32(os.Geteuid()):
		return nil, fmt.Errorf("%s is owned by uid %d, not by this process's user (uid %d); it is not used", path, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return nil, fmt.Errorf("%s is readable or writable by other users (mode %o): it can't be trusted; memfs never replaces it", path, st.Mode&0o777)
	}
	b := make([]byte, 256)
	n, err := f.Read(b)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b[:n], nil
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return b
}
