// Package fs is the local side of a mounted memory store: the store's
// memories as files in memory, served to the kernel over FUSE.
//
// # Structure
//
// A Tree holds one store's files and directories, with their content, in
// memory (tree*.go). It knows nothing of FUSE or HTTP: every operation is
// a Tree method taking inode numbers and names (Lookup, Create, Write,
// Commit, Rename, ...) and returning an Attr or one of the errors of
// errors.go. The store has no directories; the tree makes them as files
// need them, and drops a directory once the last file leaves it by a
// remote change.
//
// Each file or directory is a node. A file has a file id: its memory id
// when it came from the store, a "local-…" id when it was created here
// and is not uploaded yet. The sync engine names files by that id, and
// the tree indexes its files by it (tree_index.go). Inode numbers are the
// tree's own, stable for a node's life; an unlinked file lives on, without
// a name, while a handle is open on it.
//
// The sync engine (package syncqueue) fills the tree and follows the
// store through the interface of engine.go: Load at mount (possibly lazy:
// paths and sizes first, contents fetched later through a Fetcher,
// tree_lazy.go), Apply for replayed and remote changes, and a Journal
// that receives every local change. The tree calls the Journal when a
// changed file is closed, renamed, truncated by path or removed, and the
// operation returns only once the Journal took it: a close that returns
// 0 is on disk (and, after fsync, on stable storage). Writes between
// opening and closing stay in memory.
//
// A Mount (mount.go) serves a Tree to the kernel with go-fuse: the nodes
// of nodes.go are thin, each converting its arguments, calling one Tree
// method and returning toErrno(err). A Mount also watches the mount table
// for being unmounted from outside (Gone, gone.go) or covered by another
// mount (Covered, covered.go), and can time every request for metrics
// (MountOptions.Observer, observe.go). Unmount (unmount.go) takes it down.
//
// # Errors
//
// Tree methods return the Err* values of errors.go (or errors wrapping
// them, or the journal's own error). toErrno maps them to errnos in one
// table, the only place where the filesystem's failures become errnos;
// an error it does not know, such as a journal's I/O error, is EIO unless
// it wraps a syscall.Errno (a full state directory is ENOSPC). A change
// the journal refuses leaves the tree as it was, except a close: the file
// keeps its new content, is listed by Unjournaled and journaled by
// RetryUnjournaled once the journal takes it.
//
// # Kernel caching
//
// Every change to a mount's files comes through this process: through
// FUSE itself, or through the sync engine. So the kernel may cache
// entries, negative entries and attributes for long (cacheTimeout) and
// keep file pages across opens (FOPEN_KEEP_CACHE): a warm stat costs no
// round trip. A change made by the sync engine (Apply) queues an
// invalidation of the names and contents it touched; the notifier
// (notify.go) sends them to the kernel from its own goroutine.
// mount_cache_test.go checks that every kind of change shows.
//
// # Locking
//
// A Tree has two mutexes, always taken in this order: jmu, the journal's
// turn, then mu, which guards every node. mu is held for in-memory work
// only. Under it the tree never
//
//   - writes to the journal (an operation that journals holds jmu and
//     gives up mu for the write: records reach the journal in the order
//     the tree decided them, and what the operation decided on can't
//     change meanwhile; see Tree),
//   - calls into the kernel (invalidations are queued, and sent by the
//     notifier holding no tree lock: a notification written from inside a
//     FUSE handler, or under a lock a handler may take, can deadlock), or
//   - fetches content (an operation that needs a lazy file's bytes gives
//     up its locks, asks the Fetcher, and starts over).
//
// Lookups, getattr, readdir, reads and writes take only mu, and so never
// wait for a journal write; creates, renames, removals, closes and
// applied changes take jmu too, and so wait for one in progress. The
// notifier's queue has its own lock, taken after mu. Nothing in the
// package calls a Tree method while holding either lock. The Journal is
// called holding jmu, so it must not call the tree; the Fetcher is
// called holding no tree lock, and calls back into it (Fill, Apply).
package fs
