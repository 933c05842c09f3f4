// Package syncqueue is the sync engine of one mounted store: it loads the
// store into the filesystem's tree, uploads the local changes its journal
// (package syncqueue/journal) holds, brings the store's changes down, and
// settles collisions in the store's favour, keeping the losing local
// version in the conflict log.
//
// The decisions — which row of the rule table of docs/sync.md a remote
// change meets, how a store's answer is judged, what a pass uploads — are
// pure functions in package syncqueue/reconcile, with no lock and no I/O.
//
// The journal is the durable half: what was closed on the mount and not
// yet confirmed by the store. This package is the moving half:
//
//	engine.go     lifecycle (NewEngine, Open, Start, Finish, Close)
//	owner.go      the one goroutine that owns the sync state and carries out every answer
//	busy.go       the busy rule: a memory with a request in flight gets no other decision
//	pass.go       a pass as phases driven by answers
//	flusher.go    local → store: one pass uploads the net change of each file
//	overlay.go    store → local: the change feed, or a listing every interval
//	merge.go      store → local: gathers a memory's two sides, asks reconcile.Decide, carries out its actions
//	deletes.go    local deletes: the 30 s wait, the confirming pass, the cap (reconcile.PlanDeletes)
//	paths.go      path conflicts and cycles of moves, parked and retried (reconcile.ChooseParked)
//	conflicts.go  the conflict log
//	local.go      Local, the engine's view of the local copy (the FUSE tree by default)
//	load.go       the store's listing into the local copy; lazy.go: content behind it
//	schedule.go   when passes run: the quiet period and the interval (SyncNow, in engine.go, asks at once)
//	versions.go   without a feed: the versions created since the last one seen
//	capwait.go    creates that wait at the store's memory cap
//	journalerr.go the reasons status gives for a change the journal could not take
//	status.go     what memfs status and the metrics show
//	outage.go     one "unreachable" line per outage, one "recovered" line
//	observe.go    the Observer metrics hang on (passes, remote changes, conflicts)
//	left.go       what an engine's end left in the journal (the exit statuses)
//	scratch.go    the write tool's temporary files: held for a grace, then uploaded
package syncqueue
