package syncqueue

import (
	"context"
	"crypto/rand"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/reconcile"
)

// TempPathPrefix begins the path a memory is parked at for the length of
// one pass when the pass's moves form a cycle (mv a t; mv b a; mv t b:
// each memory wants the other's path). The store can't swap two paths in
// one request, so one memory of the cycle moves here first, the others
// follow it round, and it takes its place last. The full path is
// /.memfs-moving-<memory id>-<random hex>: a name no file of a mount can
// hold by accident, unique per move. Other mounts of the store may see it
// for that moment; a pass cut short (a crash, a final sync out of time)
// leaves the memory there until the next pass of this mount, which moves
// it on from the journal.
const TempPathPrefix = reconcile.ParkPrefix

// resolvePaths retries, one at a time and in the order they were made,
// the changes the store refused for a path conflict, once the pass's
// other changes and deletes are in: a file moved onto a path another
// change frees (a move, a rename over an existing file). Rounds repeat
// while one makes progress; a round that makes none while the blocked
// changes block each other is a cycle of moves, broken by parking one
// memory at a temporary path (TempPathPrefix). What is still blocked
// after that waits for the next pass, with its reason.
//
// REQUIRES: f.e.syncMu NOT held.
func (f *flusher) resolvePaths(ctx context.Context, r *passRun) {
	retry := r.retry
	r.retry = nil
	sortByLSN(retry)
	for rounds := 2*len(retry) + 2; len(retry) > 0 && rounds > 0 && ctx.Err() == nil; rounds-- {
		var still []op
		progress := false
		for _, o := range retry {
			err := f.upload(ctx, o)
			if err == nil {
				r.done(o)
				progress = true
				continue
			}
			if v, first := f.judge(o, err); v == reconcile.VerdictRetryPath {
				still = append(still, o)
			} else {
				r.failed(o, v, first, err)
			}
		}
		retry = still
		if progress || len(retry) == 0 {
			continue
		}
		if !f.breakCycle(ctx, retry, r) {
			break
		}
	}
	r.mu.Lock()
	r.res.Failed += len(retry)
	r.mu.Unlock()
	paths := make([]string, len(retry))
	for i, o := range retry {
		paths[i] = o.entry.Path
	}
	// Said at info once for each set of waiting paths, not every pass
	// while they wait (status lists them meanwhile).
	if waiting := strings.Join(paths, ","); waiting != f.pathsWaiting {
		f.pathsWaiting = waiting
		if waiting != "" {
			f.log.WithField("paths", waiting).Info("changes wait on a path the store still holds for another memory; retried every pass")
		}
	}
}

// breakCycle parks at a temporary path one memory whose current path (as
// the store holds it) blocks another blocked change — the path itself,
// or a directory or file it collides with (reconcile.ChooseParked). It
// reports whether it moved one (or found the store changed it too: then
// the store wins).
//
// REQUIRES: f.e.syncMu NOT held.
func (f *flusher) breakCycle(ctx context.Context, blocked []op, r *passRun) bool {
	e := f.e
	e.syncMu.Lock()
	moves := make([]reconcile.BlockedMove, len(blocked))
	for i, y := range blocked {
		moves[i] = reconcile.BlockedMove{Create: y.kind == opCreate, Path: y.entry.Path}
		if k, ok := e.ms.known[y.target()]; ok && !moves[i].Create {
			moves[i].StorePath = k.path
		}
	}
	i, ok := reconcile.ChooseParked(moves)
	if !ok {
		e.syncMu.Unlock()
		return false
	}
	mover := blocked[i]
	id, base, from := mover.target(), mover.base(), moves[i].StorePath
	if err := e.hold(ctx, id); err != nil {
		e.syncMu.Unlock()
		return false
	}
	// The overlay will see this move: it is our own write (same bytes).
	e.ms.noteSent(id, base)
	e.syncMu.Unlock()

	random := make([]byte, 4)
	rand.Read(random) // never fails (crypto/rand)
	temp := reconcile.ParkPath(id, random)
	log := f.log.WithFields(logrus.Fields{"memory_id": id, "from": from, "temporary_path": temp})
	m, err := e.opts.Store.UpdateMemory(ctx, e.opts.StoreID, id, store.UpdateMemoryInput{Path: &temp, ExpectedSHA256: &base})
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	defer e.release(id)
	switch v, _ := reconcile.JudgeAnswer(describe(reconcile.UploadMove, err)); v {
	case reconcile.VerdictSettle:
	case reconcile.VerdictResolve:
		r.mu.Lock()
		r.conflicted = append(r.conflicted, id)
		r.mu.Unlock()
		return true
	default:
		log.WithError(err).Debug("could not park a memory to break a cycle of moves")
		return false
	}
	if fileID, ok := e.ms.byMemory[id]; ok {
		e.ms.agree(fileID, m)
	}
	log.Info("a cycle of moves: the memory is parked at a temporary path for this pass")
	return true
}
