package worker

import (
	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
)

// Metrics is told what a worker does and observes every store it mounts.
// It is implemented with Prometheus in worker/metrics (this package
// imports no metrics library); nil observes nothing.
type Metrics interface {
	MountMetrics
	// Claimed follows each work item the worker claims.
	Claimed()
	// Ended follows the end of each work item a session ran: how it
	// ended, and the error that failed it before it ran (nil otherwise).
	Ended(ending Ending, err error)
	// HeartbeatFailed follows each heartbeat that failed.
	HeartbeatFailed()
}

// MountMetrics observes mounted stores (memfs mount and up use it alone).
type MountMetrics interface {
	// Store is called before storeID is mounted. What it returns
	// observes the mount's engine and FUSE requests until Done.
	Store(storeID string) StoreMetrics
}

// StoreMetrics observes one mounted store.
type StoreMetrics interface {
	syncqueue.Observer
	fs.OpObserver
	// Watch is called once the store is mounted: levels (pending
	// changes, journal bytes, the last sync) are read from status when
	// metrics are scraped.
	Watch(status func() syncqueue.Status)
	// Shown is called once the store is mounted, with its mode (ModeFUSE
	// or ModeDirectory) and, for a directory, what its watch and looks
	// have done, read when metrics are scraped (nil for FUSE).
	Shown(mode string, folder func() dirmode.Stats)
	// Covered is called whenever the number of mounts over or inside
	// the store's mount path changes (covered.go), from the mount-table
	// watch; it may be called before Watch.
	Covered(n int)
	// Done is called when the mount begins to close, or failed to
	// mount: the store's figures are dropped (a process mounts a store
	// once at a time).
	Done()
}

// nopMetrics is the Metrics of a worker without metrics.
type nopMetrics struct{}

func (nopMetrics) Store(string) StoreMetrics { return nil }
func (nopMetrics) Claimed()                  {}
func (nopMetrics) Ended(Ending, error)       {}
func (nopMetrics) HeartbeatFailed()          {}

// observeStore hangs a store's observers on opts (nil when opts.Metrics
// is): the engine's and the FUSE mount's.
func observeStore(opts *MountOptions) StoreMetrics {
	if opts.Metrics == nil {
		return nil
	}
	sm := opts.Metrics.Store(opts.Engine.StoreID)
	if sm != nil {
		opts.Engine.Observer, opts.FS.Observer = sm, sm
	}
	return sm
}
