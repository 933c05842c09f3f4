package history

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads a moment given on the command line: an RFC 3339 time
// (2026-12-01T09:30:00Z, fractional seconds allowed), or a duration
// meaning that long before now (90s, 45m, 2h, 1h30m, 3d: Go's durations
// and a whole number of days).
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("no time given: an RFC 3339 time (2026-12-01T09:30:00Z) or a duration ago (2h, 3d)")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseAgo(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T09:30:00Z) nor a duration ago (2h, 90m, 3d)", s)
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("%q: a duration ago can't be negative", s)
	}
	return now.Add(-d), nil
}

func parseAgo(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// IsTime says whether s reads as a time for ParseTime: what a VERSION
// argument is when it is not a version id.
func IsTime(s string) bool {
	_, err := ParseTime(s, time.Now())
	return err == nil
}
