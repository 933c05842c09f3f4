package syncqueue

import "time"

// A store at its memory cap refuses every create (422) until a memory is
// deleted, or its cap is raised. Sending every new file again every pass
// floods it (5,027 files over the cap at a 5 s interval were 25,151
// refusals a minute), so once a create is refused at the cap, new files
// wait, without a request, for a sign that there is room:
//
//   - a delete seen in the change feed or the listing (by anyone: another
//     client, or this mount's own delete coming back);
//   - a delete sent by the same pass (flusher.retryCapped);
//   - or, without either, a capped backoff (capRetryMin doubling up to
//     capRetryMax, with jitter), which also finds a cap that was raised;
//   - and the final sync of a mount's end, which has no later pass.
//
// On such a sign the waiting creates are tried one at a time, oldest
// first, and the first refused at the cap ends the try: a delete that
// made room for one file costs two requests, not one per waiting file.
// A create that goes up ends the wait: the next pass sends new files as
// usual.

// The backoff between tries of a store at its cap, without a sign of room.
const (
	capRetryMin = 30 * time.Second
	capRetryMax = 5 * time.Minute
)

// capWait is the flusher's knowledge of the store's memory cap: the
// owner's, as the flusher's other bookkeeping.
type capWait struct {
	full    bool      // a create was refused at the cap and none went up since
	room    bool      // a delete was seen since the last refusal
	retryAt time.Time // without a sign of room, when creates are tried again
	bo      retryDelay
	// epoch counts the refusals that found the store full: a create sent
	// before the latest (in the same batch) says nothing about room now.
	epoch uint64
}

func newCapWait() capWait { return capWait{bo: newBackoff(capRetryMin, capRetryMax)} }

// refused records a create refused at the cap at now. Refusals of creates
// sent together (before the first answer) count as one.
func (c *capWait) refused(now time.Time) {
	if c.full && !c.room && now.Before(c.retryAt) {
		return
	}
	c.full, c.room = true, false
	c.retryAt = now.Add(c.bo.next())
	c.epoch++
}

// created records a create the store took, sent at epoch: the store had
// room then, so unless a refusal came since, new files go up as usual.
func (c *capWait) created(epoch uint64) {
	if epoch != c.epoch {
		return // sent with creates the store refused after taking it
	}
	c.full, c.room = false, false
	c.bo.reset()
}

// roomSeen records a delete in the store: a sign there may be room.
func (c *capWait) roomSeen() {
	if c.full {
		c.room = true
	}
}

// mayTry reports whether waiting creates are tried now: the store is not
// known to be full, or there is a sign of room (roomMade: the pass deleted
// something), or the backoff is over, or this is a final pass.
func (c *capWait) mayTry(now time.Time, roomMade, final bool) bool {
	return !c.full || c.room || roomMade || final || !now.Before(c.retryAt)
}

// retryTime is when creates are tried again without a sign of room (zero
// when the store is not known to be full).
func (c *capWait) retryTime() time.Time {
	if !c.full {
		return time.Time{}
	}
	return c.retryAt
}
