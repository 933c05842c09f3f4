package syncqueue

import (
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
// after that waits for the next pass, with its reason; then the pass
// resolves its conflicts.
func (e *Engine) resolvePaths(p *pass) {
	p.retry = p.r.retry
	p.r.retry = nil
	sortByLSN(p.retry)
	p.rounds = 2*len(p.retry) + 2
	e.pathRound(p)
}

// pathRound begins a round of path-conflict retries, if one is due.
func (e *Engine) pathRound(p *pass) {
	if len(p.retry) == 0 || p.rounds <= 0 || p.ctx.Err() != nil {
		e.pathsDone(p)
		return
	}
	p.rounds--
	p.still, p.progress = nil, false
	e.pathRetry(p, 0)
}

// pathRetry retries p.retry[i] and the rest of the round after it.
func (e *Engine) pathRetry(p *pass, i int) {
	if i == len(p.retry) {
		e.pathRoundDone(p)
		return
	}
	o := p.retry[i]
	e.upload(p.ctx, o, func(err error) {
		if err == nil {
			p.r.done(o)
			p.progress = true
		} else if v, first := e.f.judge(o, err); v == reconcile.VerdictRetryPath {
			p.still = append(p.still, o)
		} else {
			p.r.failed(o, v, first, err)
		}
		e.pathRetry(p, i+1)
	})
}

// pathRoundDone ends a round: the next one follows if it made progress,
// else a cycle of moves is broken first, if there is one.
func (e *Engine) pathRoundDone(p *pass) {
	p.retry = p.still
	if p.progress || len(p.retry) == 0 {
		e.pathRound(p)
		return
	}
	e.breakCycle(p, func(parked bool) {
		if !parked {
			e.pathsDone(p)
			return
		}
		e.pathRound(p)
	})
}

// pathsDone counts and logs the changes still blocked, and resolves the
// pass's conflicts.
func (e *Engine) pathsDone(p *pass) {
	f := e.f
	p.r.res.Failed += len(p.retry)
	paths := make([]string, len(p.retry))
	for i, o := range p.retry {
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
	e.resolveConflicts(p, 0)
}

// breakCycle parks at a temporary path one memory whose current path (as
// the store holds it) blocks another blocked change — the path itself,
// or a directory or file it collides with (reconcile.ChooseParked). then
// hears whether it moved one (or found the store changed it too: then
// the store wins).
func (e *Engine) breakCycle(p *pass, then func(parked bool)) {
	moves := make([]reconcile.BlockedMove, len(p.retry))
	for i, y := range p.retry {
		moves[i] = reconcile.BlockedMove{Create: y.kind == opCreate, Path: y.entry.Path}
		if k, ok := e.ms.known[y.target()]; ok && !moves[i].Create {
			moves[i].StorePath = k.path
		}
	}
	i, ok := reconcile.ChooseParked(moves)
	if !ok {
		then(false)
		return
	}
	id, base, from := p.retry[i].target(), p.retry[i].base(), moves[i].StorePath
	e.whenFree(id, func() {
		e.markBusy(id)
		// The overlay will see this move: it is our own write (same bytes).
		e.ms.noteSent(id, base)
		random := make([]byte, 4)
		rand.Read(random) // never fails (crypto/rand)
		temp := reconcile.ParkPath(id, random)
		log := e.f.log.WithFields(logrus.Fields{"memory_id": id, "from": from, "temporary_path": temp})
		st, sid, ctx := e.opts.Store, e.opts.StoreID, p.ctx
		e.request(func() ownerEvent {
			m, err := st.UpdateMemory(ctx, sid, id, store.UpdateMemoryInput{Path: &temp, ExpectedSHA256: &base})
			var parked bool
			return answered{id: id, answer: func() { parked = e.parked(p, id, m, err, log) }, next: func() { then(parked) }}
		})
	})
}

// parked carries out the answer to a park, and reports whether the cycle
// was broken.
func (e *Engine) parked(p *pass, id string, m *store.Memory, err error, log logrus.FieldLogger) bool {
	switch v, _ := reconcile.JudgeAnswer(describe(reconcile.UploadMove, err)); v {
	case reconcile.VerdictSettle:
	case reconcile.VerdictResolve:
		p.r.conflicted = append(p.r.conflicted, id)
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
