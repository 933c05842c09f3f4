package worker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
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

// LeftJournals lists, of a state dir's journals (InspectJournals), those
// that hold unsynced changes and are not held by a running process.
func LeftJournals(infos []journal.Info) []LeftJournal {
	var out []LeftJournal
	for _, info := range infos {
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
// deletes included, bounded like a final sync. session is the session
// whose token api holds; "" for an API key, which takes up a journal
// written in any session (the store's versions then name the key as the
// actor, and the log says which session wrote the changes). A journal of
// another session is set aside for it by a session's replay, never
// uploaded with its token. left is what the journal still holds
// afterwards (all of it when the replay could not start).
func ReplayStore(ctx context.Context, api syncqueue.Store, stateDir, storeID, session string, log logrus.FieldLogger) (res syncqueue.SyncResult, left syncqueue.Left, err error) {
	opts := syncqueue.EngineOptions{StoreID: storeID, Store: api, StateDir: stateDir, Interval: syncqueue.MinInterval,
		Session: session, AnySession: session == "", Log: log}
	var folder *dirmode.Dir
	if dir, ok := dirmode.LeftFolder(stateDir, storeID); ok {
		// A folder a killed directory-mode run left: what changed in it
		// while nothing ran is journaled too (Begin), and uploaded with
		// the rest. The folder stays for the store's next mount there.
		newDir := dirmode.New(dirmode.Options{Dir: dir, StateDir: stateDir})
		opts.Local = func(fo fs.Options) (syncqueue.Local, error) {
			d, err := newDir(fo)
			if err != nil {
				return nil, err
			}
			folder = d
			return d, nil
		}
		log = log.WithField("folder", dir)
	}
	eng, err := syncqueue.NewEngine(opts)
	if err != nil {
		return res, leftOnDisk(stateDir, storeID), err
	}
	if err := eng.Open(ctx); err != nil {
		return res, leftOnDisk(stateDir, storeID), err
	}
	if folder != nil {
		folder.Begin()
	}
	res = eng.Finish(ctx, true)
	err = eng.Close(ctx)
	return res, eng.Left(), err
}

func replayWithKey(ctx context.Context, api syncqueue.Store, stateDir, storeID string, keep func(session string) bool, log logrus.FieldLogger) (res syncqueue.SyncResult, left syncqueue.Left, err error) {
	dir := syncqueue.JournalDir(stateDir, storeID)
	_, folder := dirmode.LeftFolder(stateDir, storeID)
	if info, ierr := journal.Inspect(dir); folder || (ierr == nil && (info.Pending > 0 || info.Lost > 0) && keep(info.Session)) {
		if res, left, err = ReplayStore(ctx, api, stateDir, storeID, "", log); err != nil || !left.Empty() {
			return res, left, err
		}
	}
	for _, sa := range journal.ListSetAside(dir) {
		if !sa.Held || !keep(sa.Session) {
			continue
		}
		if err := journal.Restore(dir, sa.Path); err != nil {
			return res, leftOnDisk(stateDir, storeID), err
		}
		r, l, err := ReplayStore(ctx, api, stateDir, storeID, "", log.WithField("held_for_session", sa.Session))
		res.Uploaded, res.Deleted = res.Uploaded+r.Uploaded, res.Deleted+r.Deleted
		if left = l; err != nil || !l.Empty() {
			return res, left, err
		}
	}
	return res, left, nil
}

// ReplayAll replays, with api (an API key), every journal left in a state
// dir, the journals held for sessions included, logging each, and
// returns what each left.
func ReplayAll(ctx context.Context, api syncqueue.Store, stateDir string, log logrus.FieldLogger) []syncqueue.Left {
	var out []syncqueue.Left
	for _, id := range ReplayableStores(stateDir) {
		l := log.WithField("store", id)
		res, left, err := ReplayWithKey(ctx, api, stateDir, id, l)
		out = append(out, left)
		if err != nil {
			l.WithError(err).Error("replaying a journal left behind failed; it is kept")
			continue
		}
		l.WithFields(logrus.Fields{"uploaded": res.Uploaded, "deleted": res.Deleted, "left": left.Changes}).Warn("replayed a journal left behind")
	}
	return out
}

// ReplayWithKey replays, with api (an API key), the store's journal left
// behind and every journal held for a session: memfs replay.
func ReplayWithKey(ctx context.Context, api syncqueue.Store, stateDir, storeID string, log logrus.FieldLogger) (syncqueue.SyncResult, syncqueue.Left, error) {
	return replayWithKey(ctx, api, stateDir, storeID, func(string) bool { return true }, log)
}

// ReplayableStores lists the stores of a state dir with something for
// an API key's replay: a journal left behind (LeftJournals) or a journal
// held for a session. It only reads.
func ReplayableStores(stateDir string) []string {
	var out []string
	for _, info := range InspectJournals(stateDir) {
		held := false
		for _, sa := range info.SetAside {
			held = held || sa.Held
		}
		left := info.LockedBy == 0 && (info.Pending > 0 || info.Lost > 0)
		if left || (held && info.LockedBy == 0) {
			out = append(out, filepath.Base(info.Dir))
		}
	}
	for _, l := range dirmode.LeftFolders(stateDir) {
		if !slices.Contains(out, l.StoreID) {
			out = append(out, l.StoreID)
		}
	}
	return out
}
