package fs

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fnode is the go-fuse node of every file and directory. Its methods are
// thin: convert arguments, call one Tree method, return toErrno(err). The
// node's identity is its inode number (StableAttr().Ino), which is the
// Tree's.
type fnode struct {
	gofs.Inode
	t *Tree
}

func (n *fnode) ino() uint64 { return n.StableAttr().Ino }

var _ = (gofs.NodeLookuper)((*fnode)(nil))

func (n *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	a, err := n.t.Lookup(n.ino(), name)
	if err != nil {
		return nil, toErrno(err)
	}
	return n.child(ctx, a, out), 0
}

// child returns the go-fuse inode for a (go-fuse reuses an existing one
// with the same inode number) and fills out.
func (n *fnode) child(ctx context.Context, a Attr, out *fuse.EntryOut) *gofs.Inode {
	fillAttr(&out.Attr, a)
	mode := uint32(syscall.S_IFREG)
	if a.Dir {
		mode = syscall.S_IFDIR
	}
	return n.NewInode(ctx, &fnode{t: n.t}, gofs.StableAttr{Mode: mode, Ino: a.Ino})
}

func fillAttr(out *fuse.Attr, a Attr) {
	out.Ino = a.Ino
	out.Size = uint64(a.Size)
	out.Blocks = (uint64(a.Size) + 511) / 512
	out.Blksize = 4096
	out.Mode = a.Mode | syscall.S_IFREG
	if a.Dir {
		out.Mode = a.Mode | syscall.S_IFDIR
	}
	out.Nlink = a.Nlink
	out.Owner = fuse.Owner{Uid: a.UID, Gid: a.GID}
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

var _ = (gofs.NodeGetattrer)((*fnode)(nil))

func (n *fnode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, err := n.t.GetAttr(n.ino())
	if err != nil {
		return toErrno(err)
	}
	fillAttr(&out.Attr, a)
	return 0
}

var _ = (gofs.NodeSetattrer)((*fnode)(nil))

func (n *fnode) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var req SetAttrIn
	if sz, ok := in.GetSize(); ok {
		s := int64(sz)
		req.Size = &s
	}
	if m, ok := in.GetMode(); ok {
		req.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		req.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		req.GID = &g
	}
	if at, ok := in.GetATime(); ok {
		req.Atime = &at
	}
	if mt, ok := in.GetMTime(); ok {
		req.Mtime = &mt
	}
	// A size change made without a writable handle — truncate(2) by path,
	// or open(O_RDONLY|O_TRUNC) — has no writer's close to journal it, so
	// it is journaled now (a writer's ftruncate is journaled at its close).
	h, ok := f.(*handle)
	req.Journal = req.Size != nil && (!ok || !h.write)
	a, err := n.t.SetAttr(n.ino(), req)
	if err != nil {
		return toErrno(err)
	}
	fillAttr(&out.Attr, a)
	return 0
}

var _ = (gofs.NodeReaddirer)((*fnode)(nil))

func (n *fnode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	entries, err := n.t.ReadDir(n.ino())
	if err != nil {
		return nil, toErrno(err)
	}
	out := make([]fuse.DirEntry, len(entries))
	for i, e := range entries {
		mode := uint32(syscall.S_IFREG)
		if e.Attr.Dir {
			mode = syscall.S_IFDIR
		}
		out[i] = fuse.DirEntry{Name: e.Name, Ino: e.Attr.Ino, Mode: mode}
	}
	return gofs.NewListDirStream(out), 0
}

var _ = (gofs.NodeCreater)((*fnode)(nil))

func (n *fnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	a, err := n.t.Create(n.ino(), name, mode, caller(ctx))
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	if err := n.t.Open(a.Ino, true, false); err != nil {
		return nil, nil, 0, toErrno(err)
	}
	return n.child(ctx, a, out), &handle{write: true}, fuse.FOPEN_KEEP_CACHE, 0
}

var _ = (gofs.NodeMkdirer)((*fnode)(nil))

func (n *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	a, err := n.t.Mkdir(n.ino(), name, mode, caller(ctx))
	if err != nil {
		return nil, toErrno(err)
	}
	return n.child(ctx, a, out), 0
}

var _ = (gofs.NodeUnlinker)((*fnode)(nil))

func (n *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	return toErrno(n.t.Unlink(n.ino(), name))
}

var _ = (gofs.NodeRmdirer)((*fnode)(nil))

func (n *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return toErrno(n.t.Rmdir(n.ino(), name))
}

var _ = (gofs.NodeRenamer)((*fnode)(nil))

func (n *fnode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return toErrno(n.t.Rename(n.ino(), name, newParent.EmbeddedInode().StableAttr().Ino, newName, flags))
}

// caller is who sent the FUSE request (the uid and gid a new entry takes).
func caller(ctx context.Context) Owner {
	if c, ok := fuse.FromContext(ctx); ok {
		return Owner{UID: c.Uid, GID: c.Gid}
	}
	return Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
}

// handle is an open file. write records whether it may change the file,
// so flush journals only what a writer closed; wrote, whether write(2)
// was called through it, so that only a close after writing reports
// content that can't be uploaded (EILSEQ): a truncate(1) or an editor's
// open-and-close of such a file must not fail.
type handle struct {
	write bool
	wrote atomic.Bool
}

