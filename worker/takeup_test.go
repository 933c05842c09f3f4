package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
)

// leftFolder makes, at dir, what a worker killed in directory mode leaves
// of storeID: the folder with its marker and a file, and, in stateDir,
// the baseline of that very folder (docs/formats.md, "The directory
// baseline").
func leftFolder(t *testing.T, dir, storeID, stateDir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "notes"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{fs.MarkerName: fs.MarkerContent(storeID), "notes/a.md": []byte("edited while no worker ran\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	writeBaseline(t, stateDir, storeID, dir, uint64(st.Dev), st.Ino)
}

// writeBaseline writes a baseline of the folder dir (device, inode) with
// no files, as dirmode writes it: its checksum line, then its JSON.
func writeBaseline(t *testing.T, stateDir, storeID, dir string, dev, ino uint64) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"version": 1, "store": storeID, "dir": dir, "dir_dev": dev, "dir_ino": ino, "files": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	p := dirmode.BaselinePath(stateDir, storeID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	b := append([]byte("memfs-directory-baseline 1 "+hex.EncodeToString(sum[:])+"\n"), body...)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCheckMountPathTakesUpFolder: in directory mode the mount path may
// hold this state dir's copy of the store (its marker, the state dir's
// baseline of this folder), left by a killed worker: it is accepted, for
// the mount to take it up. Anything else there stays refused and left as
// found, as in FUSE mode, which refuses that copy too.
func TestCheckMountPathTakesUpFolder(t *testing.T) {
	const id = "memstore_1"
	for _, tc := range []struct {
		name  string
		mode  string
		setup func(t *testing.T, mp, stateDir string)
		errs  []string // nil: accepted
	}{
		{name: "its own copy", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) { leftFolder(t, mp, id, stateDir) }},
		{name: "its own copy, in FUSE mode", mode: ModeFUSE, setup: func(t *testing.T, mp, stateDir string) { leftFolder(t, mp, id, stateDir) },
			errs: []string{"something already exists at the memory store's path"}},
		{name: "another store's copy", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) { leftFolder(t, mp, "memstore_2", stateDir) },
			errs: []string{"something already exists", "holds no marker file of store memstore_1"}},
		{name: "no baseline", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) {
			leftFolder(t, mp, id, stateDir)
			os.Remove(dirmode.BaselinePath(stateDir, id))
		}, errs: []string{"something already exists", "has no baseline of it"}},
		{name: "the baseline of another folder", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) {
			leftFolder(t, mp, id, stateDir)
			writeBaseline(t, stateDir, id, "/elsewhere", 1, 2)
		}, errs: []string{"something already exists", "the state dir's baseline is of another folder (/elsewhere)"}},
		{name: "an empty folder", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) {
			if err := os.Mkdir(mp, 0o700); err != nil {
				t.Fatal(err)
			}
		}, errs: []string{"something already exists"}},
		{name: "a symbolic link to its own copy", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) {
			real := filepath.Join(filepath.Dir(mp), "sub", "real")
			leftFolder(t, real, id, stateDir)
			symlink(t, real, mp)
		}, errs: []string{"something already exists", "(a symbolic link to "}},
		{name: "a file", mode: ModeDirectory, setup: func(t *testing.T, mp, stateDir string) {
			if err := os.WriteFile(mp, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, errs: []string{"something already exists"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPathsFixture(t)
			stateDir := t.TempDir()
			mp := filepath.Join(f.root, "notes")
			tc.setup(t, mp, stateDir)
			got, err := checkMountPath(resolved(t, f.root), store.SessionResource{MemoryStoreID: id, MountPath: mp}, tc.mode, stateDir)
			if tc.errs == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got.Canon() != mp {
					t.Errorf("canonical path %s, want %s", got.Canon(), mp)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s; want refused", got.Canon())
			}
			for _, s := range tc.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q:\n%v", s, err)
				}
			}
		})
	}
}

