package test

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/memfs/memfs/fs"
)

// --- the operations -----------------------------------------------------------

// step runs one random operation on the mount and the model, then checks
// the mount against the model.
func (r *rnd) step(i int) {
	r.t.Helper()
	type op struct {
		weight int
		run    func(int)
	}
	ops := []op{
		{18, r.opCreate},
		{14, r.opWrite},
		{7, r.opAppend},
		{8, r.opTruncate},
		{12, r.opRenameFile},
		{6, r.opRenameDir},
		{6, r.opUnlink},
		{6, r.opMkdir},
		{6, r.opRmdir},
		{2, r.opMarker},
		{4, r.opInvalid},
		{3, r.opAtomicSave},
		{3, r.opHandleMove},
		{3, r.opCopy},
		{2, r.opBackup},
	}
	if r.swaps {
		ops = append(ops, op{3, r.opSwap}, op{2, r.opRotate})
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	n := r.rng.IntN(total)
	for _, o := range ops {
		if n < o.weight {
			o.run(i)
			break
		}
		n -= o.weight
	}
	r.checkMount(fmt.Sprintf("after step %d", i))
}

// open opens p on the mount. The descriptor is closed by closeFD, or by
// the sequence's cleanup when a check fails first: a descriptor left open
// on a mount this process serves hangs the process at exit (the kernel
// flushes it after the serving goroutines are gone).
func (r *rnd) open(p string, flags int, mode uint32) (int, error) {
	fd, err := syscall.Open(r.abs(p), flags|syscall.O_CLOEXEC, mode)
	if err == nil {
		r.fds[fd] = true
	}
	return fd, err
}

// fileWant is the errno of an operation on an existing file p (open,
// truncate, unlink): ENOENT or ENOTDIR on the way, ENOENT if p is
// missing, EISDIR if it is a directory.
func (m *rndModel) fileWant(p string) syscall.Errno {
	if e := m.resolveDir(rndParent(p)); e != 0 {
		return e
	}
	switch m.kind(p) {
	case rndNone:
		return syscall.ENOENT
	case rndDir:
		return syscall.EISDIR
	}
	return 0
}

// closeFD closes fd, expecting want (a reader, or a handle that can't
// have anything to journal).
func (r *rnd) closeFD(desc string, fd int, want syscall.Errno) {
	r.t.Helper()
	delete(r.fds, fd)
	r.expect(desc+": close", want, syscall.Close(fd))
}

// closeWriter closes a writer of p (close is where its content reaches the
// journal). dirty: the handle changed the file (a create, a write that
// took bytes, an ftruncate); wrote: write(2) was called through it. After
// a write, content that is not UTF-8 fails with EILSEQ (journaled; its
// upload waits). While the state dir is full, a close with content to
// journal (this handle's, or an earlier close's that could not be
// journaled either) may fail with ENOSPC: the file keeps its content, to
// be journaled once there is room. p is "" for a file unlinked while
// open: nothing to keep.
func (r *rnd) closeWriter(desc string, fd int, p string, dirty, wrote bool) {
	r.t.Helper()
	delete(r.fds, fd)
	err := syscall.Close(fd)
	if p == "" {
		r.expect(desc+": close", 0, err)
		return
	}
	want := syscall.Errno(0)
	if wrote && !utf8.Valid(r.m.files[p]) {
		want = syscall.EILSEQ
	}
	if r.full && (dirty || r.unjournaled[p]) {
		if r.refusedForSpace(err) {
			r.unjournaled[p] = true
			return
		}
		delete(r.unjournaled, p)
	}
	r.expect(desc+": close", want, err)
}

// refusedForSpace reports whether a call that journals was refused
// because the state dir is full. While it is, such a call may be refused
// (ENOSPC, and it changed nothing) or succeed: the journal may find room
// by cutting its own history. Both are right; what the mount shows after
// either is checked against the model.
func (r *rnd) refusedForSpace(err error) bool {
	if r.full && rndErrno(err) == syscall.ENOSPC {
		r.stats["refused for space"]++
		return true
	}
	return false
}

// journals reports whether a change of the tree at or below p writes to
// the journal (a file, or a directory holding files).
func (m *rndModel) journals(p string) bool {
	if _, ok := m.files[p]; ok {
		return true
	}
	for f := range m.files {
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// writeLoop writes data at off, or appends it, as a program's write loop
// does: after a short write it writes the rest, until everything is
// written or a write fails. It returns how much was written and the error
// that stopped it.
func rndWriteLoop(fd int, data []byte, off int, appending bool) (int, error) {
	done := 0
	for done < len(data) {
		var n int
		var err error
		if appending {
			n, err = syscall.Write(fd, data[done:])
		} else {
			n, err = syscall.Pwrite(fd, data[done:], int64(off+done))
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, io.ErrShortWrite
		}
		done += n
	}
	return done, nil
}

// write writes data at off (start of the file's current size when
// appending) through fd and applies to the model what the mount took.
// Within 102,400 bytes everything must be written. A write past it must
// end in EFBIG; the kernel splits a write into requests at pages it has to
// read first, so the part up to the limit may have been taken by an
// earlier request (a short write, as on any filesystem with a size limit):
// what was written must lie within the limit, and it is applied.
func (r *rnd) write(desc, p string, fd, off int, data []byte, appending bool) int {
	r.t.Helper()
	n, err := rndWriteLoop(fd, data, off, appending)
	if off+len(data) <= rndMaxContent {
		r.expect(desc+": write", 0, err)
	} else {
		r.expect(desc+": write", syscall.EFBIG, err)
		if n > 0 && off+n > rndMaxContent {
			r.fail("%s: %d bytes written, past the limit", desc, n)
		}
		if n > 0 {
			r.stats["short write before EFBIG"]++
		}
	}
	if n == 0 {
		return 0
	}
	c := r.m.files[p]
	if end := off + n; end > len(c) {
		c = append(c, make([]byte, end-len(c))...)
	}
	copy(c[off:], data[:n])
	r.m.files[p] = c
	return n
}

// opCreate: open(O_CREAT|O_TRUNC [|O_EXCL]), write, close.
func (r *rnd) opCreate(i int) {
	r.create(i, "create", r.pickNewPath(rndMaxFiles, len(r.m.files)), r.pct(15), r.content(300))
}

func (r *rnd) create(i int, op, p string, excl bool, c []byte) {
	flags := syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC
	if excl {
		flags |= syscall.O_EXCL
	}
	want := r.m.resolveDir(rndParent(p))
	if want == 0 {
		switch r.m.kind(p) {
		case rndDir:
			want = syscall.EISDIR
			if excl {
				want = syscall.EEXIST
			}
		case rndFile:
			if excl {
				want = syscall.EEXIST
			}
		}
	}
	desc := fmt.Sprintf("create %s excl=%v (%d bytes)", p, excl, len(c))
	r.record(i, op, desc, want)
	fd, err := r.open(p, flags, 0o644)
	if want == 0 && r.m.kind(p) == rndFile && len(r.m.files[p]) > 0 && r.refusedForSpace(err) {
		return // O_TRUNC truncates by path (a setattr without a handle), journaled at once
	}
	r.expect(desc+": open", want, err)
	if err != nil {
		return
	}
	r.m.files[p] = nil
	if len(c) > 0 {
		r.write(desc, p, fd, 0, c, false)
	}
	r.closeWriter(desc, fd, p, true, len(c) > 0)
}

// opWrite: pwrite at an offset (holes read as zeros), sometimes beyond
// 102,400 bytes (EFBIG, nothing changes) or ending exactly there.
func (r *rnd) opWrite(i int) {
	p := r.pickFile()
	data := r.content(200)
	if len(data) == 0 {
		data = []byte("x")
	}
	cur := len(r.m.files[p])
	var off int
	switch {
	case r.pct(6): // ends beyond the limit
		off = rndMaxContent - len(data) + 1 + r.rng.IntN(len(data)+64)
	case r.pct(3): // ends exactly at the limit
		off = rndMaxContent - len(data)
	case r.pct(6): // anywhere
		off = r.rng.IntN(rndMaxContent - len(data) + 1)
	default: // inside or just past the end
		off = r.rng.IntN(cur + 64)
	}
	want := r.m.fileWant(p)
	writeWant := syscall.Errno(0)
	if off+len(data) > rndMaxContent {
		writeWant = syscall.EFBIG
	}
	desc := fmt.Sprintf("pwrite %s off=%d len=%d", p, off, len(data))
	if want == 0 {
		r.record(i, "pwrite", desc, writeWant)
	} else {
		r.record(i, "pwrite", desc, want)
	}
	fd, err := r.open(p, syscall.O_WRONLY, 0)
	r.expect(desc+": open", want, err)
	if err != nil {
		return
	}
	n := r.write(desc, p, fd, off, data, false)
	r.closeWriter(desc, fd, p, n > 0, true)
}

// opAppend: open(O_APPEND), write, close.
func (r *rnd) opAppend(i int) {
	p := r.pickFile()
	data := r.content(300)
	if r.pct(5) {
		data = bytes.Repeat([]byte("z"), max(1, rndMaxContent-len(r.m.files[p])+r.rng.IntN(3)-1))
	}
	want := r.m.fileWant(p)
	writeWant := syscall.Errno(0)
	if len(r.m.files[p])+len(data) > rndMaxContent {
		writeWant = syscall.EFBIG
	}
	desc := fmt.Sprintf("append %s len=%d", p, len(data))
	if want == 0 {
		r.record(i, "append", desc, writeWant)
	} else {
		r.record(i, "append", desc, want)
	}
	fd, err := r.open(p, syscall.O_WRONLY|syscall.O_APPEND, 0)
	r.expect(desc+": open", want, err)
	if err != nil {
		return
	}
	n := r.write(desc, p, fd, len(r.m.files[p]), data, true)
	r.closeWriter(desc, fd, p, n > 0, len(data) > 0)
}

// opTruncate: truncate(2) by path, or ftruncate on a descriptor opened for
// writing; beyond 102,400 bytes is EFBIG.
func (r *rnd) opTruncate(i int) {
	p := r.pickFile()
	cur := len(r.m.files[p])
	var size int
	switch {
	case r.pct(15):
		size = 0
	case r.pct(8):
		size = rndMaxContent + 1 + r.rng.IntN(1000)
	case r.pct(3):
		size = rndMaxContent
	default:
		size = r.rng.IntN(cur + 100)
	}
	byPath := r.pct(50)
	want := r.m.fileWant(p)
	sizeWant := syscall.Errno(0)
	if size > rndMaxContent {
		sizeWant = syscall.EFBIG
	}
	if byPath {
		desc := fmt.Sprintf("truncate %s size=%d", p, size)
		if want == 0 {
			want = sizeWant
		}
		r.record(i, "truncate", desc, want)
		err := syscall.Truncate(r.abs(p), int64(size))
		if want == 0 && size != cur && r.refusedForSpace(err) {
			return // journaled at once: refused whole
		}
		r.expect(desc, want, err)
		if want != 0 {
			return
		}
	} else {
		desc := fmt.Sprintf("ftruncate %s size=%d", p, size)
		if want == 0 {
			r.record(i, "ftruncate", desc, sizeWant)
		} else {
			r.record(i, "ftruncate", desc, want)
		}
		fd, err := r.open(p, syscall.O_WRONLY, 0)
		r.expect(desc+": open", want, err)
		if err != nil {
			return
		}
		r.expect(desc+": ftruncate", sizeWant, syscall.Ftruncate(fd, int64(size)))
		if sizeWant != 0 {
			r.closeWriter(desc, fd, p, false, false)
			return
		}
		r.m.resize(p, size)
		r.closeWriter(desc, fd, p, true, false)
		return
	}
	r.m.resize(p, size)
}

// resize truncates or extends (with zeros) the file p.
func (m *rndModel) resize(p string, size int) {
	c := m.files[p]
	if size <= len(c) {
		c = c[:size:size]
	} else {
		c = append(c, make([]byte, size-len(c))...)
	}
	m.files[p] = c
}

// renameWant is the errno rename(2) gives for src -> dst, in the order the
// kernel checks (do_renameat2, vfs_rename), then the filesystem's own.
func (m *rndModel) renameWant(src, dst string) syscall.Errno {
	if e := m.resolveDir(rndParent(src)); e != 0 {
		return e
	}
	if e := m.resolveDir(rndParent(dst)); e != 0 {
		return e
	}
	sk, dk := m.kind(src), m.kind(dst)
	if sk == rndNone {
		return syscall.ENOENT
	}
	if src == dst {
		return 0
	}
	// The source may not be an ancestor of the target ...
	if sk == rndDir && strings.HasPrefix(dst, src+"/") {
		return syscall.EINVAL
	}
	// ... nor the target an ancestor of the source.
	if dk == rndDir && strings.HasPrefix(src, dst+"/") {
		return syscall.ENOTEMPTY
	}
	switch {
	case dk == rndNone:
		return 0
	case sk == rndDir && dk == rndFile:
		return syscall.ENOTDIR
	case sk == rndFile && dk == rndDir:
		return syscall.EISDIR
	case dk == rndDir && !m.empty(dst):
		return syscall.ENOTEMPTY
	}
	return 0
}

func (r *rnd) rename(i int, op, src, dst string) {
	want := r.m.renameWant(src, dst)
	desc := fmt.Sprintf("rename %s -> %s", src, dst)
	r.record(i, op, desc, want)
	err := syscall.Rename(r.abs(src), r.abs(dst))
	if want == 0 && src != dst && (r.m.journals(src) || r.m.kind(dst) == rndFile) && r.refusedForSpace(err) {
		return // journaled before it is made: refused whole
	}
	r.expect(desc, want, err)
	if want == 0 && src != dst {
		r.m.move(src, dst)
		r.moveUnjournaled(src, dst)
	}
}

// moveUnjournaled notes that a rename that went through journaled every
// file it moved, with its content, and removed the file it replaced: none
// of them is unjournaled any more.
func (r *rnd) moveUnjournaled(src, dst string) {
	for p := range r.unjournaled {
		if p == src || strings.HasPrefix(p, src+"/") || p == dst {
			delete(r.unjournaled, p)
		}
	}
}

// opAtomicSave saves a file the way editors do: the new content goes to a
// temporary file beside it, which is then renamed over it.
func (r *rnd) opAtomicSave(i int) {
	if len(r.m.files) == 0 {
		r.opCreate(i)
		return
	}
	p := rndPick(r, r.m.sortedFiles())
	tmp := rndJoin(rndParent(p), "."+p[strings.LastIndexByte(p, '/')+1:]+".tmp")
	r.create(i, "atomic-save", tmp, false, r.content(300))
	r.rename(i, "atomic-save", tmp, p)
}

// opCopy copies a file (cp a b): two files with the same bytes.
func (r *rnd) opCopy(i int) {
	if len(r.m.files) == 0 {
		r.opCreate(i)
		return
	}
	src := rndPick(r, r.m.sortedFiles())
	r.create(i, "copy", r.pickNewPath(rndMaxFiles, len(r.m.files)), false, slices.Clone(r.m.files[src]))
}

// opBackup moves a file aside and copies it back (mv a a.bak; cp a.bak a):
// a new file with the same bytes where the moved one was.
func (r *rnd) opBackup(i int) {
	if len(r.m.files) == 0 {
		r.opCreate(i)
		return
	}
	p := rndPick(r, r.m.sortedFiles())
	c := slices.Clone(r.m.files[p])
	dst := rndJoin(r.pickDir(rndMaxDepth-1), rndPick(r, rndNames))
	if r.m.renameWant(p, dst) != 0 || p == dst {
		r.rename(i, "backup", p, dst)
		return
	}
	r.rename(i, "backup", p, dst)
	r.create(i, "backup", p, true, c)
}

// opHandleMove writes through a descriptor, renames or unlinks the file
// while it is open, writes again and closes: the file keeps what was
// written at its new path, or is gone with everything written to it.
func (r *rnd) opHandleMove(i int) {
	if len(r.m.files) == 0 {
		r.opCreate(i)
		return
	}
	p := rndPick(r, r.m.sortedFiles())
	desc := "open " + p + " for writing"
	r.record(i, "handle-move", desc, 0)
	fd, err := r.open(p, syscall.O_WRONLY, 0)
	r.expect(desc, 0, err)
	cur := p // where the open file is now; "" once unlinked
	dirty, wrote := false, false
	write := func() {
		data := r.content(100)
		wrote = wrote || len(data) > 0
		off := r.rng.IntN(min(len(r.m.files[cur])+10, rndMaxContent-len(data)) + 1)
		d := fmt.Sprintf("pwrite (open %s) off=%d len=%d", p, off, len(data))
		r.ops = append(r.ops, fmt.Sprintf("%d: %s", i, d))
		n, err := rndWriteLoop(fd, data, off, false)
		r.expect(d, 0, err)
		if cur == "" || n == 0 {
			return
		}
		dirty = true
		c := r.m.files[cur]
		if end := off + n; end > len(c) {
			c = append(c, make([]byte, end-len(c))...)
		}
		copy(c[off:], data[:n])
		r.m.files[cur] = c
	}
	write()
	if r.pct(30) {
		d := "unlink (open) " + p
		r.record(i, "handle-move", d, 0)
		if err := syscall.Unlink(r.abs(p)); !r.refusedForSpace(err) {
			r.expect(d, 0, err)
			delete(r.m.files, p)
			delete(r.unjournaled, p)
			cur = ""
		}
	} else {
		dst := rndJoin(r.pickDir(rndMaxDepth-1), rndPick(r, rndNames))
		r.rename(i, "handle-move", p, dst)
		if _, ok := r.m.files[p]; !ok {
			cur = dst
		}
	}
	write()
	r.closeWriter("close (open) "+p, fd, cur, dirty, wrote)
}

// opSwap swaps two files or directories through a temporary name, as
// scripts do (mv a tmp; mv b a; mv tmp b): a cycle of renames the
// flusher has to untangle.
func (r *rnd) opSwap(i int) {
	all := append(r.m.sortedFiles(), r.m.sortedDirs()[1:]...)
	if len(all) < 2 {
		r.opCreate(i)
		return
	}
	a, b := rndPick(r, all), rndPick(r, all)
	const tmp = ".swap"
	r.rename(i, "swap", a, tmp)
	r.rename(i, "swap", b, a)
	r.rename(i, "swap", tmp, b)
}

// opRotate moves three or four files or directories round through a
// temporary name (mv a t; mv d a; mv c d; mv b c; mv t b): a longer cycle.
func (r *rnd) opRotate(i int) {
	all := append(r.m.sortedFiles(), r.m.sortedDirs()[1:]...)
	k := 3 + r.rng.IntN(2)
	if len(all) < k {
		r.opCreate(i)
		return
	}
	r.rng.Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
	ring := all[:k]
	const tmp = ".rotate"
	r.rename(i, "rotate", ring[0], tmp)
	for j := 0; j < k-1; j++ {
		r.rename(i, "rotate", ring[k-1-j], ring[(k-j)%k])
	}
	r.rename(i, "rotate", tmp, ring[1])
}

// opRenameFile renames a file: onto a new name, over another file, into
// another directory, or onto something that refuses it.
func (r *rnd) opRenameFile(i int) {
	src := r.pickFile()
	var dst string
	switch {
	case len(r.m.files) > 1 && r.pct(35): // over an existing file
		dst = rndPick(r, r.m.sortedFiles())
	case r.pct(10) && len(r.m.dirs) > 0: // onto a directory
		dst = rndPick(r, r.m.sortedDirs()[1:])
	default:
		dst = rndJoin(r.pickDir(rndMaxDepth-1), rndPick(r, rndNames))
	}
	r.rename(i, "rename-file", src, dst)
}

// opRenameDir renames a directory: to a new name, over an empty or
// non-empty directory, into another directory, or into itself (EINVAL).
func (r *rnd) opRenameDir(i int) {
	if len(r.m.dirs) == 0 {
		r.opMkdir(i)
		return
	}
	src := rndPick(r, r.m.sortedDirs()[1:])
	var dst string
	switch {
	case r.pct(25): // over another directory
		dst = rndPick(r, r.m.sortedDirs()[1:])
	case r.pct(8): // over a file
		dst = r.pickFile()
	default:
		dst = rndJoin(r.pickDir(rndMaxDepth-1), rndPick(r, rndNames))
	}
	// Keep the tree shallow: a move that would nest too deep goes to the root.
	if !strings.HasPrefix(dst, src+"/") && rndDepth(dst)+r.m.subtreeDepth(src) > rndMaxDepth {
		dst = rndPick(r, rndNames)
	}
	r.rename(i, "rename-dir", src, dst)
}

func (r *rnd) opUnlink(i int) {
	p := r.pickFile()
	if r.pct(10) && len(r.m.dirs) > 0 {
		p = rndPick(r, r.m.sortedDirs()[1:])
	}
	want := r.m.fileWant(p)
	desc := "unlink " + p
	r.record(i, "unlink", desc, want)
	err := syscall.Unlink(r.abs(p))
	if want == 0 && r.refusedForSpace(err) {
		return // journaled before it is made: refused whole
	}
	r.expect(desc, want, err)
	if want == 0 {
		delete(r.m.files, p)
		delete(r.unjournaled, p)
	}
}

func (r *rnd) opMkdir(i int) {
	p := r.pickNewPath(rndMaxDirs, len(r.m.dirs))
	want := r.m.resolveDir(rndParent(p))
	if want == 0 && r.m.kind(p) != rndNone {
		want = syscall.EEXIST
	}
	desc := "mkdir " + p
	r.record(i, "mkdir", desc, want)
	r.expect(desc, want, syscall.Mkdir(r.abs(p), 0o755))
	if want == 0 {
		r.m.dirs[p] = true
	}
}

func (r *rnd) opRmdir(i int) {
	var p string
	switch {
	case len(r.m.dirs) > 0 && r.pct(75):
		p = rndPick(r, r.m.sortedDirs()[1:])
	default:
		p = r.pickFile()
	}
	want := r.m.resolveDir(rndParent(p))
	if want == 0 {
		switch r.m.kind(p) {
		case rndNone:
			want = syscall.ENOENT
		case rndFile:
			want = syscall.ENOTDIR
		default:
			if !r.m.empty(p) {
				want = syscall.ENOTEMPTY
			}
		}
	}
	desc := "rmdir " + p
	r.record(i, "rmdir", desc, want)
	r.expect(desc, want, syscall.Rmdir(r.abs(p)))
	if want == 0 {
		delete(r.m.dirs, p)
	}
}

// opMarker tries to change the marker file: always refused (EPERM), or
// refused by the kernel first (EISDIR, ENOTDIR, EEXIST).
func (r *rnd) opMarker(i int) {
	mk := fs.MarkerName
	switch r.rng.IntN(7) {
	case 0:
		r.record(i, "marker", "unlink "+mk, syscall.EPERM)
		r.expect("unlink "+mk, syscall.EPERM, syscall.Unlink(r.abs(mk)))
	case 1:
		dst := rndPick(r, rndNames)
		want := syscall.EPERM
		if r.m.kind(dst) == rndDir {
			want = syscall.EISDIR
		}
		desc := fmt.Sprintf("rename %s -> %s", mk, dst)
		r.record(i, "marker", desc, want)
		r.expect(desc, want, syscall.Rename(r.abs(mk), r.abs(dst)))
	case 2:
		if len(r.m.files) == 0 {
			return
		}
		src := rndPick(r, r.m.sortedFiles())
		desc := fmt.Sprintf("rename %s -> %s", src, mk)
		r.record(i, "marker", desc, syscall.EPERM)
		r.expect(desc, syscall.EPERM, syscall.Rename(r.abs(src), r.abs(mk)))
	case 3:
		desc := "open(O_WRONLY) " + mk
		r.record(i, "marker", desc, syscall.EPERM)
		fd, err := r.open(mk, syscall.O_WRONLY, 0)
		if err == nil {
			r.closeFD(desc, fd, 0)
		}
		r.expect(desc, syscall.EPERM, err)
	case 4:
		desc := "truncate " + mk
		r.record(i, "marker", desc, syscall.EPERM)
		r.expect(desc, syscall.EPERM, syscall.Truncate(r.abs(mk), 0))
	case 5:
		r.record(i, "marker", "mkdir "+mk, syscall.EEXIST)
		r.expect("mkdir "+mk, syscall.EEXIST, syscall.Mkdir(r.abs(mk), 0o755))
	case 6:
		r.record(i, "marker", "rmdir "+mk, syscall.ENOTDIR)
		r.expect("rmdir "+mk, syscall.ENOTDIR, syscall.Rmdir(r.abs(mk)))
	}
}

// opInvalid runs an operation chosen to fail: a directory renamed into
// itself (EINVAL), a file created in a missing directory (ENOENT), a write
// past 102,400 bytes (EFBIG).
func (r *rnd) opInvalid(i int) {
	switch r.rng.IntN(3) {
	case 0:
		if len(r.m.dirs) == 0 {
			return
		}
		src := rndPick(r, r.m.sortedDirs()[1:])
		var below []string
		for _, d := range r.m.sortedDirs() {
			if d == src || strings.HasPrefix(d, src+"/") {
				below = append(below, d)
			}
		}
		r.rename(i, "rename-into-self", src, rndJoin(rndPick(r, below), rndPick(r, rndNames)))
	case 1:
		p := rndJoin(rndJoin(rndPick(r, r.m.sortedDirs()), "missing"), rndPick(r, rndNames))
		desc := "create " + p
		r.record(i, "create-in-missing", desc, syscall.ENOENT)
		fd, err := r.open(p, syscall.O_WRONLY|syscall.O_CREAT, 0o644)
		if err == nil {
			r.closeFD(desc, fd, 0)
		}
		r.expect(desc, syscall.ENOENT, err)
	case 2:
		if len(r.m.files) == 0 {
			return
		}
		p := rndPick(r, r.m.sortedFiles())
		data := bytes.Repeat([]byte("q"), 1+r.rng.IntN(4096))
		off := rndMaxContent - len(data) + 1 + r.rng.IntN(100)
		desc := fmt.Sprintf("pwrite %s off=%d len=%d", p, off, len(data))
		r.record(i, "write-too-far", desc, syscall.EFBIG)
		fd, err := r.open(p, syscall.O_WRONLY, 0)
		r.expect(desc+": open", 0, err)
		n := r.write(desc, p, fd, off, data, false)
		r.closeWriter(desc, fd, p, n > 0, true)
	}
}
