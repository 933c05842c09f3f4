// Package reconcile holds the sync engine's decisions as pure functions:
// given what the local copy and the store hold for one memory, it returns
// the actions that bring them together, in the order they must run. It
// holds no locks, does no I/O and knows nothing of the tree, the journal
// or the network: the engine (package syncqueue) gathers the input from
// its state and carries the actions out.
//
// The merge of one remote state into the local copy follows the rule
// table of docs/sync.md, rows R1–R18. The table is data here ([Rules],
// [FeedRules]): each [Rule] names its row, a condition and the actions it
// yields; [Decide] and [DecideFeed] take the first rule that matches,
// after the actions of any matching rule marked Then (a step that comes
// first and lets the rows below apply). The order of the rules is the
// order of docs/sync.md, "Checked in this order".
//
// An executor runs the actions in order and stops at the first that
// fails ([Fail], a [Commit] that can't journal, or a [KeepConflict] whose
// conflict log can't be written): the actions are ordered so that a
// local file is never replaced before its content is safe. A [Commit]
// ends a decision: once the open writes of the file at the remote path
// are journaled, the executor decides again on its new pending entry.
package reconcile
