// Package backoff computes the wait before a retry: exponential from a
// minimum, capped at a maximum, and jittered so that clients that failed
// together do not all come back at the same instant.
//
// A Policy holds no state; the caller counts its failures in a row and asks
// for Delay(attempt), attempt 0 being the wait after the first failure.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jitter says how a wait is drawn below its ceiling, the capped
// Min·2^attempt.
type Jitter int

const (
	// Equal draws the wait uniformly from [ceiling/2, ceiling]: it keeps
	// the exponential growth and spreads each wait over its upper half.
	Equal Jitter = iota
	// Full draws the wait uniformly from [Min, ceiling]: never shorter
	// than Min, often much shorter than the ceiling.
	Full
)

// Policy is a capped exponential backoff with jitter. The zero Jitter is
// Equal.
type Policy struct {
	Min    time.Duration // the ceiling of attempt 0; must be > 0
	Max    time.Duration // the cap of every ceiling; a Max below Min is Min
	Jitter Jitter

	// Rand returns a uniform duration in [0, n), n > 0. Nil is
	// math/rand/v2; tests pass one that returns 0 or n-1.
	Rand func(n time.Duration) time.Duration
}

// Ceiling is Min·2^attempt capped at Max, without overflow for any
// attempt; a negative attempt counts as 0.
func (p Policy) Ceiling(attempt int) time.Duration {
	hi := max(p.Max, p.Min)
	c := p.Min
	if c <= 0 {
		return 0
	}
	for range max(attempt, 0) {
		if c > hi/2 {
			return hi
		}
		c *= 2
	}
	return min(c, hi)
}

// Delay is the wait before retry number attempt+1, drawn as p.Jitter says
// below Ceiling(attempt).
func (p Policy) Delay(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	lo := c / 2
	if p.Jitter == Full {
		lo = min(p.Min, c)
	}
	if c <= lo {
		return c
	}
	return lo + p.rand(c-lo+1)
}

func (p Policy) rand(n time.Duration) time.Duration {
	if p.Rand != nil {
		return p.Rand(n)
	}
	return rand.N(n)
}
