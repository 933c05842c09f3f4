package worker

import (
	"strings"
	"testing"
)

// TestConfigMountMode: the worker's mount mode is checked with the rest
// of its configuration; "" is FUSE, as for MountOptions.
func TestConfigMountMode(t *testing.T) {
	for _, mode := range []string{"", ModeFUSE, ModeDirectory, ModeAuto} {
		c := Config{APIURL: "http://127.0.0.1:8080", StateDir: t.TempDir(), MountMode: mode}
		if err := c.Validate(); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	c := Config{APIURL: "http://127.0.0.1:8080", StateDir: t.TempDir(), MountMode: "fusion"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "fuse, directory or auto") {
		t.Errorf("mode fusion: %v", err)
	}
}
