package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store/durable"
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

// keepDamaged writes b, the damaged journal at path, to
// path.corrupt-<unix time> (with a -N suffix if that exists), durably, and
// returns the name. The journal itself is replaced afterwards by the
// salvaged one, so a crash in between salvages again (and keeps a second
// copy), never loses the damaged bytes.
func keepDamaged(path string, b []byte) (string, error) {
	now := time.Now().Unix()
	target := fmt.Sprintf("%s.corrupt-%d", path, now)
	for i := 2; ; i++ {
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			break
		}
		target = fmt.Sprintf("%s.corrupt-%d-%d", path, now, i)
	}
	if err := durable.WriteFile(target, b, 0o600); err != nil {
		return "", err
	}
	return target, nil
}
