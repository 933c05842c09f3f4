package syncqueue

import "time"

// Observer is told what the engine does, for metrics: package
// worker/metrics counts it (this package imports no metrics library).
// What is a level rather than an event — pending changes, journal bytes,
// the last successful sync — is read from Status when metrics are
// scraped, not pushed here.
//
// Its methods run on the engine's goroutines, some with the engine's
// locks held: they must be cheap, must not block, and must not call back
// into the engine.
type Observer interface {
	// PassDone follows every flusher pass, the final one included: when
	// it began, how long it took, what it did. waiting counts the changes
	// the pass tried and left pending, by the reason each waits (a Reason
	// constant): one per change per pass, so a change that waits three
	// passes counts three times.
	PassDone(p PassInfo, waiting map[string]int)
	// RemoteApplied follows each change from the store shown on the
	// mount (a new, changed, moved or deleted memory; a restore).
	RemoteApplied()
	// ConflictKept follows each local version kept in the conflict log
	// because the store won.
	ConflictKept()
}

// nopObserver is the Observer of an engine without one.
type nopObserver struct{}

func (nopObserver) PassDone(PassInfo, map[string]int) {}
func (nopObserver) RemoteApplied()                    {}
func (nopObserver) ConflictKept()                     {}

// waitingAfter counts, by reason, the changes a pass that began at start
// left pending after trying them: those whose wait it recorded (a change
// that goes up loses its wait), plus the unjournaled files closed while
// the journal had no room.
func (f *flusher) waitingAfter(start time.Time, unjournaled int) map[string]int {
	out := map[string]int{}
	if unjournaled > 0 {
		out[ReasonNoSpace] = unjournaled
	}
	for _, w := range f.waits {
		if !w.at.Before(start) {
			out[w.reason]++
		}
	}
	return out
}
