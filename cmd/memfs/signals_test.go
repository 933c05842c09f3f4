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

	"github.com/memfs/memfs/syncqueue"
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

// TestStopError: the exit status of a command that synced comes from what
// its engines left, not from how the stop began, and the message says
// what is left, why, and what uploads it.
func TestStopError(t *testing.T) {
	left := syncqueue.Left{StoreID: "memstore_a", Changes: 2, Reasons: map[string]int{syncqueue.ReasonUnreachable: 1, syncqueue.ReasonNotUTF8: 1}}
	tests := []struct {
		name string
		left []syncqueue.Left
		cut  bool
		err  error
		code int
		says []string
	}{
		{"nothing left", []syncqueue.Left{{StoreID: "memstore_a"}, {}}, false, nil, 0, nil},
		{"a second signal that left nothing", []syncqueue.Left{{StoreID: "memstore_a"}}, true, nil, 0, nil},
		{"changes left", []syncqueue.Left{{StoreID: "memstore_b"}, left}, false, nil, exitLeft,
			[]string{"left in the journal", "memstore_a: 2 changes", "1 store unreachable", "1 content is not UTF-8", "the next mount"}},
		{"changes left by a cut-short stop", []syncqueue.Left{left}, true, nil, exitLeft,
			[]string{"cut short by a second signal", "memstore_a: 2 changes", "the next mount"}},
		{"an error wins", []syncqueue.Left{left}, false, errors.New("unmount: busy"), 1,
			[]string{"unmount: busy", "memstore_a: 2 changes"}},
		{"an error alone", nil, false, errors.New("unmount: busy"), 1, []string{"unmount: busy"}},
		{"files never journaled are lost", []syncqueue.Left{{StoreID: "memstore_a", Unjournaled: 2}}, false, nil, 1,
			[]string{"2 closed file(s) never reached the journal", "lost"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := stopError(tc.left, tc.cut, "the next mount", tc.err)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("stopError = %v, want nil", err)
				}
			} else if err == nil {
				t.Fatalf("stopError = nil, want exit %d", tc.code)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not say %q", err, s)
				}
			}
			name := "test-stop-" + strings.ReplaceAll(tc.name, " ", "-")
			register(name, "", func([]string) error { return err })
			t.Cleanup(func() { delete(commands, name) })
			if code := run([]string{name}); code != tc.code {
				t.Errorf("the command exits %d, want %d", code, tc.code)
			}
		})
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
