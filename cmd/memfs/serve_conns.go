package main

import (
	"fmt"
	"syscall"
	"time"

	"github.com/memfs/memfs/store/server"
)

// The defaults of --idle-timeout and --read-timeout. The idle timeout is
// above the 90 s for which Go's and Python's HTTP clients keep an idle
// connection, so a client rarely sends on one the server is closing.
const (
	defaultIdleTimeout = 2 * time.Minute
	defaultReadTimeout = 10 * time.Second
)

// connLimits is what --max-connections and --max-connections-per-address
// come to, against the open-file limit (nofile) they must fit in.
func connLimits(nofile uint64, maxConns, perAddr int) (server.ConnLimits, error) {
	if maxConns < 0 || perAddr < 0 {
		return server.ConnLimits{}, usagef("--max-connections and --max-connections-per-address must be 1 or more (0: the default), not %d and %d", maxConns, perAddr)
	}
	lim, err := server.DefaultConnLimits(nofile)
	if err != nil {
		return lim, err
	}
	if maxConns > lim.MaxOpen {
		return lim, usagef("--max-connections %d is more than the open-file limit allows: at most %d (RLIMIT_NOFILE is %d, %d are kept for the database); raise the limit (ulimit -n, systemd LimitNOFILE=) or give fewer",
			maxConns, lim.MaxOpen, nofile, server.ReservedFDs)
	}
	if maxConns > 0 {
		lim = server.ConnLimitsOf(maxConns)
	}
	if perAddr > lim.MaxUnauthenticated {
		return lim, usagef("--max-connections-per-address %d is more than the %d connections left to unauthenticated clients (three quarters of %d)", perAddr, lim.MaxUnauthenticated, lim.MaxOpen)
	}
	if perAddr > 0 {
		lim.MaxPerAddress = perAddr
	}
	return lim, nil
}

// openFileLimit is the process's RLIMIT_NOFILE (the soft limit, which the
// Go runtime raised to the hard limit at start).
func openFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	return rl.Cur, nil
}
