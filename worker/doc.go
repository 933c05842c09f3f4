// Package worker puts memory stores on the filesystem: it mounts a store
// (the sync engine of package syncqueue behind the FUSE tree of package fs)
// and takes it down cleanly. Later it also claims sessions from a work
// queue and runs their lifecycle (docs/operating.md, "Session lifecycle").
package worker
