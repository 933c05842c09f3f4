package worker

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
)

// SetAsideJournal is a journal a mount did not take up, kept in the state
// dir until someone removes (or replays) it: refused (not this state dir's
// own, see "Authentication" in syncqueue/journal), or held for the session
// it was written in (see "Sessions").
type SetAsideJournal struct {
	StoreID string `json:"store_id"`
	Path    string `json:"path"`
	// Reason is why it was refused; "" for a held journal.
	Reason string `json:"reason,omitempty"`
	// Session is the session a held journal's changes were written in.
	Session string    `json:"session,omitempty"`
	Since   time.Time `json:"since"`
}

// SetAsideJournals lists, of a state dir's journals (InspectJournals),
// the refused and the held ones. A version 1 journal still in place (the
// next open refuses it) is listed as refused.
func SetAsideJournals(infos []journal.Info) (refused, held []SetAsideJournal) {
	refused, held = []SetAsideJournal{}, []SetAsideJournal{}
	for _, info := range infos {
		id := filepath.Base(info.Dir)
		if info.Refused != "" {
			refused = append(refused, SetAsideJournal{StoreID: id, Path: filepath.Join(info.Dir, "journal"),
				Reason: info.Refused + "; refused at the store's next mount", Since: info.ModTime})
		}
		for _, sa := range info.SetAside {
			j := SetAsideJournal{StoreID: id, Path: sa.Path, Reason: sa.Reason, Session: sa.Session, Since: sa.ModTime}
			if sa.Held {
				held = append(held, j)
			} else {
				refused = append(refused, j)
			}
		}
	}
	return refused, held
}

// takeUp readies storeID's journal for a mount (or replay) by session
// (see "Sessions" in syncqueue/journal): changes another session wrote
// there are replayed first with the replay API key when the worker has
// one (the key is their actor, and the log says which session wrote
// them), else set aside for that session. Then the journal in place holds
// nothing of another session's, and the mount's engine puts back a
// journal held for session itself, to upload it with its own token.
// Nothing is ever dropped: what can't be done now stays on disk, and
// memfs status lists it.
func (h *host) takeUp(ctx context.Context, storeID, session string, log logrus.FieldLogger) {
	dir := syncqueue.JournalDir(h.cfg.StateDir, storeID)
	if _, err := os.Stat(dir); err != nil {
		return // never mounted here
	}
	if h.cfg.ReplayAPIKey != "" {
		api, err := client.New(h.cfg.clientOptions(h.cfg.ReplayAPIKey, h.log))
		if err != nil {
			log.WithError(err).Error("the replay API key's client: another session's changes are not replayed before this mount")
		} else {
			others := func(s string) bool { return s != session }
			res, left, err := replayWithKey(ctx, api, h.cfg.StateDir, storeID, others, log)
			switch {
			case err != nil:
				log.WithError(err).Error("replaying another session's changes with the replay API key failed; they are kept")
			case res.Uploaded+res.Deleted > 0 || !left.Empty():
				log.WithFields(logrus.Fields{"uploaded": res.Uploaded, "deleted": res.Deleted, "left": left.Changes}).
					Warn("changes written in another session were uploaded with the replay API key before this session's mount")
			}
		}
	}
	if _, held, err := syncqueue.CheckJournal(h.cfg.StateDir, storeID, session, log); err != nil {
		log.WithError(err).Warn("could not check the store's journal before the mount")
	} else if held != nil {
		log.WithFields(logrus.Fields{"written_in_session": held.Session, "pending": held.Pending, "kept_at": held.KeptAt}).
			Warnf("the store's journal holds changes written in session %s: they are not uploaded with this session's token; kept, waiting for session %s's next run on this host, or memfs replay with an API key", held.Session, held.Session)
	}
}