var _ = (gofs.NodeOpener)((*fnode)(nil))

// Open is one FUSE round trip per open(2), also for a reader of a file
// whose pages the kernel keeps (FOPEN_KEEP_CACHE): we measured
// answering ENOSYS instead (the kernel's no-open mode: no OPEN, no
// RELEASE, for every file of the mount) and kept Open. No-open drops the
// per-handle open flags, so every close(2), a reader's too, costs a FLUSH
// (F2 on a busy 2-core machine, 7 runs each: 0.13–0.42× tmpfs, median
// 0.19×, against 0.10–0.29×, median 0.24×, with Open: no clear gain and
// never 0.5×); the open count that keeps an unlinked file readable would have
// to follow the kernel's FORGET instead; and an O_TRUNC open would need
// the kernel's atomic_o_trunc off. Zero round trips would also need no
// FLUSH, and then this process never learns of a close: content would be
// journaled at each write, so a half-written file could be uploaded, and
// close could no longer report EILSEQ or EFBIG — against the sync
// invariant (docs/sync.md).
func (n *fnode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	forWrite := flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0
	if err := n.t.Open(n.ino(), forWrite, flags&syscall.O_TRUNC != 0); err != nil {
		return nil, 0, toErrno(err)
	}
	if !forWrite {
		// A reader's close has nothing to journal: FOPEN_NOFLUSH spares
		// the FLUSH round trip of every close(2) (a third of a warm
		// open+read+close).
		return &handle{}, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
	}
	return &handle{write: true}, fuse.FOPEN_KEEP_CACHE, 0
}

var _ = (gofs.NodeReader)((*fnode)(nil))

func (n *fnode) Read(ctx context.Context, f gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	k, err := n.t.Read(n.ino(), dest, off)
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

var _ = (gofs.NodeWriter)((*fnode)(nil))

func (n *fnode) Write(ctx context.Context, f gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if h, ok := f.(*handle); ok {
		h.wrote.Store(true)
	}
	k, err := n.t.Write(n.ino(), data, off)
	return uint32(k), toErrno(err)
}

var _ = (gofs.NodeFlusher)((*fnode)(nil))

// Flush runs at every close(2): the new content is journaled (written)
// before close returns.
func (n *fnode) Flush(ctx context.Context, f gofs.FileHandle) syscall.Errno {
	h, ok := f.(*handle)
	if ok && !h.write {
		return 0
	}
	err := n.t.Commit(n.ino())
	if errors.Is(err, ErrNotUTF8) && ok && !h.wrote.Load() {
		return 0 // journaled; only a writer is told the upload waits
	}
	return toErrno(err)
}

var _ = (gofs.NodeFsyncer)((*fnode)(nil))

func (n *fnode) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() {
		return 0
	}
	return toErrno(n.t.Fsync(n.ino()))
}

var _ = (gofs.NodeReleaser)((*fnode)(nil))

func (n *fnode) Release(ctx context.Context, f gofs.FileHandle) syscall.Errno {
	n.t.Release(n.ino())
	return 0
}

var _ = (gofs.NodeStatfser)((*fnode)(nil))

func (n *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	s := n.t.StatFS()
	const bs = 4096
	out.Bsize, out.Frsize, out.NameLen = bs, bs, MaxNameBytes
	out.Blocks, out.Bfree, out.Bavail = s.Bytes/bs, s.BytesFree/bs, s.BytesFree/bs
	out.Files, out.Ffree = s.Files, s.FilesFree
	return 0
}

// notPermitted is the answer to symlink, link and mknod: a store holds
// only regular files and directories (EROFS on a read-only store).
func (n *fnode) notPermitted() syscall.Errno {
	if n.t.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.EPERM
}

var _ = (gofs.NodeSymlinker)((*fnode)(nil))

func (n *fnode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, n.notPermitted()
}

var _ = (gofs.NodeLinker)((*fnode)(nil))

func (n *fnode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, n.notPermitted()
}

var _ = (gofs.NodeMknoder)((*fnode)(nil))

func (n *fnode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, n.notPermitted()
}

// Extended attributes are not supported (ENOTSUP); listing them gives an
// empty list, so tools like cp -a and ls carry on.
var _ = (gofs.NodeGetxattrer)((*fnode)(nil))

// Getxattr answers ENOSYS: the kernel then stops asking for the life of
// the mount and answers EOPNOTSUPP (== ENOTSUP) itself. Otherwise every
// write(2) costs a GETXATTR("security.capability") round trip (the
// kernel's check for privileges to drop).
func (n *fnode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

var _ = (gofs.NodeSetxattrer)((*fnode)(nil))

func (n *fnode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.t.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.ENOTSUP
}

var _ = (gofs.NodeListxattrer)((*fnode)(nil))

func (n *fnode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, 0
}

var _ = (gofs.NodeRemovexattrer)((*fnode)(nil))

func (n *fnode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.t.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.ENOTSUP
}

// cacheTimeout is how long the kernel may cache entries and attributes
// (also negative entries): every change comes through this process (FUSE
// itself, or the sync engine followed by an invalidation, notify.go), so
// the cache can be long. Together with FOPEN_KEEP_CACHE it is what makes
// a warm stat cost no round trip and a warm read only OPEN and RELEASE
// (mount_cache_test.go checks that every kind of change still shows).
const cacheTimeout = 5 * time.Minute
