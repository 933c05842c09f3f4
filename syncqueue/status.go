package syncqueue

import (
	"context"
	"sort"
	"time"
	"unicode/utf8"
)

// Status is what memfs status shows about one mounted store: every change
// that has not reached the store, each with the reason it waits (the
// invariant of docs/sync.md: stored, or pending with a reason, or in the
// conflict log).
type Status struct {
	StoreID string `json:"store_id"`
	// StoreName is the store's name, read once at mount.
	StoreName string `json:"store_name"`
	ReadOnly  bool   `json:"read_only"`
	// Loaded is the number of memories loaded at mount.
	Loaded int `json:"loaded"`
	// Content is how many of them have their content on the mount yet
	// (the rest is fetched in the background, or when read).
	Content ContentProgress `json:"content"`
	// Pending lists the changes not yet in the store, oldest first.
	Pending []PendingChange `json:"pending"`
	// PendingUploads, PendingDeletes and PendingUnjournaled count Pending
	// (tally): the deletes, every other change (unjournaled ones too),
	// and those of them that never reached the journal. NotUploaded
	// counts the files never uploaded (OpNotUploaded), in none of them.
	PendingUploads     int   `json:"pending_uploads"`
	PendingDeletes     int   `json:"pending_deletes"`
	PendingUnjournaled int   `json:"pending_unjournaled"`
	NotUploaded        int   `json:"not_uploaded"`
	JournalBytes       int64 `json:"journal_bytes"`
	// NoSpace: the state dir has no room for the journal (closes fail with
	// ENOSPC, the files keep their content and are journaled once there
	// is room).
	NoSpace bool `json:"no_space"`
	// JournalError: an I/O error on the journal's file, and no fresh
	// file could be written yet ("I/O error on the journal (EIO)"):
	// closes fail with that errno, the files keep their content and are
	// journaled once it is over.
	JournalError string `json:"journal_error,omitempty"`
	// Unreachable: the last request to the store failed or hangs.
	Unreachable bool `json:"unreachable"`
	// Refused is the store's message when it refuses this mount's
	// requests (401/403: the credential, or a store attached read-only):
	// the store answers, so that is no outage.
	Refused string `json:"refused,omitempty"`
	// LastSync is when the last successful pass began: one that left
	// nothing failed while the store answered (a pass with nothing to send
	// during an outage is no sync).
	LastSync *time.Time `json:"last_sync,omitempty"`
	// LastPass is the last pass, whatever its outcome.
	LastPass *PassInfo `json:"last_pass,omitempty"`
	// LastError is the last failure to reach the store, and when.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Damaged is the copy of this store's journal that was found damaged
	// at mount (see memfs status for older copies).
	Damaged *DamageStatus `json:"damaged,omitempty"`
	// AtCap: the store refused a create at its memory cap and none went
	// up since; new files wait for a memory to be deleted, or until
	// CapRetryAt.
	AtCap      bool       `json:"at_cap"`
	CapRetryAt *time.Time `json:"cap_retry_at,omitempty"`
	// RemoteBlocked: a change from the store waits because a local version
	// it would replace can't be kept yet.
	RemoteBlocked bool `json:"remote_blocked,omitempty"`
	// Follows is how the mount follows the store's changes, probed once at
	// mount: "feed" (the change feed), "versions" (the server refused the
	// feed: the versions created since the last one seen are listed every
	// interval, the store itself every 10 minutes) or "listing" (the
	// server refused both: the store is listed every interval). A feed or
	// versions listing refused later (a server restarted without it)
	// turns it to listing for good.
	Follows string `json:"follows"`
	// FeedCursor is how far the overlay has applied the store's change
	// feed (0 without a feed): a change at or below it is on the mount.
	FeedCursor int64 `json:"feed_cursor"`
}

// How a mount follows its store (Status.Follows).
const (
	FollowsFeed     = "feed"
	FollowsVersions = "versions"
	FollowsListing  = "listing"
)

// PendingChange is one change that has not reached the store.
type PendingChange struct {
	Path string `json:"path"`
	// Op is create, update, move, delete, unjournaled (closed while the
	// journal could not take it, for want of room or an I/O error: only in
	// memory until it can), or OpNotUploaded (kept locally, never
	// uploaded: Reason says why).
	Op     string `json:"op"`
	Reason string `json:"reason"`
	// MemoryID is the memory the change is about ("" for a create).
	MemoryID string `json:"memory_id,omitempty"`
	Error    string `json:"error,omitempty"`
	// Since is when the change last failed to go up (absent if it never
	// tried).
	Since time.Time `json:"since,omitzero"`
	// Until is when a held change's hold ends (ReasonScratch: it goes up
	// with the first pass after it unless renamed; absent while no pass
	// has seen it yet, and the next one starts its ScratchGrace).
	Until time.Time `json:"until,omitzero"`
}

// DamageStatus describes a damaged journal that was salvaged.
type DamageStatus struct {
	KeptAt    string `json:"kept_at"`
	LostBytes int64  `json:"lost_bytes"`
	Records   int    `json:"records_replayed"`
	Reason    string `json:"reason"`
}

