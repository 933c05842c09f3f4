package backoff

import (
	"math"
	"testing"
	"time"
)

// lowest and highest are Rand functions at the two ends of their range.
func lowest(time.Duration) time.Duration    { return 0 }
func highest(n time.Duration) time.Duration { return n - 1 }

func TestCeiling(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{-1, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{6, 6400 * time.Millisecond},
		{7, 10 * time.Second}, // 12.8 s, capped
		{62, 10 * time.Second},
		{63, 10 * time.Second},
		{64, 10 * time.Second},
		{1000, 10 * time.Second},
		{math.MaxInt, 10 * time.Second},
	} {
		if got := p.Ceiling(tc.attempt); got != tc.want {
			t.Errorf("Ceiling(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
	huge := Policy{Min: time.Nanosecond, Max: math.MaxInt64}
	if got := huge.Ceiling(62); got != 1<<62 {
		t.Errorf("Ceiling(62) with no cap = %d, want 2^62", got)
	}
	if got := huge.Ceiling(63); got != math.MaxInt64 {
		t.Errorf("Ceiling(63) with no cap = %d, want the cap, not an overflow", got)
	}
	if got := (Policy{Min: time.Second, Max: time.Millisecond}).Ceiling(5); got != time.Second {
		t.Errorf("a Max below Min: Ceiling = %s, want Min", got)
	}
	if got := (Policy{Max: time.Second}).Ceiling(math.MaxInt); got != 0 {
		t.Errorf("a zero Min: Ceiling = %s, want 0", got)
	}
}

func TestDelay(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name    string
		p       Policy
		attempt int
		lo, hi  time.Duration // the Delay at Rand's two ends
	}{
		{"equal, first", Policy{Min: 100 * ms, Max: 10 * time.Second}, 0, 50 * ms, 100 * ms},
		{"equal, third", Policy{Min: 100 * ms, Max: 10 * time.Second}, 2, 200 * ms, 400 * ms},
		{"equal, capped", Policy{Min: 100 * ms, Max: 10 * time.Second}, 40, 5 * time.Second, 10 * time.Second},
		{"equal, past overflow", Policy{Min: 100 * ms, Max: 10 * time.Second}, math.MaxInt, 5 * time.Second, 10 * time.Second},
		{"full, first", Policy{Min: 100 * ms, Max: 2 * time.Second, Jitter: Full}, 0, 100 * ms, 100 * ms},
		{"full, third", Policy{Min: 100 * ms, Max: 2 * time.Second, Jitter: Full}, 2, 100 * ms, 400 * ms},
		{"full, capped", Policy{Min: 100 * ms, Max: 2 * time.Second, Jitter: Full}, 100, 100 * ms, 2 * time.Second},
		{"min equals max", Policy{Min: 500 * ms, Max: 500 * ms}, 3, 250 * ms, 500 * ms},
		{"zero min", Policy{Max: time.Second}, 3, 0, 0},
	} {
		lo, hi := tc.p, tc.p
		lo.Rand, hi.Rand = lowest, highest
		if got := lo.Delay(tc.attempt); got != tc.lo {
			t.Errorf("%s: lowest Delay(%d) = %s, want %s", tc.name, tc.attempt, got, tc.lo)
		}
		if got := hi.Delay(tc.attempt); got != tc.hi {
			t.Errorf("%s: highest Delay(%d) = %s, want %s", tc.name, tc.attempt, got, tc.hi)
		}
		// The real source stays in the same range.
		for range 200 {
			if d := tc.p.Delay(tc.attempt); d < tc.lo || d > tc.hi {
				t.Fatalf("%s: Delay(%d) = %s, outside [%s, %s]", tc.name, tc.attempt, d, tc.lo, tc.hi)
			}
		}
	}
}

// Rand is asked for the whole span, both ends included.
func TestDelayAsksRandForTheSpan(t *testing.T) {
	var asked time.Duration
	p := Policy{Min: 100 * time.Millisecond, Max: time.Second, Rand: func(n time.Duration) time.Duration {
		asked = n
		return 0
	}}
	p.Delay(1) // ceiling 200 ms: [100 ms, 200 ms] has 100 ms + 1 values
	if want := 100*time.Millisecond + 1; asked != want {
		t.Errorf("Rand was asked for [0, %d), want [0, %d)", asked, want)
	}
}
