package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

// This file holds what Open does about a journal that is not clean: a
// compaction that never finished, a torn tail, corruption.

// removeLeftoverTmp removes the journal.tmp a compaction (or the creation
// of the journal) left behind when the process died before its rename. The
// journal itself is intact then: the rename is the commit point.
func removeLeftoverTmp(tmpPath string, log logrus.FieldLogger) error {
	err := os.Remove(tmpPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove unfinished compaction %s: %w", tmpPath, err)
	}
	log.WithField("path", tmpPath).Info("removed an unfinished journal compaction; the journal itself is intact")
	return nil
}

// cutTornTail truncates f, the journal at path, to res.end, where its torn
// tail begins, and makes the cut durable. The records before it are intact.
func cutTornTail(f *os.File, path string, size int64, res scanResult, log logrus.FieldLogger) error {
	if err := f.Truncate(res.end); err != nil {
		return fmt.Errorf("cut torn tail of %s at offset %d: %w", path, res.end, err)
	}
	if err := fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("cut torn tail of %s: fdatasync: %w", path, err)
	}
	log.WithFields(logrus.Fields{
		"path":          path,
		"offset":        res.end,
		"bytes_dropped": size - res.end,
		"reason":        res.torn.reason,
		"records_kept":  res.records,
	}).Warn("journal ended in a torn record (a write interrupted by a crash); cut it off")
	return nil
}

// moveAside renames the corrupt journal at path to path.corrupt-<unix time>
// (with a -N suffix if that exists), fsyncs the directory, logs an error
// and returns the *CorruptError describing it.
func moveAside(dir, path string, d *damage, log logrus.FieldLogger) error {
	cerr := &CorruptError{Path: path, Offset: d.off, Reason: d.reason}
	target := fmt.Sprintf("%s.corrupt-%d", path, time.Now().Unix())
	for i := 2; ; i++ {
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			break
		}
		target = fmt.Sprintf("%s.corrupt-%d-%d", path, time.Now().Unix(), i)
	}
	entry := log.WithFields(logrus.Fields{"path": path, "offset": d.off, "reason": d.reason})
	if err := os.Rename(path, target); err != nil {
		entry.WithError(err).Error("JOURNAL CORRUPT and could not be moved aside; its pending changes were NOT replayed")
		return fmt.Errorf("%w (moving it aside failed: %v)", cerr, err)
	}
	cerr.MovedTo = target
	if err := syncDir(dir); err != nil {
		entry = entry.WithError(err)
	}
	entry.WithField("moved_to", target).Error("JOURNAL CORRUPT: moved aside; its pending changes were NOT replayed and need a human")
	return cerr
}
