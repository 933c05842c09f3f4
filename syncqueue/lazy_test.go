package syncqueue

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
)

// lazyGate holds the background content fetch (the full-view listings)
// until it is opened, and can make every content request fail as an
// unreachable store would, or hang unanswered as a blackholed one does.
type lazyGate struct {
	mu   sync.Mutex
	open chan struct{}
	down bool
	hang chan struct{} // non-nil: content requests wait for it to close
}

func newLazyGate() *lazyGate { return &lazyGate{open: make(chan struct{})} }

func (g *lazyGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *lazyGate) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// setHang makes content requests hang unanswered (true) until it is
// called with false.
func (g *lazyGate) setHang(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case on && g.hang == nil:
		g.hang = make(chan struct{})
	case !on && g.hang != nil:
		close(g.hang)
		g.hang = nil
	}
}

func (g *lazyGate) fault(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
	full := kind == "list" && strings.Contains(r.URL.RawQuery, "view=full")
	if !full && kind != "get" {
		return false
	}
	g.mu.Lock()
	down, open, hang := g.down, g.open, g.hang
	g.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
			return true
		}
	}
	if down {
		mgWriteError(w, http.StatusServiceUnavailable, "api_error", "the proxy is down")
		return true
	}
	if full {
		select {
		case <-open:
		case <-r.Context().Done():
			return true
		}
	}
	return false
}

var lazyFiles = map[string]string{"/a.md": "alpha\n", "/d/b.md": "bravo, a longer one\n", "/d/c.md": "charlie\n"}

// lazyEnv mounts lazyFiles with the content fetch held by a gate.
func lazyEnv(t *testing.T) (*mgEnv, *lazyGate) {
	e := mgSetup(t, lazyFiles)
	g := newLazyGate()
	t.Cleanup(g.release)
	e.proxy.setFault(g.fault)
	e.start(nil)
	return e, g
}

func (e *mgEnv) content() ContentProgress { return e.eng.Status().Content }

// The mount shows every path and size before any content arrives, and a
// read waits for its own file only.
func TestLazyMountListsBeforeContent(t *testing.T) {
	t.Parallel()
	e, g := lazyEnv(t)
	for p, c := range lazyFiles {
		a, err := e.lookup(p)
		if err != nil || a.Size != int64(len(c)) {
			t.Errorf("stat %s before its content: size %d, %v; want %d", p, a.Size, err, len(c))
		}
	}
	if c := e.content(); c != (ContentProgress{Fetched: 0, Total: 3}) {
		t.Errorf("status content = %+v, want 0 of 3", c)
	}
	// The background fetch is held; this read fetches its one file.
	e.wantLocal("/d/b.md", lazyFiles["/d/b.md"])
	if c := e.content(); c != (ContentProgress{Fetched: 1, Total: 3}) {
		t.Errorf("status content after one read = %+v, want 1 of 3", c)
	}
	if gets := e.proxy.requests("get"); len(gets) != 1 || !strings.Contains(gets[0].url, e.ids["/d/b.md"]) {
		t.Errorf("requests for single memories: %v, want one for /d/b.md", gets)
	}
	g.release()
	e.waitContent()
	e.wantLocal("/a.md", lazyFiles["/a.md"])
	e.wantLocal("/d/c.md", lazyFiles["/d/c.md"])
	if gets := e.proxy.requests("get"); len(gets) != 1 {
		t.Errorf("the background fetch made %d single requests; the full listing carries the content", len(gets)-1)
	}
	e.noErrorsLogged()
}

// A store that can't be reached: reads of files not fetched yet fail with
// EIO, logged once, and work again once it answers.
func TestLazyUnreachableIsEIOLoggedOnceThenRecovers(t *testing.T) {
	t.Parallel()
	e, g := lazyEnv(t)
	g.setDown(true)
	g.release() // the background fetch fails too
	a, err := e.lookup("/a.md")
	if err != nil || a.Size != int64(len(lazyFiles["/a.md"])) {
		t.Fatalf("stat: %+v, %v", a, err)
	}
	buf := make([]byte, 64)
	for range 3 {
		n, err := e.tree.Read(a.Ino, buf, 0)
		if !errors.Is(err, fs.ErrUnfetched) || n != 0 {
			t.Fatalf("read while unreachable: %d bytes, %v; want EIO", n, err)
		}
	}
	// An append must not go on without the bytes either.
	if err := e.tree.Open(a.Ino, true, false); err != nil {
		t.Fatalf("open for writing while unreachable: %v", err)
	}
	if _, err := e.tree.Write(a.Ino, []byte("more"), a.Size); !errors.Is(err, fs.ErrUnfetched) {
		t.Errorf("append while unreachable: %v, want EIO", err)
	}
	e.tree.Release(a.Ino)
	if got := len(e.warnings("can't be fetched")); got != 1 {
		t.Errorf("%d log lines about unfetched content, want 1", got)
	}
	if c := e.content(); c.Fetched != 0 || c.Total != 3 {
		t.Errorf("status content = %+v, want 0 of 3", c)
	}
	g.setDown(false)
	e.wantLocal("/a.md", lazyFiles["/a.md"])
	recovered := false
	for _, en := range e.hook.AllEntries() {
		recovered = recovered || (en.Level == logrus.InfoLevel && strings.Contains(en.Message, "answers again"))
	}
	if !recovered {
		t.Error("no line says the content can be fetched again")
	}
	e.waitContent()
	if len(e.pending()) != 0 {
		t.Errorf("pending after failed reads: %v", e.pending())
	}
}

