package dirmode

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The baseline (docs/formats.md, "The directory baseline") is what each
// file of the folder was when the worker last wrote it or last took its
// change: its file id, sha256, size, mtime, ctime and inode. It is kept in
// the state dir, so that a start after a kill -9 or a power loss can tell
// what was edited while no worker ran (the file differs from its record),
// what was removed (a record with no file) and what the store changed
// meanwhile (the record agrees with the file, not with the store).
//
// It is written whole, to a temporary file, fsynced, then renamed over the
// last one; before that the folder's filesystem is synced (syncfs), so a
// record never names content a power loss could take back. Its first line
// holds the sha256 of the rest: a damaged baseline is set aside and
// treated as none (every file that differs from the store is then a
// conflict: the store wins, the local content goes to the conflict log).

// rec is one file as last written or seen.
type rec struct {
	FileID string `json:"id"`
	Path   string `json:"path"`
	SHA    string `json:"sha256"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtime_ns"`
	Ctime  int64  `json:"ctime_ns"`
	Ino    uint64 `json:"ino"`
	Dev    uint64 `json:"dev"`
}

// recOf is the record of a file with content sha and stat st.
func recOf(fileID, p, sha string, st unix.Stat_t) rec {
	return rec{FileID: fileID, Path: p, SHA: sha, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino, Dev: uint64(st.Dev)}
}

// matches says whether st (a regular file's) shows the file as recorded.
func (r rec) matches(st fileStat) bool {
	return r.Ino == st.ino && r.Dev == st.dev && r.Size == st.size && r.Mtime == st.mtime && r.Ctime == st.ctime
}

// matchesFile is matches for a full stat, which may be of anything.
func (r rec) matchesFile(st unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && r.matches(statOf(st))
}

// baseline is the file's content.
type baseline struct {
	Version int    `json:"version"`
	Store   string `json:"store"`
	Dir     string `json:"dir"`
	DirDev  uint64 `json:"dir_dev"`
	DirIno  uint64 `json:"dir_ino"`
	Files   []rec  `json:"files"`
}

const baselineMagic = "memfs-directory-baseline 1 "

// BaselinePath is where the baseline of storeID's folder is kept.
func BaselinePath(stateDir, storeID string) string {
	return filepath.Join(stateDir, "directories", storeID, "baseline")
}

// errNoBaseline: none was ever written (or it was removed at a clean end).
var errNoBaseline = errors.New("no baseline")

// loadBaseline reads the baseline at p. A damaged one is renamed aside
// (p.damaged-<time>) and reported with an error that says where.
func loadBaseline(p string) (*baseline, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoBaseline
	}
	if err != nil {
		return nil, err
	}
	bl, derr := decodeBaseline(b)
	if derr == nil {
		return bl, nil
	}
	aside := fmt.Sprintf("%s.damaged-%s", p, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(p, aside); err != nil {
		return nil, fmt.Errorf("the baseline %s is damaged (%v), and could not be set aside: %w", p, derr, err)
	}
	return nil, &DamagedBaseline{KeptAt: aside, Err: derr}
}

// DamagedBaseline is a baseline that failed its check, set aside.
type DamagedBaseline struct {
	KeptAt string
	Err    error
}

func (d *DamagedBaseline) Error() string {
	return fmt.Sprintf("the directory baseline was damaged (%v); kept at %s", d.Err, d.KeptAt)
}

func decodeBaseline(b []byte) (*baseline, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || !bytes.HasPrefix(b, []byte(baselineMagic)) {
		return nil, errors.New("not a memfs directory baseline")
	}
	want := string(b[len(baselineMagic):nl])
	sum := sha256.Sum256(b[nl+1:])
	if hex.EncodeToString(sum[:]) != want {
		return nil, errors.New("its checksum does not match its content")
	}
	var bl baseline
	if err := json.Unmarshal(b[nl+1:], &bl); err != nil {
		return nil, err
	}
	if bl.Version != 1 {
		return nil, fmt.Errorf("version %d, this memfs reads 1", bl.Version)
	}
	return &bl, nil
}

func encodeBaseline(bl *baseline) ([]byte, error) {
	body, err := json.Marshal(bl)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(baselineMagic)+65+len(body))
	out = append(out, baselineMagic...)
	out = append(out, hex.EncodeToString(sum[:])...)
	out = append(out, '\n')
	return append(out, body...), nil
}

// saveBaseline writes bl at p durably: after syncing the folder's
// filesystem (root), a temporary file, fsync, rename, fsync of its folder.
func saveBaseline(p string, root int, bl *baseline) error {
	if root >= 0 {
		if err := unix.Syncfs(root); err != nil {
			return fmt.Errorf("sync the folder before recording it: %w", err)
		}
	}
	b, err := encodeBaseline(bl)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "baseline.tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeBaseline forgets the folder (its clean end left nothing in it).
func removeBaseline(p string) error {
	err := os.Remove(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
