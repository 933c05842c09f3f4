package sqlstore

import (
	"errors"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
)

// sqliteCompanions are the files SQLite keeps beside a database: the WAL,
// its shared-memory index, and the rollback journal (used before the
// database is switched to WAL).
var sqliteCompanions = []string{"-wal", "-shm", "-journal"}

// makePrivate makes the SQLite database at path, and any companion file
// already beside it, mode 0600 before SQLite opens them. Every memory of
// every store is in these files; SQLite itself would create the database
// 0644 &^ umask, readable by every user of the host.
//
// A missing database is created empty (SQLite takes an empty file for a
// new database) with exactly 0600, whatever the umask. The -wal, -shm and
// -journal files SQLite creates later are not touched here: SQLite's unix
// VFS gives them the database file's own permission bits (and fchmods
// them to those, past the umask), so a 0600 database keeps them 0600. An
// existing file open to group or others (a database made by an older
// memfs) is narrowed to 0600, with a warning naming it.
func makePrivate(path string, log logrus.FieldLogger) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		// Created now: 0600 &^ umask, which may lack the owner's bits.
		err = f.Chmod(0o600)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("create the database %s: %w", path, err)
		}
	case errors.Is(err, os.ErrExist):
		if err := narrow(path, log); err != nil {
			return err
		}
	default:
		return fmt.Errorf("create the database %s: %w", path, err)
	}
	for _, suffix := range sqliteCompanions {
		if err := narrow(path+suffix, log); err != nil {
			return err
		}
	}
	return nil
}

// narrow makes an existing regular file at p mode 0600 if group or others
// may access it. A missing file is fine.
func narrow(p string, log logrus.FieldLogger) error {
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("database file %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(p, 0o600); err != nil {
		return fmt.Errorf("database file %s is open to other users (mode %04o) and can't be made private: %w", p, fi.Mode().Perm(), err)
	}
	log.WithField("file", p).Warnf("the database file was open to other users (mode %04o); it is 0600 now", fi.Mode().Perm())
	return nil
}
