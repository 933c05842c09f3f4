package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/durable"
	"github.com/memfs/memfs/syncqueue"
)

// host is what one worker process knows about this host: which store each
// running session has mounted (a store is mounted by at most one session
// per host; across processes the journal's flock enforces it too), and,
// on disk under <state dir>/mounts/, a record of every mount it made, so a
// worker started after a crash can clean up.
type host struct {
	cfg Config
	log logrus.FieldLogger

	mu      sync.Mutex
	mounted map[string]string // store id -> session id; GUARDED_BY(mu)

	rootMu sync.Mutex
	root   memoryRoot // Canon set once, then fixed; GUARDED_BY(rootMu)

	left leftovers // what the ends of this process's engines left (left.go)
}

// newHost resolves the memory root if it exists already: the canonical
// root is fixed from the worker's start. A root still to be created is
// resolved when the first session creates it.
func newHost(cfg Config) *host {
	h := &host{cfg: cfg, log: cfg.Log, mounted: map[string]string{}, root: memoryRoot{Given: cfg.MemoryRoot}}
	h.root.resolve() // a missing root is created and resolved by the first session
	return h
}

// memoryRoot makes sure the memory root exists and is writable
// (docs/operating.md, "Session lifecycle", step 4) and returns it, resolved. The canonical root is resolved once
// and used from then on, even if a symlink on the way to it changes.
func (h *host) memoryRoot() (memoryRoot, error) {
	h.rootMu.Lock()
	defer h.rootMu.Unlock()
	if err := ensureMemoryRoot(h.root); err != nil {
		return memoryRoot{}, err
	}
	if h.root.Canon == "" {
		if err := h.root.resolve(); err != nil {
			return memoryRoot{}, fmt.Errorf("the memory root %s: %w", h.root.Given, err)
		}
	}
	return h.root, nil
}

// claimWait bounds how long a session waits for a previous run of the
// same session on this host to finish tearing down the same store.
const claimWait = 40 * time.Second

