package harness

import (
	"bytes"
	"sync"
)

// LockedBuffer is a log destination that is safe to read while a server,
// an engine or a child process is still writing to it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer // GUARDED_BY(mu)
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
