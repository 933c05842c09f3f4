package fs

// Observing FUSE requests, for metrics.
//
// A mount with MountOptions.Observer set answers the kernel through
// observedFS, which wraps go-fuse's raw filesystem (the bridge to the
// nodes of nodes.go) and times each request from the moment go-fuse hands
// it over to the moment its answer is ready. The node methods stay thin
// and know nothing of it, and a mount without an observer is served by
// go-fuse's bridge directly: no cost at all.
//
// Cost per request with an observer: two monotonic clock reads and one
// interface call; observedFS allocates nothing (BenchmarkObservedLookup).
// What the observer does with it is its own cost (worker/metrics: a few
// atomic adds, no allocation).
//
// Requests not listed in Op (FORGET, locks, lseek, ioctl, fallocate,
// copy_file_range, statx, …) are passed through unobserved: they either
// never reach a memfs mount or answer ENOSYS at once.

import (
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Op is a kind of FUSE request, as an OpObserver sees it.
type Op uint8

// The requests an OpObserver is told of. Their names (Op.String) are the
// kernel's opcodes in lower case; READDIRPLUS counts as readdir and
// WRITE as write whichever form go-fuse calls.
const (
	OpLookup Op = iota
	OpGetattr
	OpSetattr
	OpMknod
	OpMkdir
	OpUnlink
	OpRmdir
	OpRename
	OpLink
	OpSymlink
	OpReadlink
	OpAccess
	OpCreate
	OpOpen
	OpRead
	OpWrite
	OpFlush
	OpFsync
	OpRelease
	OpOpendir
	OpReaddir
	OpReleasedir
	OpFsyncdir
	OpStatfs
	OpGetxattr
	OpListxattr
	OpSetxattr
	OpRemovexattr
	// NumOps is the number of kinds: an observer can keep an array
	// indexed by Op.
	NumOps
)

var opNames = [NumOps]string{
	OpLookup: "lookup", OpGetattr: "getattr", OpSetattr: "setattr", OpMknod: "mknod", OpMkdir: "mkdir",
	OpUnlink: "unlink", OpRmdir: "rmdir", OpRename: "rename", OpLink: "link", OpSymlink: "symlink",
	OpReadlink: "readlink", OpAccess: "access", OpCreate: "create", OpOpen: "open", OpRead: "read",
	OpWrite: "write", OpFlush: "flush", OpFsync: "fsync", OpRelease: "release", OpOpendir: "opendir",
	OpReaddir: "readdir", OpReleasedir: "releasedir", OpFsyncdir: "fsyncdir", OpStatfs: "statfs",
	OpGetxattr: "getxattr", OpListxattr: "listxattr", OpSetxattr: "setxattr", OpRemovexattr: "removexattr",
}

// String is the op's name: "lookup", "write", ...
func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return "unknown"
}

// OpObserver is told of every FUSE request a mount answers (Op lists
// which). ObserveOp runs on the request's goroutine, after the answer is
// made and before it is sent: it must be cheap and must never block.
// errno is 0 for success; a lookup of a name that does not exist is
// ENOENT (go-fuse answers it as a cached negative entry).
type OpObserver interface {
	ObserveOp(op Op, took time.Duration, errno syscall.Errno)
}

// observedFS times every request of Op and tells obs.
type observedFS struct {
	fuse.RawFileSystem
	obs OpObserver
}

func (o *observedFS) done(op Op, start time.Time, st fuse.Status) {
	o.obs.ObserveOp(op, time.Since(start), syscall.Errno(st))
}

func (o *observedFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Lookup(cancel, h, name, out)
	if st == fuse.OK && out.NodeId == 0 {
		// A negative entry: go-fuse answers ENOENT as OK with node 0,
		// so that the kernel caches the miss; it is ENOENT all the same.
		o.done(OpLookup, start, fuse.ENOENT)
		return st
	}
	o.done(OpLookup, start, st)
	return st
}

