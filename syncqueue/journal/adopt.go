package journal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store/durable"
)

// TrustedSuffix is appended to the name of a journal Adopt took up: the
// file is kept, and no longer listed as refused.
const TrustedSuffix = ".trusted"

// Adopt takes up the journal at path — one Open refused, a version 1
// journal, or one from another state dir — on an operator's word that its
// changes are genuine (memfs replay --trust-journal): its pending state is
// read without any authentication check and written, signed with
// opts.Auth (whose Session becomes the journal's; with AnySession, the
// session its CONTEXT record names, if any), as dir's journal, which
// must hold nothing pending (else ErrNotRestored). Damage in it is
// skipped as Open's salvage would. The file at path is kept, renamed to
// path + TrustedSuffix; when path is dir's own journal, it is first moved
// to refused/ like any refused journal. It returns the number of pending
// changes taken up.
func Adopt(path, dir string, opts Options) (int, error) {
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	a := opts.Auth
	lk, err := lockDir(dir)
	if err != nil {
		return 0, fmt.Errorf("take up %s: %w", path, err)
	}
	defer lk.release()
	main := filepath.Join(dir, journalFileName)
	if same, _ := sameFile(path, main); same {
		j := &Journal{dir: dir, path: main}
		kept, err := j.moveAside(filepath.Join(dir, RefusedDir), "taken up with memfs replay --trust-journal")
		if err != nil {
			return 0, fmt.Errorf("take up %s: %w", path, err)
		}
		path = kept
	} else if info, err := Inspect(dir); err != nil {
		return 0, fmt.Errorf("take up %s: %w", path, err)
	} else if info.Pending > 0 || info.Lost > 0 || info.Refused != "" {
		return 0, fmt.Errorf("take up %s: %w (%s)", path, ErrNotRestored, main)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, fmt.Errorf("take up %s: %w", path, err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("take up %s: %w", path, err)
	}
	j := &Journal{dir: dir, path: main, opts: opts}
	j.setContext(a.Session)
	st := newState(j.seal)
	var prev uint64
	res, err := scan(b, scanKeys{trust: true}, func(r *record, _ []byte) error {
		if r.lsn <= prev {
			return fmt.Errorf("%v record lsn %d is not greater than the previous record's %d", r.typ, r.lsn, prev)
		}
		if err := st.apply(r, encodeRecord(r, j.seal)); err != nil {
			return err
		}
		prev = r.lsn
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("take up %s: %w", path, err)
	}
	if res.ctx != nil && res.ctx.storeID != a.StoreID {
		return 0, fmt.Errorf("take up %s: it is the journal of store %s, not of %s", path, res.ctx.storeID, a.StoreID)
	}
	if a.AnySession && res.ctx != nil {
		j.setContext(res.ctx.session) // it stays the journal of the session that wrote it
	}
	img := j.header(max(st.lastLSN, res.baseLSN))
	for _, e := range st.sortedPending() {
		img = append(img, encodeRecord(e.record(), j.seal)...)
	}
	if err := durable.WriteFile(main, img, 0o600); err != nil {
		return 0, fmt.Errorf("take up %s: write %s: %w", path, main, err)
	}
	trusted := path + TrustedSuffix
	if _, err := os.Lstat(trusted); err == nil {
		trusted += "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	if err := os.Rename(path, trusted); err != nil {
		return 0, fmt.Errorf("took up %s, but could not rename it to %s: %w", path, trusted, err)
	}
	return len(st.pending), nil
}

// sameFile reports whether a and b name the same file.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Lstat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Lstat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
