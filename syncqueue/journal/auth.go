package journal

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
)

// macLen is the length of a record's MAC: HMAC-SHA256 truncated to 128
// bits.
const macLen = 16

// macDomain opens the input of every record MAC, so the key signs
// nothing else by accident.
const macDomain = "memfs journal v2\x00"

// Auth is what makes a journal this state dir's own (see "Authentication"
// in the package doc). Open requires Key, Identity and StoreID.
type Auth struct {
	// Key is the state dir's journal key (statedir.KeyLen bytes), held
	// only by its user.
	Key []byte
	// Identity names the state dir: a journal naming another is refused.
	Identity string
	// StoreID is the store whose journal this is: a journal naming
	// another is refused.
	StoreID string
	// Session is the session whose credential uploads the journal's
	// changes ("" for an API key). A journal written in another session
	// is set aside, untouched, for that session (see "Sessions" in the
	// package doc), unless AnySession.
	Session string
	// AnySession takes up a journal written in any session (memfs replay
	// and the worker's --replay-api-key, whose key is an actor of its
	// own): Journal.Session then tells which it was.
	AnySession bool
}

func (a Auth) validate() error {
	switch {
	case len(a.Key) < 16:
		return errors.New("syncqueue: Options.Auth.Key is required (the state dir's journal key)")
	case a.Identity == "" || a.StoreID == "":
		return errors.New("syncqueue: Options.Auth.Identity and StoreID are required")
	case !validName(a.Session):
		return fmt.Errorf("syncqueue: session id %q can't name a directory", a.Session)
	}
	return nil
}

// validName reports whether s may name a directory under the journal's
// (held/<session>): "" or a single path element.
func validName(s string) bool {
	if s == "." || s == ".." || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] == 0 {
			return false
		}
	}
	return true
}

// sealer computes and checks record MACs for one (store, identity,
// session).
type sealer struct {
	key    []byte
	prefix []byte // macDomain, then store id, identity and session as strings
}

func newSealer(key []byte, storeID, identity, session string) *sealer {
	p := []byte(macDomain)
	p = appendStr(p, storeID)
	p = appendStr(p, identity)
	p = appendStr(p, session)
	return &sealer{key: key, prefix: p}
}

// mac is the MAC of a record's type and payload.
func (s *sealer) mac(body []byte) []byte {
	if s == nil {
		return make([]byte, macLen) // Inspect: never written, never checked
	}
	h := hmac.New(sha256.New, s.key)
	h.Write(s.prefix)
	h.Write(body)
	return h.Sum(nil)[:macLen]
}

// verify reports whether mac is body's MAC.
func (s *sealer) verify(body, mac []byte) bool {
	return hmac.Equal(s.mac(body), mac)
}

// journalContext is what a CONTEXT record names.
type journalContext struct {
	storeID, identity, session string
}

// Refusal is why Open would not take up a journal: it was not written by
// this state dir's user for this store, or can't be shown to have been.
// The file is moved aside, never deleted or overwritten (see
// "Authentication" in the package doc).
type Refusal struct {
	// Reason says which check failed.
	Reason string
	// Path is the journal as found; KeptAt where it was moved.
	Path, KeptAt string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("journal %s refused: %s (kept at %s)", r.Path, r.Reason, r.KeptAt)
}

// Held is a journal written in another session, set aside for it.
type Held struct {
	Session string // the session it was written in
	Path    string // the journal as found
	KeptAt  string // where it waits
	Pending int    // its pending changes
}

// refusedError is a check that refuses a whole journal, found while
// reading it.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return e.reason }

// encodeContext returns the CONTEXT record of a journal for c.
func encodeContext(c journalContext, s *sealer) []byte {
	return encodeRecord(&record{typ: recContext, ctx: c}, s)
}
