package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Info is what Inspect reads from a journal directory.
type Info struct {
	Dir       string
	Pending   int       // pending entries (deletes included)
	Deletes   int       // pending deletes
	FileBytes int64     // size of the journal file
	ModTime   time.Time // of the journal file
	// LockedBy is the pid of the process that holds the directory (a live
	// mount), 0 when none does.
	LockedBy int
	// Damaged lists the copies of damaged journals kept in the directory
	// (journal.corrupt-*), oldest first.
	Damaged []string
	// Lost is the bytes the next Open would have to skip (damage found in
	// the journal as it is now, not yet salvaged).
	Lost int64
	// Session is the session the journal names ("" for an API key's, or
	// when its CONTEXT record is damaged); StoreID the store.
	Session, StoreID string
	// Refused is why the next Open would refuse the journal when that
	// shows without its key (a version 1 journal), "" otherwise. Its
	// authentication is checked by Open only.
	Refused string
	// SetAside lists the journals kept in refused/ and held/.
	SetAside []SetAside
}

// Inspect reads a journal directory without changing anything in it: no
// lock is taken (the holder, if any, is only named), nothing is repaired
// or compacted. It is what memfs status uses. A directory without a
// journal gives an Info with only Dir, LockedBy and Damaged set.
func Inspect(dir string) (Info, error) {
	info := Info{Dir: dir, LockedBy: lockHolder(dir), SetAside: ListSetAside(dir)}
	if names, err := filepath.Glob(filepath.Join(dir, DamagedPrefix+"*")); err == nil {
		sort.Strings(names)
		info.Damaged = names
	}
	path := filepath.Join(dir, journalFileName)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return info, nil
	}
	if err != nil {
		return info, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	info.FileBytes, info.ModTime = int64(len(b)), fi.ModTime()
	st := newState(nil)
	var prev uint64
	res, err := scan(b, scanKeys{}, func(r *record, raw []byte) error {
		if r.lsn <= prev {
			return errors.New("lsn out of order")
		}
		if err := st.apply(r, raw); err != nil {
			return err
		}
		prev = r.lsn
		return nil
	})
	var refused *refusedError
	if errors.As(err, &refused) {
		info.Refused = refused.reason
		return info, nil
	}
	if err != nil {
		return info, err
	}
	if res.ctx != nil {
		info.Session, info.StoreID = res.ctx.session, res.ctx.storeID
	}
	for _, l := range res.lost {
		info.Lost += l.To - l.From
	}
	for _, e := range st.pending {
		info.Pending++
		if e.Deleted {
			info.Deletes++
		}
	}
	return info, nil
}

// lockHolder returns the pid holding dir's lock, 0 if nobody holds it. It
// probes with a shared, non-blocking flock on its own descriptor, released
// at once, and never writes the lock file.
func lockHolder(dir string) int {
	path := filepath.Join(dir, lockFileName)
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return 0
	}
	b, _ := os.ReadFile(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return -1 // held, by a process that has not written its pid yet
	}
	return pid
}
