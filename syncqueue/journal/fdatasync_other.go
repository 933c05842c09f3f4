//go:build unix && !linux

package journal

import "golang.org/x/sys/unix"

// fdatasync falls back to fsync where fdatasync is not available.
func fdatasync(fd int) error { return unix.Fsync(fd) }
