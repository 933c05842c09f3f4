package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestChildFailedStatus: mount.memfs names how its memfs mount ended,
// exit status 0 included, never as a Go "<nil>".
func TestChildFailedStatus(t *testing.T) {
	err := childFailed(nil, "/state/log/mount-x.log", 0)
	if msg := err.Error(); strings.Contains(msg, "<nil>") || !strings.Contains(msg, "exit status 0") {
		t.Errorf("a child that exited 0: %q", msg)
	}
	if ee, ok := err.(exitError); !ok || ee.code != 1 {
		t.Errorf("a child that exited 0 before mounting: %#v, want exit status 1", err)
	}
	waitErr := exec.Command("sh", "-c", "exit 3").Run()
	err = childFailed(waitErr, "/state/log/mount-x.log", 0)
	if ee, ok := err.(exitError); !ok || ee.code != 3 || !strings.Contains(ee.msg, "exit status 3") {
		t.Errorf("a child that exited 3: %#v", err)
	}
}
