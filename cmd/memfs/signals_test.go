package main

import (
	"errors"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// sigTimeout bounds waiting for this process to handle a signal it sent
// itself.
const sigTimeout = 10 * time.Second

// TestSignals sends this test process real signals: the first ends the
// context, the second calls second, a third is caught (not the default
// action, which would kill the test binary), and after stop they are
// ignored.
func TestSignals(t *testing.T) {
	t.Cleanup(func() { signal.Reset(stopSignals...) })
	log, hook := logtest.NewNullLogger()
	var seconds atomic.Int32
	secondCalled := make(chan struct{}, 4)
	ctx, stop := signals(log, func() { seconds.Add(1); secondCalled <- struct{}{} })

	kill(t, syscall.SIGINT)
	select {
	case <-ctx.Done():
	case <-time.After(sigTimeout):
		t.Fatal("the first SIGINT did not end the context")
	}
	if n := seconds.Load(); n != 0 {
		t.Fatalf("second was called %d times after one signal", n)
	}

	kill(t, syscall.SIGTERM)
	select {
	case <-secondCalled:
	case <-time.After(sigTimeout):
		t.Fatal("the second signal did not call second")
	}

	kill(t, syscall.SIGINT)
	waitLog(t, hook, "already stopping")
	if n := seconds.Load(); n != 1 {
		t.Errorf("second was called %d times after three signals, want once", n)
	}

	stop()
	for _, s := range stopSignals {
		if !signal.Ignored(s) {
			t.Errorf("%v is not ignored after stop: a signal on the way out would kill the process", s)
		}
	}
	kill(t, syscall.SIGINT) // ignored: the test goes on
}

// TestCutShortError: a stop cut short exits with its own status, and says
// what replays the journal and what else failed.
func TestCutShortError(t *testing.T) {
	err := cutShortError("the next mount", errors.New("unmount: busy"))
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitCutShort {
		t.Fatalf("cutShortError = %#v, want an exitError with code %d", err, exitCutShort)
	}
	for _, s := range []string{"second signal", "journal", "the next mount", "unmount: busy"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
	register("test-cut-short", "", func([]string) error { return err })
	t.Cleanup(func() { delete(commands, "test-cut-short") })
	if code := run([]string{"test-cut-short"}); code != exitCutShort {
		t.Errorf("the command exits %d, want %d", code, exitCutShort)
	}
}

func kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
}

// waitLog polls hook until an entry's message contains msg.
func waitLog(t *testing.T, hook *logtest.Hook, msg string) {
	t.Helper()
	deadline := time.Now().Add(sigTimeout)
	for {
		for _, e := range hook.AllEntries() {
			if strings.Contains(e.Message, msg) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log entry %q within %s; got %v", msg, sigTimeout, messages(hook.AllEntries()))
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

func messages(es []*logrus.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Message
	}
	return out
}
