package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/statedir"
	"github.com/memfs/memfs/store/durable"
)

// This file holds what Open does with a journal that is not this state
// dir's own (refused) or not this session's (held): it moves the file
// aside, never deleting or overwriting it, and starts a fresh journal.

// Directories under a journal directory where journals set aside wait.
const (
	RefusedDir = "refused" // refused/<unix nanoseconds>/journal, with its reason
	HeldDir    = "held"    // held/<session>/<unix nanoseconds>/journal
	// ReasonFile, next to a refused journal, says why it was refused.
	ReasonFile = "reason"
)

// ForeignDirError is a journal directory owned by another user: Open
// neither reads nor writes anything in it.
type ForeignDirError struct {
	Dir  string
	UID  uint32
	EUID int
}

func (e *ForeignDirError) Error() string {
	return fmt.Sprintf("journal directory %s is owned by uid %d, not by this process's user (uid %d): its journal is not replayed; chown the directory or move it away", e.Dir, e.UID, e.EUID)
}

// checkDir checks the journal directory as statedir.CloseDir does: it
// must be a directory owned by the effective user (else a
// *ForeignDirError). loose reports that it was writable by group or
// others; its mode is then cut to 0700.
func checkDir(dir string) (loose bool, err error) {
	perm, err := statedir.CloseDir(dir, "journal directory")
	if fe := (*statedir.ForeignError)(nil); errors.As(err, &fe) {
		return false, &ForeignDirError{Dir: dir, UID: fe.UID, EUID: fe.EUID}
	}
	return perm&0o022 != 0, err
}

