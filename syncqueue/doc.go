// Package syncqueue is the sync engine of one mounted store: it loads the
// store into the filesystem's tree, uploads the local changes its journal
// (package syncqueue/journal) holds, brings the store's changes down, and
// settles collisions in the store's favour, keeping the losing local
// version in the conflict log.
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
//	merge.go      the rule table of docs/sync.md, one function per row
//	conflicts.go  the conflict log
//	outage.go     one "unreachable" line per outage, one "recovered" line
//	observe.go    the Observer metrics hang on (passes, remote changes, conflicts)
//	left.go       what an engine's end left in the journal (the exit statuses)
//	scratch.go    the write tool's temporary files: held for a grace, then uploaded
package syncqueue