// Status returns the store's sync status now. What the owner keeps
// (owner.go) it reads on the owner (statusWanted), which answers at once:
// a pass in progress waits on its requests, not on the owner.
func (e *Engine) Status() Status {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	s := Status{StoreID: e.opts.StoreID, StoreName: e.name, ReadOnly: e.journal == nil, Loaded: e.loaded, Content: e.contentProgress()}
	lastAt, down, lastErr := e.outage.last()
	s.Unreachable = down
	if r := e.outage.refusal(); r != nil {
		s.Refused = storeMessage(r)
	}
	if lastErr != nil {
		s.LastError, s.LastErrorAt = lastErr.Error(), &lastAt
	}
	if e.journal == nil {
		e.ownerStatus(&s, down)
		return s
	}
	js := e.journal.Stats()
	// Unsaved while faulted is the fault's doing, not a full disk.
	s.JournalBytes, s.NoSpace = js.FileBytes, js.NoSpace || js.Unsaved && js.Fault == nil
	if js.Fault != nil {
		// A fresh journal file may fail for want of room too.
		if reason, noSpace := journalReason(js.Fault); noSpace {
			s.NoSpace = true
		} else {
			s.JournalError = reason
		}
	}
	if d := e.journal.Damage(); d != nil {
		s.Damaged = &DamageStatus{KeptAt: d.KeptAt, LostBytes: d.LostBytes(), Records: d.Records, Reason: d.Reason}
	}
	for p, err := range e.tree.Unjournaled() {
		c, noSpace := localPending(p, err)
		s.Pending = append(s.Pending, c)
		s.NoSpace = s.NoSpace || noSpace
	}
	e.ownerStatus(&s, down)
	sort.SliceStable(s.Pending, func(i, j int) bool { return pendingRank(s.Pending[i]) < pendingRank(s.Pending[j]) })
	s.tally()
	return s
}

// pendingRank orders Pending: the closes not journaled first (only in
// memory), then the journal's changes, oldest first, then the files
// never uploaded.
func pendingRank(c PendingChange) int {
	switch c.Op {
	case "unjournaled":
		return 0
	case OpNotUploaded:
		return 2
	}
	return 1
}

// statusWanted asks the owner for the part of Status it keeps.
type statusWanted struct {
	s    *Status
	down bool
	done chan struct{}
}

func (w statusWanted) handle(e *Engine) {
	e.statusNow(w.s, w.down)
	close(w.done)
}

// ownerStatus fills the part of s the owner keeps: on the owner, or, when
// there is none (before Open, after Close), here.
func (e *Engine) ownerStatus(s *Status, down bool) {
	w := statusWanted{s: s, down: down, done: make(chan struct{})}
	if !e.send(context.Background(), w) {
		e.statusNow(s, down)
		return
	}
	<-w.done
}

// statusNow fills the part of s the owner keeps; down: the store is
// unreachable.
func (e *Engine) statusNow(s *Status, down bool) {
	s.Follows, s.RemoteBlocked, s.FeedCursor = e.follows, e.remoteBlocked, e.cursor
	if e.journal == nil {
		return
	}
	if e.f != nil && e.f.credErr != nil {
		s.Refused = storeMessage(e.f.credErr)
	}
	if e.f != nil && e.f.capw.full {
		t := e.f.capw.retryTime()
		s.AtCap, s.CapRetryAt = true, &t
	}
	if f := e.f; f != nil && !f.last.At.IsZero() {
		last := f.last
		s.LastPass = &last
		if !f.lastClean.IsZero() {
			t := f.lastClean
			s.LastSync = &t
		}
	}
	now := time.Now()
	for _, p := range e.journal.Snapshot() {
		c := PendingChange{Path: p.Path, Reason: ReasonWaiting, MemoryID: p.Origin}
		switch {
		case p.Deleted:
			c.Op, c.Reason = "delete", ReasonDeleteDelay
		case p.Origin == "":
			c.Op = "create"
		case e.ms.known[p.Origin].path != p.Path:
			c.Op = "move"
		default:
			c.Op = "update"
		}
		if e.f != nil {
			w, tried := e.f.waits[p.FileID]
			if tried = tried && w.lsn == p.LSN; tried {
				c.Reason, c.Error, c.Since = w.reason, w.err, w.at
			}
			if !tried && scratchCreate(p.Origin, p.Path, p.Deleted) {
				// Held for its grace (scratch.go), then tried as any create.
				seen, ok := e.f.scratchSeen[p.FileID]
				if !ok || now.Before(scratchUntil(seen)) {
					c.Reason = ReasonScratch
					if ok {
						c.Until = scratchUntil(seen)
					}
				}
			}
		}
		if !p.Deleted && !utf8.Valid(p.Content) {
			c.Reason = ReasonNotUTF8
		}
		if down && c.Reason == ReasonWaiting {
			c.Reason = ReasonUnreachable
		}
		s.Pending = append(s.Pending, c)
	}
}

// tally sets the counts from Pending, so that they and the list (and
// memfs status's text and JSON, which show them) never disagree.
func (s *Status) tally() {
	s.PendingUploads, s.PendingDeletes, s.PendingUnjournaled, s.NotUploaded = 0, 0, 0, 0
	for _, c := range s.Pending {
		switch c.Op {
		case "delete":
			s.PendingDeletes++
		case OpNotUploaded:
			s.NotUploaded++
		case "unjournaled":
			s.PendingUnjournaled++
			s.PendingUploads++
		default:
			s.PendingUploads++
		}
	}
}