// TestAdoptMountDir: the folder a killed worker created and left is held
// as if this process had created it: removed at the end once empty (not
// before), and not when another directory has taken its place.
func TestAdoptMountDir(t *testing.T) {
	f := newPathsFixture(t)
	mp := filepath.Join(f.root, "notes")
	leftFolder(t, mp, "memstore_1", t.TempDir())
	tg := mountTarget{Path: mp, Root: f.root, Rel: "notes"} // f.root is canonical
	d, err := adoptMountDir(tg, "memstore_1")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.remove(); err == nil {
		t.Error("a folder that still holds files was removed")
	}
	if _, err := os.Stat(filepath.Join(mp, "notes", "a.md")); err != nil {
		t.Fatalf("the folder's files: %v", err)
	}
	if err := os.RemoveAll(mp); err != nil {
		t.Fatal(err)
	}
	if _, err := adoptMountDir(tg, "memstore_1"); err == nil {
		t.Error("adopted a folder that is not there")
	}
	if err := os.Mkdir(mp, 0o700); err != nil {
		t.Fatal(err)
	}
	if d, err = adoptMountDir(tg, "memstore_1"); err != nil {
		t.Fatal(err)
	}
	if err := d.remove(); err != nil {
		t.Fatalf("remove the empty folder: %v", err)
	}
	if _, err := os.Lstat(mp); !os.IsNotExist(err) {
		t.Errorf("the empty adopted folder is still there (%v)", err)
	}
	// Swapped: another directory at the path is left alone.
	if err := os.Mkdir(mp, 0o700); err != nil {
		t.Fatal(err)
	}
	if d, err = adoptMountDir(tg, "memstore_1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(mp, filepath.Join(f.outside, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.remove(); err == nil || !strings.Contains(err.Error(), "was replaced") {
		t.Errorf("remove after a swap: %v, want it refused", err)
	}
	checkEmpty(t, mp)
}

// writeLeftRecord writes the mount record a killed worker (another pid)
// left in stateDir.
func writeLeftRecord(t *testing.T, stateDir string, r mountRecord) {
	t.Helper()
	r.PID = os.Getpid() + 1 // not this process: a previous one's
	b, _ := json.Marshal(r)
	dir := filepath.Join(stateDir, "mounts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, r.StoreID+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverDirectoryMode: after a kill -9 in directory mode the folder
// holds the store's files: recover detaches nothing, keeps the folder
// (no warning, no error: the store's next mount there takes it up) and
// drops the record; an empty folder it created is removed. The same
// folder under a FUSE mount's record is a mount directory that was not
// empty: left, with a warning.
func TestRecoverDirectoryMode(t *testing.T) {
	stateDir, root := t.TempDir(), t.TempDir()
	kept, empty, fuse := filepath.Join(root, "kept"), filepath.Join(root, "empty"), filepath.Join(root, "fuse")
	leftFolder(t, kept, "memstore_1", stateDir)
	leftFolder(t, fuse, "memstore_3", stateDir)
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	writeLeftRecord(t, stateDir, mountRecord{StoreID: "memstore_1", SessionID: "sesn_1", MountPath: kept, CreatedDir: true, Mode: ModeDirectory})
	writeLeftRecord(t, stateDir, mountRecord{StoreID: "memstore_2", SessionID: "sesn_1", MountPath: empty, CreatedDir: true, Mode: ModeDirectory})
	writeLeftRecord(t, stateDir, mountRecord{StoreID: "memstore_3", SessionID: "sesn_1", MountPath: fuse, CreatedDir: true})
	log, hook := test.NewNullLogger()
	h := newHost(Config{StateDir: stateDir, MemoryRoot: root, Log: log})
	h.recover(context.Background(), "")

	if _, err := os.Stat(filepath.Join(kept, "notes", "a.md")); err != nil {
		t.Errorf("the directory-mode folder's files: %v; want them kept", err)
	}
	if _, err := os.Stat(filepath.Join(kept, fs.MarkerName)); err != nil {
		t.Errorf("the directory-mode folder's marker: %v; want it kept", err)
	}
	if _, err := os.Lstat(empty); !os.IsNotExist(err) {
		t.Errorf("the empty folder a previous worker created: %v; want it removed", err)
	}
	if rs := h.records(); len(rs) != 0 {
		t.Errorf("records left: %+v", rs)
	}
	var kinds []string
	for _, e := range hook.AllEntries() {
		p, _ := e.Data["path"].(string)
		switch {
		case p == kept && e.Level <= logrus.WarnLevel:
			t.Errorf("the kept folder was reported as a problem: %s %q", e.Level, e.Message)
		case p == kept && strings.Contains(e.Message, "takes it up"):
			kinds = append(kinds, "kept")
		case p == fuse && e.Level == logrus.WarnLevel && strings.Contains(e.Message, "left a mount directory"):
			kinds = append(kinds, "fuse left")
		}
	}
	if strings.Join(kinds, ",") != "kept,fuse left" && strings.Join(kinds, ",") != "fuse left,kept" {
		t.Errorf("logged %v; want the folder kept (info) and the FUSE mount directory left (warning)", kinds)
	}
	if _, err := os.Stat(filepath.Join(fuse, "notes", "a.md")); err != nil {
		t.Errorf("the FUSE record's directory: %v; a directory holding files is never removed", err)
	}
}
