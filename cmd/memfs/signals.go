package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
)

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
