package worker

import (
	"strings"
	"testing"
	"time"
)

// Config.Validate refuses a quiet period the engine would refuse, with the
// rule in the error, and lets it through (unchecked) with sync off.
func TestConfigValidateQuiet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		interval, quiet time.Duration
		ok              bool
	}{
		{15 * time.Second, time.Second, true},
		{15 * time.Second, 0, true},
		{0, time.Minute, true},
		{15 * time.Second, 10 * time.Millisecond, false},
		{5 * time.Second, 5 * time.Second, false},
	} {
		c := Config{APIURL: "http://127.0.0.1:1", StateDir: t.TempDir(), Interval: tc.interval, Quiet: tc.quiet}
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("interval %s, quiet %s: %v, want ok=%v", tc.interval, tc.quiet, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "quiet period must be at least 100ms and shorter than the interval") {
			t.Errorf("interval %s, quiet %s: unclear error %q", tc.interval, tc.quiet, err)
		}
	}
}
