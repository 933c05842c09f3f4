// Package durable writes files so that a crash leaves either the old or
// the new content, never a torn one: write a temporary file in the same
// directory, fsync it, rename (or link) it to the target, fsync the
// directory.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to path durably with mode perm, replacing what
// is there, creating the directory (0700) if needed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Rename)
}

// CreateFile is WriteFile for a file that must not be replaced: when
// path exists (even if it appears during the write) it fails with an
// error matching os.ErrExist and leaves it as it was. The temporary file
// is linked to path, which, unlike a rename, never replaces a file.
func CreateFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Link)
}

func write(path string, data []byte, perm os.FileMode, place func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after a rename; drops the link's other name
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := place(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, making renames and removals in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
