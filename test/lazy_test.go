package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// Content behind the listing (docs/operating.md, "Mounting a store"; the
// S3 benchmark) on real processes: memfs mount mounts from the store's
// listing and fetches the content behind it. lzGate is an HTTP proxy in
// front of memfs serve that holds the content requests (full-view
// listings, and single memories named in hold) until released, or
// answers them as an unreachable store would.
type lzGate struct {
	next http.Handler

	mu      sync.Mutex
	open    chan struct{}
	hold    map[string]bool // memory ids whose single requests wait too
	down    bool
	gets    []string // memory ids requested one by one
	content int      // content requests seen
}

func newLzGate(t *testing.T, target string) (*lzGate, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &lzGate{next: httputil.NewSingleHostReverseProxy(u), open: make(chan struct{}), hold: map[string]bool{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	t.Cleanup(g.release)
	return g, srv.URL
}

func (g *lzGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1 memory_stores ID memories [MID]
	full := len(segs) == 4 && segs[3] == "memories" && r.Method == http.MethodGet && r.URL.Query().Get("view") == "full"
	one := len(segs) == 5 && segs[3] == "memories" && r.Method == http.MethodGet
	if !full && !one {
		g.next.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	g.content++
	if one {
		g.gets = append(g.gets, segs[4])
	}
	down, open, held := g.down, g.open, full || g.hold[segs[len(segs)-1]]
	g.mu.Unlock()
	if down {
		w.Header().Set("content-type", "application/json")
		w.Header().Set("x-should-retry", "false")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "the gate is down"}})
		return
	}
	if held {
		select {
		case <-open:
		case <-r.Context().Done():
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

func (g *lzGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *lzGate) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

func (g *lzGate) requested(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, x := range g.gets {
		if x == id {
			return true
		}
	}
	return false
}

// lzEIO reports whether a command's stderr says EIO (cat and sh say it
// differently).
func lzEIO(stderr string) bool {
	return strings.Contains(stderr, "Input/output error") || strings.Contains(stderr, "I/O error")
}

// lzFiles: 30 small memories, some in a directory, and a large one.
func lzFiles() map[string]string {
	files := map[string]string{"/big.md": strings.Repeat("a large memory\n", 4000)}
	for i := range 30 {
		p := fmt.Sprintf("/m%02d.md", i)
		if i%3 == 0 {
			p = "/dir" + p
		}
		files[p] = strings.Repeat(fmt.Sprintf("memory %d\n", i), i+1)
	}
	return files
}

// lzContent is the mount's content progress in memfs status.
func lzContent(t *testing.T, e *mtEnv, dir string) (fetched, total int) {
	c := stStatus(t, "--state-dir", e.stateDir).mount(t, dir).Sync.Content
	return c.Fetched, c.Total
}

// lzWaitContent waits until the mount at dir has every memory's content.
func lzWaitContent(t *testing.T, stateDir, dir string) {
	t.Helper()
	mtPoll(t, "every content fetched", func() (bool, string) {
		c := stStatus(t, "--state-dir", stateDir).mount(t, dir).Sync.Content
		return c.Fetched == c.Total, fmt.Sprintf("%d of %d", c.Fetched, c.Total)
	})
}

// ls -l shows every size and mode at once, before any content arrived; a
// read waits for its own file only; memfs status shows the progress.
func TestMountLazyListsAtOnce(t *testing.T) {
	files := lzFiles()
	e := newMtEnv(t, files)
	big := e.memories()["/big.md"].ID
	g, proxy := newLzGate(t, e.serve.URL)
	g.hold[big] = true
	o := e.opts()
	o.URL = proxy
	m := harness.StartMount(t, o)
	defer mtStop(t, m)

	out := mtMustSh(t, m.Dir, "stat -c '%n %s %a' big.md m01.md dir/m03.md")
	want := fmt.Sprintf("big.md %d 644\nm01.md %d 644\ndir/m03.md %d 644\n", len(files["/big.md"]), len(files["/m01.md"]), len(files["/dir/m03.md"]))
	if out != want {
		t.Errorf("stat before the content arrived:\n%s\nwant\n%s", out, want)
	}
	if f, tot := lzContent(t, e, m.Dir); f != 0 || tot != len(files) {
		t.Errorf("status content: %d of %d fetched, want 0 of %d", f, tot, len(files))
	}
	// big.md's fetch is held; another file reads meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bigCat := exec.CommandContext(ctx, "cat", m.Dir+"/big.md")
	var bigOut strings.Builder
	bigCat.Stdout = &bigOut
	if err := bigCat.Start(); err != nil {
		t.Fatal(err)
	}
	bigDone := make(chan error, 1)
	go func() { bigDone <- bigCat.Wait() }()
	mtPoll(t, "the read of big.md to ask for its content", func() (bool, string) { return g.requested(big), "" })
	if got := mtMustSh(t, m.Dir, "cat m01.md"); got != files["/m01.md"] {
		t.Errorf("cat m01.md = %q", got)
	}
	select {
	case err := <-bigDone:
		t.Fatalf("cat big.md ended (%v) while its content was held", err)
	default:
	}
	if f, _ := lzContent(t, e, m.Dir); f != 1 {
		t.Errorf("status content: %d fetched after one read, want 1", f)
	}
	g.release()
	if err := <-bigDone; err != nil || bigOut.String() != files["/big.md"] {
		t.Fatalf("cat big.md once released: %v, %d bytes, want %d", err, bigOut.Len(), len(files["/big.md"]))
	}
	mtPoll(t, "every content fetched", func() (bool, string) {
		f, tot := lzContent(t, e, m.Dir)
		return f == tot, fmt.Sprintf("%d of %d", f, tot)
	})
	if got := mtMountFiles(t, m.Dir); fmt.Sprint(got) != fmt.Sprint(files) {
		t.Errorf("the mount holds\n%v\nwant\n%v", got, files)
	}
}

// A store that can't be reached before the content arrived: reads fail
// with EIO, one log line says why, an append does not go on without the
// bytes; once the store answers, everything reads.
func TestMountLazyUnreachableThenRecovers(t *testing.T) {
	files := lzFiles()
	e := newMtEnv(t, files)
	g, proxy := newLzGate(t, e.serve.URL)
	g.setDown(true)
	g.release()
	o := e.opts()
	o.URL = proxy
	m := harness.StartMount(t, o)
	defer mtStop(t, m)
	for range 3 {
		out, errb, err := mtSh(t, m.Dir, "cat m01.md")
		if err == nil || out != "" || !lzEIO(errb) {
			t.Fatalf("cat while the store is unreachable: %v, %q, %q; want EIO and no bytes", err, out, errb)
		}
	}
	if _, errb, err := mtSh(t, m.Dir, "echo more >> m02.md"); err == nil || !lzEIO(errb) {
		t.Errorf("append while unreachable: %v %q, want EIO", err, errb)
	}
	if n := len(m.Lines("can't be fetched")); n != 1 {
		t.Errorf("%d log lines about content that can't be fetched, want 1:\n%s", n, m.Output())
	}
	if out := mtMustSh(t, m.Dir, "stat -c %s m02.md"); strings.TrimSpace(out) != fmt.Sprint(len(files["/m02.md"])) {
		t.Errorf("stat m02.md while unreachable = %s, want the store's %d", out, len(files["/m02.md"]))
	}
	g.setDown(false)
	if got := mtMustSh(t, m.Dir, "cat m01.md"); got != files["/m01.md"] {
		t.Errorf("cat once the store answers = %q", got)
	}
	mtMustSh(t, m.Dir, "echo more >> m02.md")
	mtPoll(t, "every content fetched", func() (bool, string) {
		f, tot := lzContent(t, e, m.Dir)
		return f == tot, fmt.Sprintf("%d of %d", f, tot)
	})
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1, "failed": 0, "left": 0})
	if got := e.memories()["/m02.md"]; got.Content == nil || *got.Content != files["/m02.md"]+"more\n" {
		t.Errorf("the store's m02.md after the append: %v", got.Content)
	}
}