// claim reserves storeID for sessionID on this host. A store held by
// another session is refused; one still held by an earlier run of the same
// session (its teardown in progress) is waited for, bounded by claimWait.
func (h *host) claim(ctx context.Context, storeID, sessionID string) error {
	deadline := time.Now().Add(claimWait)
	for {
		h.mu.Lock()
		other, ok := h.mounted[storeID]
		if !ok {
			h.mounted[storeID] = sessionID
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
		if other != sessionID {
			return fmt.Errorf("memory store %s is already mounted on this host by session %s; a store is mounted by one session at a time", storeID, other)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memory store %s is still being taken down by an earlier run of session %s after %s", storeID, sessionID, claimWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (h *host) release(storeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.mounted, storeID)
}

// mountRecord is the JSON file <state dir>/mounts/<store id>.json written
// (durably) once a store is mounted and removed after its teardown.
// MountPath is the canonical path (no symlink on it): the path
// /proc/self/mountinfo lists the mount at. Mode is ModeFUSE or
// ModeDirectory ("": a record of a build without directory mode, FUSE).
type mountRecord struct {
	StoreID    string `json:"store_id"`
	SessionID  string `json:"session_id"`
	WorkID     string `json:"work_id"`
	MountPath  string `json:"mount_path"`
	CreatedDir bool   `json:"created_dir"`
	Mode       string `json:"mode,omitempty"`
	PID        int    `json:"pid"`
}

func (h *host) recordDir() string { return filepath.Join(h.cfg.StateDir, "mounts") }

func (h *host) writeRecord(r mountRecord) error {
	r.PID = os.Getpid()
	b, _ := json.MarshalIndent(r, "", "  ")
	return durable.WriteFile(filepath.Join(h.recordDir(), r.StoreID+".json"), b, 0o600)
}

func (h *host) removeRecord(storeID string) {
	os.Remove(filepath.Join(h.recordDir(), storeID+".json"))
}

// records lists the mount records left in the state dir.
func (h *host) records() []mountRecord {
	ents, _ := os.ReadDir(h.recordDir())
	var out []mountRecord
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(h.recordDir(), e.Name()))
		var r mountRecord
		if err == nil && json.Unmarshal(b, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// recover cleans up after a killed worker: stale mounts are detached,
// mount directories it created are removed (once empty; a directory this
// worker did not create is never touched), the folders of directory mode
// are kept for their stores' next mounts, and journals with unsynced
// changes are replayed with replayKey when given, else kept for the next
// work item of their session, memfs replay, and memfs status.
func (h *host) recover(ctx context.Context, replayKey string) {
	for _, r := range h.records() {
		if r.PID == os.Getpid() {
			continue
		}
		p := filepath.Clean(r.MountPath)
		log := h.log.WithFields(logrus.Fields{"store": r.StoreID, "session": r.SessionID, "path": p})
		if r.Mode == ModeDirectory {
			recoverFolder(p, r.CreatedDir, log)
		} else if !recoverMount(p, r, log) {
			continue
		}
		h.removeRecord(r.StoreID)
	}
	if replayKey == "" {
		return
	}
	api, err := client.New(h.cfg.clientOptions(replayKey, h.log))
	if err != nil {
		h.log.WithError(err).Error("replay: bad configuration")
		return
	}
	for _, left := range ReplayAll(ctx, api, h.cfg.StateDir, h.log) {
		h.left.note(left)
	}
}

// recoverMount detaches the stale FUSE mount a killed worker left at p,
// and removes the mount directory if it created it. It reports whether
// the record is done with (false: the mount could not be detached, and
// the record stays for the next start).
func recoverMount(p string, r mountRecord, log logrus.FieldLogger) bool {
	switch mi, found := mountAt(p); {
	case !found:
	case mi.FSType != "fuse."+fs.FSType || mi.Source != r.StoreID:
		log.WithField("mounted", mi.FSType+" "+mi.Source).Warn("something else is mounted where a previous worker mounted the store; left alone")
		return true
	default:
		if err := detachStale(p); err != nil {
			log.WithError(err).Error("could not detach a stale mount left by a previous worker")
			return false
		}
		log.Warn("detached a stale mount left by a previous worker")
	}
	if r.CreatedDir {
		removeCreatedDir(p, log)
	}
	return true
}

// recoverFolder handles the folder a killed worker wrote a store into
// (directory mode): nothing is mounted there to detach, and the folder
// holds the store's files, edited or not, with its marker; the state
// dir holds its baseline. It is kept, and the store's next mount there
// takes it up and uploads what changed. Only a folder the worker created
// and left empty is removed.
func recoverFolder(p string, created bool, log logrus.FieldLogger) {
	if created && removeLeftDir(p) == nil {
		log.Info("removed the empty folder a previous worker created (directory mode)")
		return
	}
	if _, err := os.Lstat(p); err == nil {
		log.Info("kept the store's folder a previous worker wrote (directory mode): the store's next mount here takes it up and uploads what changed")
	}
}

// removeCreatedDir removes the mount directory a killed worker created,
// once empty.
func removeCreatedDir(p string, log logrus.FieldLogger) {
	if err := removeLeftDir(p); err == nil {
		log.Info("removed the mount directory a previous worker created")
	} else if !errors.Is(err, os.ErrNotExist) {
		log.WithError(err).Warn("left a mount directory a previous worker created")
	}
}

// mountAt returns the mount on top at the canonical path p, from
// /proc/self/mountinfo (cleaned absolute paths compared).
func mountAt(p string) (fs.MountInfo, bool) {
	mounts, err := fs.Mounts()
	if err != nil {
		return fs.MountInfo{}, false
	}
	var top fs.MountInfo
	found := false
	for _, mi := range mounts {
		if filepath.Clean(mi.Dir) == p {
			top, found = mi, true
		}
	}
	return top, found
}

// engineOptions are the sync engine's options for one store session
// attaches (r): api holds the session token (so the journal is session's,
// see "Sessions" in syncqueue/journal), which is used only on the
// routes the official worker uses it on, so the store's name comes from
// the session's resources (SessionStore).
func (h *host) engineOptions(api syncqueue.Store, session string, r store.SessionResource, log logrus.FieldLogger) syncqueue.EngineOptions {
	return syncqueue.EngineOptions{
		StoreID: r.MemoryStoreID, Store: api, StateDir: h.cfg.StateDir, ReadOnly: r.Access == store.AccessReadOnly,
		Session:      session,
		SessionStore: true, StoreName: r.Name,
		Interval: h.cfg.Interval, Quiet: h.cfg.Quiet, Deletions: h.cfg.Deletions, DeleteDelay: h.cfg.DeleteDelay,
		PollWait: h.cfg.PollWait, Owner: h.owner(), Log: log, OnLoad: h.cfg.OnLoad,
	}
}

// owner is who owns the session's mounts: Config.Owner, with the memory
// root's owner when Config.OwnerFromMemoryRoot.
func (h *host) owner() fs.Ownership {
	o := h.cfg.Owner
	if h.cfg.OwnerFromMemoryRoot {
		var st unix.Stat_t
		if err := unix.Stat(h.cfg.MemoryRoot, &st); err == nil {
			o.UID, o.GID = st.Uid, st.Gid
		}
	}
	return o
}