func (o *observedFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.GetAttr(cancel, in, out)
	o.done(OpGetattr, start, st)
	return st
}

func (o *observedFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.SetAttr(cancel, in, out)
	o.done(OpSetattr, start, st)
	return st
}

func (o *observedFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Mknod(cancel, in, name, out)
	o.done(OpMknod, start, st)
	return st
}

func (o *observedFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Mkdir(cancel, in, name, out)
	o.done(OpMkdir, start, st)
	return st
}

func (o *observedFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Unlink(cancel, h, name)
	o.done(OpUnlink, start, st)
	return st
}

func (o *observedFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Rmdir(cancel, h, name)
	o.done(OpRmdir, start, st)
	return st
}

func (o *observedFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Rename(cancel, in, oldName, newName)
	o.done(OpRename, start, st)
	return st
}

func (o *observedFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Link(cancel, in, name, out)
	o.done(OpLink, start, st)
	return st
}

func (o *observedFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Symlink(cancel, h, target, name, out)
	o.done(OpSymlink, start, st)
	return st
}

func (o *observedFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	start := time.Now()
	b, st := o.RawFileSystem.Readlink(cancel, h)
	o.done(OpReadlink, start, st)
	return b, st
}

func (o *observedFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Access(cancel, in)
	o.done(OpAccess, start, st)
	return st
}

func (o *observedFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Create(cancel, in, name, out)
	o.done(OpCreate, start, st)
	return st
}

func (o *observedFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Open(cancel, in, out)
	o.done(OpOpen, start, st)
	return st
}

func (o *observedFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	start := time.Now()
	r, st := o.RawFileSystem.Read(cancel, in, buf)
	o.done(OpRead, start, st)
	return r, st
}

func (o *observedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.Write(cancel, in, data)
	o.done(OpWrite, start, st)
	return n, st
}

// Writev is what go-fuse calls for WRITE (Write only when Writev answers
// ENOSYS, which the node bridge never does).
func (o *observedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.Writev(cancel, in, data)
	if st != fuse.ENOSYS {
		o.done(OpWrite, start, st)
	}
	return n, st
}

func (o *observedFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Flush(cancel, in)
	o.done(OpFlush, start, st)
	return st
}

func (o *observedFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Fsync(cancel, in)
	o.done(OpFsync, start, st)
	return st
}

func (o *observedFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	start := time.Now()
	o.RawFileSystem.Release(cancel, in)
	o.done(OpRelease, start, fuse.OK)
}

func (o *observedFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.OpenDir(cancel, in, out)
	o.done(OpOpendir, start, st)
	return st
}

func (o *observedFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.ReadDir(cancel, in, out)
	o.done(OpReaddir, start, st)
	return st
}

func (o *observedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.ReadDirPlus(cancel, in, out)
	o.done(OpReaddir, start, st)
	return st
}

func (o *observedFS) ReleaseDir(in *fuse.ReleaseIn) {
	start := time.Now()
	o.RawFileSystem.ReleaseDir(in)
	o.done(OpReleasedir, start, fuse.OK)
}

func (o *observedFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.FsyncDir(cancel, in)
	o.done(OpFsyncdir, start, st)
	return st
}

func (o *observedFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.StatFs(cancel, h, out)
	o.done(OpStatfs, start, st)
	return st
}

func (o *observedFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.GetXAttr(cancel, h, attr, dest)
	o.done(OpGetxattr, start, st)
	return n, st
}

func (o *observedFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.ListXAttr(cancel, h, dest)
	o.done(OpListxattr, start, st)
	return n, st
}

func (o *observedFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.SetXAttr(cancel, in, attr, data)
	o.done(OpSetxattr, start, st)
	return st
}

func (o *observedFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	start := time.Now()
	st := o.RawFileSystem.RemoveXAttr(cancel, h, attr)
	o.done(OpRemovexattr, start, st)
	return st
}
