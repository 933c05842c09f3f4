package worker

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
)

// LeftJournal is a store's journal with changes not yet confirmed by the
// store, that no running process holds.
type LeftJournal struct {
	StoreID string `json:"store_id"`
	Dir     string `json:"dir"`
	// Pending counts the changes it holds, Deletes those that are deletes.
	Pending int   `json:"pending"`
	Deletes int   `json:"deletes"`
	Bytes   int64 `json:"bytes"`
	// DamagedBytes are bytes of the journal that fail their checks: the
	// next mount of the store salvages the rest and keeps a copy.
	DamagedBytes int64     `json:"damaged_bytes"`
	ModTime      time.Time `json:"modified"`
}

// LeftJournals lists the journals in a state dir that hold unsynced
// changes and are not held by a running process. It only reads
// (journal.Inspect): nothing is locked, repaired or replayed.
func LeftJournals(stateDir string) []LeftJournal {
	var out []LeftJournal
	for _, info := range InspectJournals(stateDir) {
		if info.LockedBy != 0 || (info.Pending == 0 && info.Lost == 0) {
			continue
		}
		out = append(out, LeftJournal{StoreID: filepath.Base(info.Dir), Dir: info.Dir, Pending: info.Pending, Deletes: info.Deletes,
			Bytes: info.FileBytes, DamagedBytes: info.Lost, ModTime: info.ModTime})
	}
	return out
}

// InspectJournals reads every store journal directory of a state dir.
func InspectJournals(stateDir string) []journal.Info {
	ents, _ := os.ReadDir(filepath.Join(stateDir, "stores"))
	var out []journal.Info
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		info, err := journal.Inspect(syncqueue.JournalDir(stateDir, e.Name()))
		if err != nil {
			continue
		}
		out = append(out, info)
	}
	return out
}

// ReplayStore pushes a journal left behind with api's credential, without
// mounting: the store is loaded, the pending changes are uploaded with
// their preconditions (store-wins applies; losers go to the conflict log),
// deletes included, bounded like a final sync. left is what the journal
// still holds afterwards (all of it when the replay could not start).
func ReplayStore(ctx context.Context, api syncqueue.Store, stateDir, storeID string, log logrus.FieldLogger) (res syncqueue.SyncResult, left syncqueue.Left, err error) {
	eng, err := syncqueue.NewEngine(syncqueue.EngineOptions{StoreID: storeID, Store: api, StateDir: stateDir, Interval: syncqueue.MinInterval, Log: log})
	if err != nil {
		return res, leftOnDisk(stateDir, storeID), err
	}
	if err := eng.Open(ctx); err != nil {
		return res, leftOnDisk(stateDir, storeID), err
	}
	res = eng.Finish(ctx, true)
	err = eng.Close(ctx)
	return res, eng.Left(), err
}

// ReplayAll replays every journal left in a state dir, logging each, and
// returns what each left.
func ReplayAll(ctx context.Context, api syncqueue.Store, stateDir string, log logrus.FieldLogger) []syncqueue.Left {
	var out []syncqueue.Left
	for _, lj := range LeftJournals(stateDir) {
		l := log.WithFields(logrus.Fields{"store": lj.StoreID, "pending": lj.Pending})
		res, left, err := ReplayStore(ctx, api, stateDir, lj.StoreID, l)
		out = append(out, left)
		if err != nil {
			l.WithError(err).Error("replaying a journal left behind failed; it is kept")
			continue
		}
		l.WithFields(logrus.Fields{"uploaded": res.Uploaded, "deleted": res.Deleted, "left": left.Changes}).Warn("replayed a journal left behind")
	}
	return out
}