// A store that stops answering (a blackholed network): a read of a file
// not fetched yet fails with EIO after FetchWait, not after the client's
// whole timeout and retries, logged once; it works again once the store
// answers.
func TestLazyBlackholedStoreIsEIOAfterFetchWait(t *testing.T) {
	t.Parallel()
	e := mgSetup(t, lazyFiles)
	g := newLazyGate()
	t.Cleanup(g.release)
	t.Cleanup(func() { g.setHang(false) })
	e.proxy.setFault(g.fault)
	e.start(func(o *EngineOptions) { o.FetchWait = 500 * time.Millisecond })
	g.setHang(true)
	a, err := e.lookup("/a.md")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		done := make(chan error, 1)
		go func() {
			_, err := e.tree.Read(a.Ino, make([]byte, 64), 0)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, fs.ErrUnfetched) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("read %d of a blackholed store: %v; want EIO after the fetch wait", i, err)
			}
		case <-time.After(20 * time.Second): // generous; the client's own timeout is 30 s, and it retries
			t.Fatalf("read %d of a blackholed store still waiting after 20 s", i)
		}
	}
	if got := len(e.warnings("can't be fetched")); got != 1 {
		t.Errorf("%d log lines about unfetched content, want 1", got)
	}
	g.setHang(false)
	eventually(t, "a read of /a.md working again", func() bool {
		b := make([]byte, 64)
		n, err := e.tree.Read(a.Ino, b, 0)
		return err == nil && string(b[:n]) == lazyFiles["/a.md"]
	})
}

// A remote edit, move or delete of a file not fetched yet replaces it.
func TestLazyRemoteChangesToUnfetchedFiles(t *testing.T) {
	t.Parallel()
	e, _ := lazyEnv(t)
	e.remotePut("/a.md", "alpha, edited in the store\n")
	e.remoteDelete("/d/c.md")
	e.caughtUp()
	e.afterMerge()
	if a, err := e.lookup("/a.md"); err != nil || a.Size != int64(len("alpha, edited in the store\n")) {
		t.Errorf("stat after a remote edit: %+v, %v", a, err)
	}
	e.wantLocal("/a.md", "alpha, edited in the store\n")
	e.wantNoLocal("/d/c.md")
	e.noConflicts()
	e.noPending()
}

// Local changes to files not fetched yet are made on their real bytes:
// an append, a rename, a truncation.
func TestLazyLocalChangesToUnfetchedFiles(t *testing.T) {
	t.Parallel()
	e, _ := lazyEnv(t)
	a, err := e.lookup("/a.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.tree.Open(a.Ino, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tree.Write(a.Ino, []byte("appended\n"), a.Size); err != nil {
		t.Fatal(err)
	}
	if err := e.tree.Commit(a.Ino); err != nil {
		t.Fatal(err)
	}
	e.tree.Release(a.Ino)
	d, err := e.lookup("/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.tree.Rename(d.Ino, "b.md", fs.RootIno, "b.md", 0); err != nil {
		t.Fatal(err)
	}
	c, err := e.lookup("/d/c.md")
	if err != nil {
		t.Fatal(err)
	}
	four := int64(4)
	if _, err := e.tree.SetAttr(c.Ino, fs.SetAttrIn{Size: &four, Journal: true}); err != nil {
		t.Fatal(err)
	}
	if res := e.sync(true, true); res.Failed > 0 {
		t.Fatalf("pass: %+v", res)
	}
	e.wantStore(map[string]string{"/a.md": "alpha\nappended\n", "/b.md": lazyFiles["/d/b.md"], "/d/c.md": "char"})
	e.noConflicts()
}
