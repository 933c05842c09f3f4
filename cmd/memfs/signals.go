package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
)

// exitCutShort is the exit status of a command that mounts (mount, up)
// when a second signal cut its stop short: it stopped waiting for the
// final sync or a busy mount, detached the mounts anyway, and what was not
// uploaded stays in the journal for the next mount to replay. It is documented in their --help
// and the README, so scripts can tell it from success (0), a failure (1)
// and a usage error (2).
const exitCutShort = 3

// exitError ends a command with its own exit status; its message goes to
// stderr like any error's.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// cutShortError is the error of a stop cut short by a second signal: it
// says where the changes left over are and what replays them. err, when
// not nil, is what else went wrong while stopping.
func cutShortError(replayedBy string, err error) error {
	msg := "stop cut short by a second signal: changes not yet uploaded stay in the journal and are replayed by " + replayedBy
	if err != nil {
		msg = fmt.Sprintf("%s; stopping also failed: %v", msg, err)
	}
	return exitError{code: exitCutShort, msg: msg}
}

// stopSignals are the signals that stop a command.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT}

// signals returns a context ended by the first SIGTERM/SIGINT (the clean
// stop begins) and calls second on the next one (stop waiting: cut the
// final syncs short, but still detach the mounts and close the journals).
//
// Every signal after that is caught and logged too, never left to its
// default action: a process killed between the start of its stop and the
// detach leaves a dead mount ("Transport endpoint is not connected") that
// the next mount refuses. timeout(1) sends two signals (one to the
// process, one to its group), and people press Ctrl-C twice.
//
// stop, called on the way out, leaves the signals ignored rather than
// restoring their default for the same reason: a signal between it and the
// exit would turn the exit status into "killed". It waits for the
// goroutine that reads them.
func signals(log logrus.FieldLogger, second func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, stopSignals...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for s := range ch {
			n++
			l := log.WithField("signal", s.String())
			switch n {
			case 1:
				l.Info("stopping: uploading what is pending, then unmounting (send the signal again to stop waiting)")
				cancel()
			case 2:
				l.Warn("second signal: not waiting for uploads; what is left stays in the journal for replay; unmounting")
				second()
			default:
				l.Warn("already stopping without waiting; unmounting")
			}
		}
	}()
	return ctx, func() {
		// Ignore unregisters ch under the lock that delivery takes, so no
		// signal is sent on ch after it returns and closing ch is safe.
		signal.Ignore(stopSignals...)
		close(ch)
		<-done
		cancel()
	}
}
