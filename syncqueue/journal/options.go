package journal

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults applied by Open to zero Options fields.
const (
	DefaultGroupCommit     = 100 * time.Millisecond
	DefaultCompactMinBytes = 1 << 20
	DefaultMaxContentBytes = 1 << 20
)

// maxGroupCommit bounds the group-commit window: it is the amount of closed
// but not fsynced work a power loss may take, so it must stay short.
const maxGroupCommit = 10 * time.Second

// Options configure a Journal. The zero value is valid: zero fields take the
// documented defaults.
type Options struct {
	// GroupCommit is how long after a write the owner goroutine fdatasyncs
	// the journal, coalescing all writes in that window into one
	// fdatasync. Default 100 ms; at most 10 s.
	GroupCommit time.Duration

	// CompactMinBytes is the size below which the journal is not compacted
	// while something is pending (see "Compaction" in the package doc).
	// Default 1 MiB.
	CompactMinBytes int64

	// MaxContentBytes bounds the content of one change. The filesystem enforces
	// the store's 102,400-byte limit itself; this is a backstop against a
	// runaway caller. Default 1 MiB, at most 32 MiB (the format allows
	// records up to 64 MiB).
	MaxContentBytes int

	// Auth makes the journal this state dir's own: its key, identity,
	// store and session (required; see "Authentication" in the package
	// doc).
	Auth Auth

	// Log receives warnings (torn tail cut, compaction failures) and errors
	// (corruption, failed fdatasync). Default logrus.StandardLogger().
	Log logrus.FieldLogger
}

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.GroupCommit == 0 {
		o.GroupCommit = DefaultGroupCommit
	}
	if o.CompactMinBytes == 0 {
		o.CompactMinBytes = DefaultCompactMinBytes
	}
	if o.MaxContentBytes == 0 {
		o.MaxContentBytes = DefaultMaxContentBytes
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	return o
}

// Validate reports the first invalid field. Zero fields are valid (they take
// defaults).
func (o Options) Validate() error {
	if err := o.Auth.validate(); err != nil {
		return err
	}
	if o.GroupCommit < 0 || o.GroupCommit > maxGroupCommit {
		return fmt.Errorf("syncqueue: GroupCommit %v out of range (0 for the default, at most %v)", o.GroupCommit, maxGroupCommit)
	}
	if o.CompactMinBytes < 0 {
		return fmt.Errorf("syncqueue: CompactMinBytes %d is negative", o.CompactMinBytes)
	}
	if o.MaxContentBytes < 0 || o.MaxContentBytes > maxRecordLen/2 {
		return fmt.Errorf("syncqueue: MaxContentBytes %d out of range (0 for the default, at most %d)", o.MaxContentBytes, maxRecordLen/2)
	}
	return nil
}
