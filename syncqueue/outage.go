package syncqueue

import (
	"sync"

	"github.com/sirupsen/logrus"
)

// outage reports the store's reachability once per outage: one "store
// unreachable" warning with the error, one "recovered" line with the count
// of failures — never a line per attempt. The flusher and the overlay share
// it.
type outage struct {
	log      logrus.FieldLogger
	mu       sync.Mutex
	down     bool // GUARDED_BY(mu)
	failures int  // GUARDED_BY(mu)
}

func (o *outage) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	if !o.down {
		o.down = true
		o.log.WithError(err).Warn("store unreachable: the mount keeps working, changes stay journaled and are retried")
	}
}

func (o *outage) ok() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		o.log.WithField("failures", o.failures).Info("store recovered")
		o.down, o.failures = false, 0
	}
}

// isDown reports whether the last attempt failed.
func (o *outage) isDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}
