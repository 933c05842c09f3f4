package main

// Teardown of the F measures' setups: in order on every path, and on
// SIGINT/SIGTERM.

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/fs"
)

// unmountFUSE unmounts dir with unmount, retrying EBUSY for a few seconds,
// then detaches it lazily.
func unmountFUSE(dir string, unmount func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unmount()
		if err == nil {
			return nil
		}
		if mounted, _ := fs.IsMounted(dir); !mounted {
			return nil
		}
		if time.Now().After(deadline) {
			if derr := unix.Unmount(dir, unix.MNT_DETACH); derr != nil {
				return fmt.Errorf("unmount %s: %v; lazy detach: %w", dir, err, derr)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cleanups undoes a setup in reverse order. Every live set is also run
// if the process is interrupted (see cleanupOnSignal).
type cleanups struct {
	mu  sync.Mutex
	fns []func() error
}

var (
	liveMu sync.Mutex
	live   = map[*cleanups]bool{}
)

func (c *cleanups) add(fn func() error) {
	c.mu.Lock()
	c.fns = append(c.fns, fn)
	c.mu.Unlock()
	liveMu.Lock()
	live[c] = true
	liveMu.Unlock()
}

// run undoes everything added, newest first, once; it returns the first error.
func (c *cleanups) run() error {
	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	var first error
	for i := len(fns) - 1; i >= 0; i-- {
		if err := fns[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}

var (
	signalOnce sync.Once
	// stopping is set by the first SIGINT/SIGTERM: the F measures stop at
	// their next file or pass, tear down as usual, and the process exits.
	stopping atomic.Bool
)

var errInterrupted = errors.New("interrupted")

// cleanupOnSignal installs the F measures' signal handling. The first
// SIGINT or SIGTERM asks the running measure to stop (its deferred
// teardown unmounts and removes everything; runF then exits). A second
// signal, or a teardown stuck for 20 s (a hung mount), tears down every
// live setup from here — lazily detaching what won't unmount — and exits.
func cleanupOnSignal() {
	signalOnce.Do(func() {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			stopping.Store(true)
			fmt.Fprintf(os.Stderr, "bench: %v: stopping; the F measures' mounts and directories are being removed (again to force)\n", sig)
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
			}
			fmt.Fprintln(os.Stderr, "bench: forcing the teardown")
			for {
				liveMu.Lock()
				var all []*cleanups
				for c := range live {
					all = append(all, c)
				}
				liveMu.Unlock()
				if len(all) == 0 {
					break
				}
				for _, c := range all {
					c.run()
				}
			}
			os.Exit(130)
		}()
	})
}

// checkNoLeftovers reports any of our mounts still in /proc/self/mountinfo.
func checkNoLeftovers() error {
	mounts, err := fs.Mounts()
	if err != nil {
		return err
	}
	var left []string
	for _, m := range mounts {
		if strings.Contains(m.Dir, fTempPfx) {
			left = append(left, m.Dir)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("mounts left behind: %s", strings.Join(left, ", "))
	}
	return nil
}
