package worker

import (
	"maps"
	"slices"
	"sync"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/syncqueue/journal"
)

// leftovers is what the ends of one process's engines (mounts taken down,
// journals replayed) left in their journals, store by store. The latest
// end of a store counts: a store mounted or replayed again starts from its
// journal and ends anew. memfs worker, session and up compute their exit
// status from it when they stop.
type leftovers struct {
	mu sync.Mutex
	by map[string]syncqueue.Left // GUARDED_BY(mu)
}

func (l *leftovers) note(left syncqueue.Left) {
	if left.StoreID == "" {
		return // a read-only store, or an engine that never opened
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]syncqueue.Left{}
	}
	l.by[left.StoreID] = left
}

// list returns the stores whose journals were left holding changes, by
// store id.
func (l *leftovers) list() []syncqueue.Left {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []syncqueue.Left
	for _, id := range slices.Sorted(maps.Keys(l.by)) {
		if !l.by[id].Empty() {
			out = append(out, l.by[id])
		}
	}
	return out
}

// leftOnDisk is what a store's journal holds, read without opening it:
// what a replay that could not start leaves.
func leftOnDisk(stateDir, storeID string) syncqueue.Left {
	info, err := journal.Inspect(syncqueue.JournalDir(stateDir, storeID))
	if err != nil {
		return syncqueue.Left{StoreID: storeID}
	}
	return syncqueue.Left{StoreID: storeID, Changes: info.Pending, Deletes: info.Deletes}
}

// Left lists the stores whose journals this worker's ends left holding
// changes (complete once Run has returned).
func (w *Worker) Left() []syncqueue.Left { return w.host.left.list() }

// Left lists the stores whose journals this session's ends (and Recover's
// replays) left holding changes (complete once Run has returned).
func (s *Session) Left() []syncqueue.Left { return s.host.left.list() }
