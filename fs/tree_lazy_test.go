package fs

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeFetcher fills lazy files from contents. A file with a gate waits
// for it to be closed before it is filled; fail, when set, is returned
// instead of filling.
type fakeFetcher struct {
	tr *Tree

	mu       sync.Mutex
	contents map[string]string
	gates    map[string]chan struct{}
	fail     error
	calls    map[string]int
}

func (f *fakeFetcher) Fetch(id string) error {
	f.mu.Lock()
	f.calls[id]++
	gate, fail, content, tr := f.gates[id], f.fail, f.contents[id], f.tr
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return fail
	}
	tr.Fill(id, []byte(content))
	return nil
}

func (f *fakeFetcher) set(fn func(f *fakeFetcher)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeFetcher) callsOf(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

// lazyTree returns a tree loaded lazily with path → content (file id
// "m"+path) and its fetcher.
func lazyTree(t *testing.T, files map[string]string) (*Tree, *recJournal, *fakeFetcher) {
	t.Helper()
	f := &fakeFetcher{contents: map[string]string{}, gates: map[string]chan struct{}{}, calls: map[string]int{}}
	tr, j := newTestTree(t, Options{Fetcher: f})
	f.tr = tr
	var load []File
	for p, c := range files {
		f.contents["m"+p] = c
		load = append(load, File{FileID: "m" + p, Path: p, Lazy: true, Size: int64(len(c))})
	}
	tr.Load(load)
	return tr, j, f
}

func TestLazyStatShowsStoreSizeBeforeContent(t *testing.T) {
	tr, _, f := lazyTree(t, map[string]string{"/a/x.md": "hello", "/b.md": "twelve bytes"})
	for p, want := range map[string]int64{"/a/x.md": 5, "/b.md": 12} {
		a, err := tr.GetAttr(inoOf(t, tr, p))
		if err != nil || a.Size != want {
			t.Errorf("stat %s = %d, %v; want %d", p, a.Size, err, want)
		}
	}
	if n := tr.LazyCount(); n != 2 {
		t.Errorf("LazyCount = %d, want 2", n)
	}
	if f.callsOf("m/b.md") != 0 {
		t.Error("a stat fetched content")
	}
	if got := treeRead(t, tr, inoOf(t, tr, "/b.md")); got != "twelve bytes" {
		t.Errorf("read = %q", got)
	}
	if n := tr.LazyCount(); n != 1 {
		t.Errorf("LazyCount after a read = %d, want 1", n)
	}
	if f.Fill("m/a/x.md", "too long"); tr.LazyCount() != 1 {
		t.Error("Fill took content of another size than the store's")
	}
}

// Fill for the test reads better on the fetcher.
func (f *fakeFetcher) Fill(id, content string) bool { return f.tr.Fill(id, []byte(content)) }

func TestLazyReadWaitsForItsFileOnly(t *testing.T) {
	tr, _, f := lazyTree(t, map[string]string{"/slow.md": "slow", "/fast.md": "fast"})
	gate := make(chan struct{})
	f.set(func(f *fakeFetcher) { f.gates["m/slow.md"] = gate })
	slow := inoOf(t, tr, "/slow.md")
	done := make(chan string)
	go func() {
		buf := make([]byte, 10)
		n, err := tr.Read(slow, buf, 0)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(buf[:n])
	}()
	// The other file reads while the first one's fetch is held.
	if got := treeRead(t, tr, inoOf(t, tr, "/fast.md")); got != "fast" {
		t.Errorf("read fast = %q", got)
	}
	select {
	case got := <-done:
		t.Fatalf("the read of a held file returned %q before its content came", got)
	default:
	}
	close(gate)
	select {
	case got := <-done:
		if got != "slow" {
			t.Errorf("read slow = %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read did not end once its content came")
	}
}

func TestLazyFetchFailureIsEIOThenRecovers(t *testing.T) {
	tr, j, f := lazyTree(t, map[string]string{"/a.md": "content"})
	down := errors.New("store unreachable")
	f.set(func(f *fakeFetcher) { f.fail = down })
	ino := inoOf(t, tr, "/a.md")
	buf := make([]byte, 10)
	n, err := tr.Read(ino, buf, 0)
	if !errors.Is(err, ErrUnfetched) || toErrno(err) != syscall.EIO || n != 0 {
		t.Fatalf("read while unreachable = %d, %v (errno %v); want EIO and no bytes", n, err, toErrno(err))
	}
	if err := tr.Open(ino, true, false); err != nil {
		t.Errorf("open for writing while unreachable = %v; only the write needs the bytes", err)
	}
	if _, err := tr.Write(ino, []byte("more"), 7); toErrno(err) != syscall.EIO {
		t.Errorf("append while unreachable = %v, want EIO", err)
	}
	if err := tr.Commit(ino); err != nil {
		t.Errorf("close after a failed append = %v", err)
	}
	tr.Release(ino)
	if err := tr.Rename(RootIno, "a.md", RootIno, "b.md", 0); toErrno(err) != syscall.EIO {
		t.Errorf("rename while unreachable = %v, want EIO", err)
	}
	sz := int64(3)
	if _, err := tr.SetAttr(ino, SetAttrIn{Size: &sz, Journal: true}); toErrno(err) != syscall.EIO {
		t.Errorf("truncate while unreachable = %v, want EIO", err)
	}
	wantOps(t, j) // nothing journaled
	wantTree(t, tr, map[string]string{"/a.md": ""})
	if a, _ := tr.GetAttr(ino); a.Size != 7 {
		t.Errorf("size after failures = %d, want the store's 7", a.Size)
	}
	f.set(func(f *fakeFetcher) { f.fail = nil })
	if got := treeRead(t, tr, ino); got != "content" {
		t.Errorf("read once the store answers = %q", got)
	}
}

func TestLazyLocalChangesUseTheRealBytes(t *testing.T) {
	files := map[string]string{"/app.md": "abc", "/trunc.md": "0123456789", "/zero.md": "gone",
		"/otrunc.md": "old", "/d/x.md": "x1", "/d/y.md": "y1", "/mv.md": "moved", "/target.md": "replaced",
		"/rm.md": "removed"}
	tr, j, f := lazyTree(t, files)

	// Append: open for writing (no O_TRUNC) fetches; the close journals it all.
	ino := inoOf(t, tr, "/app.md")
	if err := tr.Open(ino, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Write(ino, []byte("def"), 3); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(ino); err != nil {
		t.Fatal(err)
	}
	tr.Release(ino)
	// truncate(2) to 4 fetches; to 0 and O_TRUNC don't need the bytes.
	four, zero := int64(4), int64(0)
	if _, err := tr.SetAttr(inoOf(t, tr, "/trunc.md"), SetAttrIn{Size: &four, Journal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.SetAttr(inoOf(t, tr, "/zero.md"), SetAttrIn{Size: &zero, Journal: true}); err != nil {
		t.Fatal(err)
	}
	oi := inoOf(t, tr, "/otrunc.md")
	if err := tr.Open(oi, true, true); err != nil {
		t.Fatal(err)
	}
	if err := tr.Commit(oi); err != nil {
		t.Fatal(err)
	}
	tr.Release(oi)
	// Renames carry each moved file's content; the replaced target's is not needed.
	if err := tr.Rename(RootIno, "d", RootIno, "e", 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Rename(RootIno, "mv.md", RootIno, "target.md", 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Unlink(RootIno, "rm.md"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m/zero.md", "m/otrunc.md", "m/target.md", "m/rm.md"} {
		if c := f.callsOf(id); c != 0 {
			t.Errorf("%s was fetched %d times; its bytes were not needed", id, c)
		}
	}
	ops := j.take()
	got := map[string]string{}
	for _, o := range ops {
		got[o.Op+" "+o.Path] = o.Content
	}
	want := map[string]string{"put /app.md": "abcdef", "put /trunc.md": "0123", "put /zero.md": "",
		"put /otrunc.md": "", "put /e/x.md": "x1", "put /e/y.md": "y1", "delete /target.md": "",
		"put /target.md": "moved", "delete /rm.md": ""}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("journal %s = %q (present %v), want %q; all: %v", k, g, ok, v, ops)
		}
	}
	if len(got) != len(want) {
		t.Errorf("journal: %v, want exactly %v", got, want)
	}
	if n := tr.LazyCount(); n != 0 {
		t.Errorf("LazyCount = %d, want 0", n)
	}
}

func TestLazyRemoteChangeReplacesAnUnfetchedFile(t *testing.T) {
	tr, j, f := lazyTree(t, map[string]string{"/a.md": "old", "/b.md": "bee"})
	if err := tr.Apply([]Change{{FileID: "m/a.md", Path: "/moved/a.md", Content: []byte("new content")},
		{FileID: "m/b.md", Deleted: true}}); err != nil {
		t.Fatal(err)
	}
	wantOps(t, j)
	wantTree(t, tr, map[string]string{"/moved/": "", "/moved/a.md": "new content"})
	if got := treeRead(t, tr, inoOf(t, tr, "/moved/a.md")); got != "new content" {
		t.Errorf("read = %q", got)
	}
	if f.callsOf("m/a.md") != 0 || tr.LazyCount() != 0 {
		t.Errorf("fetches %d, lazy %d; want none", f.callsOf("m/a.md"), tr.LazyCount())
	}
	// A late fill of the old content is refused.
	if f.Fill("m/a.md", "old") {
		t.Error("Fill replaced content that a remote change brought")
	}
}

func TestLazyMountListsAtOnceAndReadsWait(t *testing.T) {
	f := &fakeFetcher{contents: map[string]string{"m1": "first file\n", "m2": strings.Repeat("z", 5000)},
		gates: map[string]chan struct{}{}, calls: map[string]int{}}
	gate := make(chan struct{})
	f.gates["m2"] = gate
	m := mountTestTree(t, Options{Fetcher: f},
		File{FileID: "m1", Path: "/one.md", Lazy: true, Size: 11},
		File{FileID: "m2", Path: "/dir/two.md", Lazy: true, Size: 5000})
	f.set(func(f *fakeFetcher) { f.tr = m.tr })
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	out := m.mustSh(t, "stat -c '%n %s %a' one.md dir/two.md")
	if out != "one.md 11 644\ndir/two.md 5000 644\n" {
		t.Errorf("stat = %q", out)
	}
	if got := m.mustSh(t, "cat one.md"); got != "first file\n" {
		t.Errorf("cat one.md = %q", got)
	}
	if f.callsOf("m2") != 0 {
		t.Error("stat or another file's read fetched dir/two.md")
	}
	close(gate)
	if got := m.mustSh(t, "wc -c < dir/two.md"); strings.TrimSpace(got) != "5000" {
		t.Errorf("wc -c = %q", got)
	}
}

// One copy of each file's bytes: the tree keeps the slice it is given
// (Fill, Apply, Load) without copying it, and copies it on the first
// change, never writing into it.
func TestSharedContentIsKeptAndCopiedOnWrite(t *testing.T) {
	tr, j, _ := lazyTree(t, map[string]string{"/a.md": "abcdef", "/b.md": "remote"})
	given := []byte("abcdef")
	if !tr.Fill("m/a.md", given) {
		t.Fatal("Fill refused")
	}
	remote := []byte("remote, changed")
	if err := tr.Apply([]Change{{FileID: "m/b.md", Path: "/b.md", Content: remote}}); err != nil {
		t.Fatal(err)
	}
	held := func(p string) []byte {
		ino := inoOf(t, tr, p)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.byIno[ino].content
	}
	if h := held("/a.md"); &h[0] != &given[0] {
		t.Error("Fill copied the content: the tree holds a second copy of the file's bytes")
	}
	if h := held("/b.md"); &h[0] != &remote[0] {
		t.Error("Apply copied the content: the tree holds a second copy of the file's bytes")
	}
	for _, c := range []struct {
		p    string
		op   func(ino uint64) error
		orig []byte
		want string
	}{
		{"/a.md", func(ino uint64) error { _, err := tr.Write(ino, []byte("XY"), 1); return err }, given, "aXYdef"},
		{"/b.md", func(ino uint64) error { sz := int64(3); _, err := tr.SetAttr(ino, SetAttrIn{Size: &sz}); return err }, remote, "rem"},
	} {
		ino := inoOf(t, tr, c.p)
		before := string(c.orig)
		if err := tr.Open(ino, true, false); err != nil {
			t.Fatal(err)
		}
		if err := c.op(ino); err != nil {
			t.Fatal(err)
		}
		if err := tr.Commit(ino); err != nil {
			t.Fatal(err)
		}
		tr.Release(ino)
		if string(c.orig) != before {
			t.Errorf("%s: the shared bytes were written in place: %q, was %q", c.p, c.orig, before)
		}
		if got := treeRead(t, tr, ino); got != c.want {
			t.Errorf("%s = %q, want %q", c.p, got, c.want)
		}
	}
	// Growing a shortened file must not zero bytes of the buffer it came from.
	ino := inoOf(t, tr, "/b.md")
	sz := int64(6)
	if _, err := tr.SetAttr(ino, SetAttrIn{Size: &sz}); err != nil {
		t.Fatal(err)
	}
	if string(remote) != "remote, changed" {
		t.Errorf("the shared bytes were zeroed in place: %q", remote)
	}
	wantOps(t, j, putOp("m/a.md", "/a.md", "aXYdef"), putOp("m/b.md", "/b.md", "rem"))
}
