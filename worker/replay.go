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
// store.
type LeftJournal struct {
	StoreID string
	Dir     string
	Pending int
	Bytes   int64
	ModTime time.Time
}

// LeftJournals lists the journals in a state dir that hold unsynced
// changes (and are not locked by a running process).
func LeftJournals(stateDir string) []LeftJournal {
	ents, _ := os.ReadDir(filepath.Join(stateDir, "stores"))
	var out []LeftJournal
	for _, e := range ents {
		dir := syncqueue.JournalDir(stateDir, e.Name())
		j, err := journal.Open(dir, journal.Options{Log: logrus.New()})
		if err != nil {
			continue // locked by a live mount, or damaged (Open logged it)
		}
		st := j.Stats()
		j.Close(context.Background()) //nolint:errcheck
		if st.Pending == 0 {
			continue
		}
		lj := LeftJournal{StoreID: e.Name(), Dir: dir, Pending: st.Pending, Bytes: st.FileBytes}
		if fi, err := os.Stat(filepath.Join(dir, "journal")); err == nil {
			lj.ModTime = fi.ModTime()
		}
		out = append(out, lj)
	}
	return out
}

// ReplayStore pushes a journal left behind with api's credential, without
// mounting: the store is loaded, the pending changes are uploaded with
// their preconditions (store-wins applies; losers go to the conflict log),
// deletes included, bounded like a final sync.
func ReplayStore(ctx context.Context, api syncqueue.Store, stateDir, storeID string, log logrus.FieldLogger) (syncqueue.SyncResult, error) {
	eng, err := syncqueue.NewEngine(syncqueue.EngineOptions{StoreID: storeID, Store: api, StateDir: stateDir, Interval: syncqueue.MinInterval, Log: log})
	if err != nil {
		return syncqueue.SyncResult{}, err
	}
	if err := eng.Open(ctx); err != nil {
		return syncqueue.SyncResult{}, err
	}
	res := eng.Finish(ctx, true)
	return res, eng.Close(ctx)
}

// ReplayAll replays every journal left in a state dir, logging each.
func ReplayAll(ctx context.Context, api syncqueue.Store, stateDir string, log logrus.FieldLogger) {
	for _, lj := range LeftJournals(stateDir) {
		l := log.WithFields(logrus.Fields{"store": lj.StoreID, "pending": lj.Pending})
		res, err := ReplayStore(ctx, api, stateDir, lj.StoreID, l)
		if err != nil {
			l.WithError(err).Error("replaying a journal left behind failed; it is kept")
			continue
		}
		l.WithFields(logrus.Fields{"uploaded": res.Uploaded, "deleted": res.Deleted, "left": res.Left}).Warn("replayed a journal left behind")
	}
}
