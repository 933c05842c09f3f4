package main

import (
	"syscall"
	"time"
)

type syscallRusage struct{ r syscall.Rusage }

func getrusage(u *syscallRusage) { syscall.Getrusage(syscall.RUSAGE_SELF, &u.r) } //nolint:errcheck

func (u *syscallRusage) total() time.Duration {
	return time.Duration(u.r.Utime.Nano() + u.r.Stime.Nano())
}