// readOwnJournal reads the journal at path without following a symlink.
// reason is set when the file is not one this user alone could have
// written: not a regular file, owned by another user, or writable by
// group or others.
func readOwnJournal(path string) (b []byte, reason string, err error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, "", &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	switch euid := os.Geteuid(); {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, "it is not a regular file (a symlink?)", nil
	case st.Uid != uint32(euid):
		return nil, fmt.Sprintf("it is owned by uid %d, not by this process's user (uid %d)", st.Uid, euid), nil
	case st.Mode&0o022 != 0:
		return nil, fmt.Sprintf("it is writable by other users (mode %o)", st.Mode&0o777), nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err = io.ReadAll(f)
	return b, "", err
}

// refuse moves the journal aside to refused/<time>/journal with its
// reason, logs an error and starts a fresh journal.
func (j *Journal) refuse(reason string) error {
	kept, err := j.moveAside(filepath.Join(j.dir, RefusedDir), reason)
	if err != nil {
		return fmt.Errorf("journal %s is refused (%s) and could not be moved aside: %w; it is left as it is and not replayed", j.path, reason, err)
	}
	j.refused = &Refusal{Reason: reason, Path: j.path, KeptAt: kept}
	j.log.WithFields(logrus.Fields{"reason": reason, "kept_at": kept}).
		Error("JOURNAL REFUSED: it is not this state dir's own, so nothing in it is uploaded; it was moved aside and kept for a human, and the mount starts with a fresh journal (see memfs status)")
	return j.createFresh()
}

// hold moves a journal written in another session aside to
// held/<session>/<time>/journal, where that session's next run on this
// host (or memfs replay with an API key) takes it up, and starts a fresh
// journal.
func (j *Journal) hold(session string, pending int) error {
	if !validName(session) {
		return j.refuse(fmt.Sprintf("written in a session whose id %q can't name a directory", session))
	}
	kept, err := j.moveAside(filepath.Join(j.dir, HeldDir, heldName(session)), "")
	if err != nil {
		return fmt.Errorf("journal %s holds changes of session %q and could not be set aside: %w; it is left as it is and not replayed", j.path, session, err)
	}
	j.held = &Held{Session: session, Path: j.path, KeptAt: kept, Pending: pending}
	j.log.WithFields(logrus.Fields{"written_in_session": session, "pending": pending, "kept_at": kept}).
		Warn("the journal holds changes written in another session: they are never uploaded with this session's credential; set aside, waiting for that session's next run on this host, or memfs replay with an API key")
	return j.createFresh()
}

// heldName is the directory name of a session's held journals ("" is the
// API key's, named "-").
func heldName(session string) string {
	if session == "" {
		return "-"
	}
	return session
}

// moveAside renames the journal into parent/<unix nanoseconds>/journal
// (with a reason file when reason is set), durably, and returns the new
// path.
func (j *Journal) moveAside(parent, reason string) (string, error) {
	target := filepath.Join(parent, strconv.FormatInt(time.Now().UnixNano(), 10))
	for i := 2; ; i++ {
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			break
		}
		target = fmt.Sprintf("%s-%d", target, i)
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return "", err
	}
	if reason != "" {
		if err := durable.WriteFile(filepath.Join(target, ReasonFile), []byte(reason+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	kept := filepath.Join(target, journalFileName)
	if err := os.Rename(j.path, kept); err != nil {
		return "", err
	}
	for _, d := range []string{target, j.dir} {
		if err := durable.SyncDir(d); err != nil {
			return "", err
		}
	}
	return kept, nil
}

// Refused reports the journal Open refused and moved aside (nil if none).
func (j *Journal) Refused() *Refusal {
	if j.refused == nil {
		return nil
	}
	r := *j.refused
	return &r
}

// Held reports the journal of another session Open set aside (nil if
// none).
func (j *Journal) Held() *Held {
	if j.held == nil {
		return nil
	}
	h := *j.held
	return &h
}

// Session is the session the journal's changes were written in: Auth's,
// or, with AnySession, the one the journal found named.
func (j *Journal) Session() string { return j.jctx.session }

// SetAside is a journal set aside in a journal directory, for status.
type SetAside struct {
	Path    string    // the journal file
	Reason  string    // why it was refused ("" for a held journal)
	Session string    // the session a held journal was written in
	Held    bool      // held for its session, not refused
	ModTime time.Time // when it was set aside
}

// ListSetAside lists the refused and held journals kept in a journal
// directory, oldest first. It only reads.
func ListSetAside(dir string) []SetAside {
	var out []SetAside
	refused, _ := filepath.Glob(filepath.Join(dir, RefusedDir, "*", journalFileName))
	for _, p := range refused {
		r, _ := os.ReadFile(filepath.Join(filepath.Dir(p), ReasonFile))
		out = append(out, SetAside{Path: p, Reason: strings.TrimSpace(string(r)), ModTime: setAsideTime(p)})
	}
	held, _ := filepath.Glob(filepath.Join(dir, HeldDir, "*", "*", journalFileName))
	for _, p := range held {
		s := filepath.Base(filepath.Dir(filepath.Dir(p)))
		if s == "-" {
			s = ""
		}
		out = append(out, SetAside{Path: p, Session: s, Held: true, ModTime: setAsideTime(p)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ModTime.Before(out[b].ModTime) })
	return out
}

// setAsideTime is when a journal was set aside: its directory's name.
func setAsideTime(p string) time.Time {
	name, _, _ := strings.Cut(filepath.Base(filepath.Dir(p)), "-")
	ns, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// ErrNotRestored is matched by the error Restore returns when the
// journal directory's own journal still holds pending changes: a held
// journal is taken up only in place of an empty one.
var ErrNotRestored = errors.New("the journal in place still holds pending changes")

// Restore puts the held journal at heldPath (one ListSetAside listed)
// back in place as dir's journal, for its session's next mount or replay
// to take up. It takes dir's lock (ErrLocked when a mount holds it), and
// refuses (ErrNotRestored) when the journal in place holds pending
// changes; one without any is replaced. The move is a rename, made
// durable; the held journal's directory is removed once empty.
func Restore(dir, heldPath string) error {
	if rel, err := filepath.Rel(filepath.Join(dir, HeldDir), heldPath); err != nil || strings.HasPrefix(rel, "..") || strings.Count(rel, "/") != 2 {
		return fmt.Errorf("restore %s: not a held journal of %s", heldPath, dir)
	}
	lk, err := lockDir(dir)
	if err != nil {
		return fmt.Errorf("restore %s: %w", heldPath, err)
	}
	defer lk.release()
	path := filepath.Join(dir, journalFileName)
	if info, err := Inspect(dir); err != nil {
		return fmt.Errorf("restore %s: %w", heldPath, err)
	} else if info.Pending > 0 || info.Lost > 0 || info.Refused != "" {
		return fmt.Errorf("restore %s: %w (%s)", heldPath, ErrNotRestored, path)
	}
	if err := os.Rename(heldPath, path); err != nil {
		return fmt.Errorf("restore %s: %w", heldPath, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("restore %s: %w", heldPath, err)
	}
	// Its <unix ns> directory, now empty, then the session's and held/
	// if that was the last (os.Remove leaves a directory that is not).
	for d := filepath.Dir(heldPath); d != dir; d = filepath.Dir(d) {
		os.Remove(d)
	}
	return nil
}
