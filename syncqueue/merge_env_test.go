package syncqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server/servertest"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/syncqueue/journal"
)

// The merge tests run the real engine against the real store service
// (store/server over SQLite, in process, behind httptest) without a FUSE
// mount: local changes go through the fs.Tree's methods, as the FUSE nodes
// would make them; remote changes are made by a second client straight to
// the server. Between the engine and the server sits mgProxy, which only
// records requests and injects the faults a real server can't be made to
// produce (a lost response, a server without the change feed, an expired
// cursor, a refused upload). Tests that need time to pass run the same in
// a testing/synctest bubble, without sockets (bubble_test.go).

const mgAdminKey = servertest.AdminKey

// mgReq is one request the engine sent.
type mgReq struct {
	kind   string // changes, list, get, create, update, delete, store
	method string
	url    string
	body   []byte
}

// mgFault may answer a request itself (returning true), using p.forward to
// pass it to the server first if it likes.
type mgFault func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool

// mgProxy stands between the engine and the server.
type mgProxy struct {
	next http.Handler

	mu       sync.Mutex
	reqs     []mgReq       // GUARDED_BY(mu)
	fault    mgFault       // GUARDED_BY(mu)
	feedGate chan struct{} // GUARDED_BY(mu): when set, change-feed answers wait until it is closed
}

// mgKind classifies an API request by route.
func mgKind(r *http.Request) string {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1 memory_stores ID [memories [MID]] | [changes]
	switch {
	case len(segs) == 4 && segs[3] == "changes":
		return "changes"
	case len(segs) == 4 && segs[3] == "memory_versions":
		return "versions"
	case len(segs) == 4 && segs[3] == "memories" && r.Method == http.MethodGet:
		return "list"
	case len(segs) == 4 && segs[3] == "memories" && r.Method == http.MethodPost:
		return "create"
	case len(segs) == 5 && r.Method == http.MethodGet:
		return "get"
	case len(segs) == 5 && r.Method == http.MethodPost:
		return "update"
	case len(segs) == 5 && r.Method == http.MethodDelete:
		return "delete"
	}
	return "store"
}

func (p *mgProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	kind := mgKind(r)
	p.mu.Lock()
	p.reqs = append(p.reqs, mgReq{kind: kind, method: r.Method, url: r.URL.String(), body: body})
	fault := p.fault
	p.mu.Unlock()
	if fault != nil && fault(p, w, r, kind, body) {
		return
	}
	rec := p.forward(r, body)
	if kind == "changes" {
		p.mu.Lock()
		gate := p.feedGate
		p.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
	}
	mgCopy(w, rec)
}

// forward has the server answer r (whose body is body) into a recorder.
func (p *mgProxy) forward(r *http.Request, body []byte) *httptest.ResponseRecorder {
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	p.next.ServeHTTP(rec, r)
	return rec
}

func mgCopy(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// mgDrop closes the client's connection without an answer.
func mgDrop(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

// mgWriteError answers with the server's error envelope.
func mgWriteError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("content-type", "application/json")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_proxy"})
}

// setFault applies f to every request that arrives from now on; it
// returns how many requests arrived before (see waitNewPoll).
func (p *mgProxy) setFault(f mgFault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	return len(p.reqs)
}

// waitNewPoll waits until a change-feed request arrives after the first n
// requests: a long poll already waiting at the server when a fault was set
// doesn't get it, the next one does.
func (p *mgProxy) waitNewPoll(t *testing.T, n int) {
	t.Helper()
	eventually(t, "a new long poll", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, r := range p.reqs[n:] {
			if r.kind == "changes" {
				return true
			}
		}
		return false
	})
}

// holdFeed makes change-feed answers wait (the overlay sees nothing new)
// until releaseFeed.
func (p *mgProxy) holdFeed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.feedGate = make(chan struct{})
}

func (p *mgProxy) releaseFeed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.feedGate != nil {
		close(p.feedGate)
		p.feedGate = nil
	}
}

// requests returns the recorded requests of a kind.
func (p *mgProxy) requests(kind string) []mgReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []mgReq
	for _, r := range p.reqs {
		if r.kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// mgEnv is one store on an in-process server, and an engine with its tree.
type mgEnv struct {
	t       *testing.T
	proxy   *mgProxy
	remote  *client.Client // another writer, straight to the server
	storeID string
	eng     *Engine
	tree    *fs.Tree
	hook    *logtest.Hook
	ids     map[string]string // path -> memory id of the initial files

	proxyURL string
	bubble   bool // in a synctest bubble: no sockets (mgSetupBubble)
}

// mgSetup starts the server with a store holding files; the engine is
// not created yet.
func mgSetup(t *testing.T, files map[string]string) *mgEnv {
	t.Helper()
	return mgSetupWith(t, files, sqlstore.Options{})
}

// mgSetupWith is mgSetup on a server with database options.
func mgSetupWith(t *testing.T, files map[string]string, opts sqlstore.Options) *mgEnv {
	t.Helper()
	srv := servertest.NewWith(t, opts)
	e := &mgEnv{t: t, proxy: &mgProxy{next: srv}, ids: map[string]string{}}
	direct := httptest.NewServer(srv)
	t.Cleanup(direct.Close)
	proxied := httptest.NewServer(e.proxy)
	t.Cleanup(proxied.Close)
	t.Cleanup(e.proxy.releaseFeed)
	e.remote = mgClient(t, direct.URL)
	e.fill(files)
	e.proxyURL = proxied.URL
	return e
}

// fill creates the store, holding files, through e.remote.
func (e *mgEnv) fill(files map[string]string) {
	e.t.Helper()
	ctx := context.Background()
	st, err := e.remote.CreateStore(ctx, store.CreateStoreInput{Name: e.t.Name()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.storeID = st.ID
	for _, p := range slices.Sorted(maps.Keys(files)) {
		m, err := e.remote.CreateMemory(ctx, e.storeID, p, files[p])
		if err != nil {
			e.t.Fatalf("create %s: %v", p, err)
		}
		e.ids[p] = m.ID
	}
	e.proxy.mu.Lock()
	e.proxy.reqs = nil
	e.proxy.mu.Unlock()
}

// mgClient is a client whose idle connections are closed when the test
// ends (goleak checks for their goroutines).
func mgClient(t *testing.T, url string) *client.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Options{BaseURL: url, APIKey: mgAdminKey, HTTPClient: &http.Client{Transport: tr},
		RetryWaitMin: time.Millisecond, RetryWaitMax: 20 * time.Millisecond, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mgInterval is the flusher's interval in tests that drive passes with
// SyncNow: long enough never to tick, so only the change feed brings
// remote changes within a test's deadline.
const mgInterval = time.Hour

// start opens and starts the engine through the proxy; opt may change the
// options. The engine is finished (uncleanly: writes only) and closed when
// the test ends.
func (e *mgEnv) start(opt func(*EngineOptions)) {
	e.t.Helper()
	eng := e.startOwned(opt)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		eng.Finish(ctx, false)
		if err := eng.Close(ctx); err != nil {
			e.t.Errorf("engine Close: %v", err)
		}
	})
}

// waitContent waits until every file loaded at mount has its content.
func (e *mgEnv) waitContent() {
	e.t.Helper()
	eventually(e.t, "the content fetched", func() bool {
		c := e.eng.Status().Content
		return c.Fetched == c.Total
	})
}

// startOwned is start for a test that finishes and closes the engine
// itself (what Finish and Close do is what it checks).
func (e *mgEnv) startOwned(opt func(*EngineOptions)) *Engine {
	e.t.Helper()
	log, hook := logtest.NewNullLogger()
	e.hook = hook
	opts := EngineOptions{StoreID: e.storeID, Store: e.engineClient(), StateDir: e.t.TempDir(),
		Interval: mgInterval, PollWait: 2 * time.Second, Log: log}
	if opt != nil {
		opt(&opts)
	}
	eng, err := NewEngine(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := eng.Open(ctx); err != nil {
		e.t.Fatal(err)
	}
	eng.Start()
	e.eng, e.tree = eng, eng.Tree()
	return eng
}

// newMgEnv is mgSetup and start with the default options.
func newMgEnv(t *testing.T, files map[string]string) *mgEnv {
	t.Helper()
	e := mgSetup(t, files)
	e.start(nil)
	return e
}

// --- the local side: changes through the tree, as FUSE would make them ---

// lookup resolves a store path to an inode.
func (e *mgEnv) lookup(p string) (fs.Attr, error) {
	a := fs.Attr{Ino: fs.RootIno, Dir: true}
	for _, s := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		var err error
		if a, err = e.tree.Lookup(a.Ino, s); err != nil {
			return a, err
		}
	}
	return a, nil
}

// read returns a file's content on the mount, and whether it exists.
func (e *mgEnv) read(p string) (string, bool) {
	e.t.Helper()
	a, err := e.lookup(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		e.t.Fatalf("lookup %s: %v", p, err)
	}
	buf := make([]byte, a.Size+1)
	n, err := e.tree.Read(a.Ino, buf, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false // deleted in the store while its content was fetched
	}
	if err != nil {
		e.t.Fatalf("read %s: %v", p, err)
	}
	return string(buf[:n]), true
}

// write replaces (or creates) a file's content and closes it, creating
// parent directories as mkdir -p would. It returns what create or close
// returned.
func (e *mgEnv) write(p, content string) error {
	e.t.Helper()
	dir := fs.Attr{Ino: fs.RootIno, Dir: true}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, s := range segs[:len(segs)-1] {
		a, err := e.tree.Lookup(dir.Ino, s)
		if errors.Is(err, fs.ErrNotExist) {
			a, err = e.tree.Mkdir(dir.Ino, s, 0o755, testOwner)
		}
		if err != nil {
			e.t.Fatalf("mkdir for %s: %v", p, err)
		}
		dir = a
	}
	name := segs[len(segs)-1]
	a, err := e.tree.Lookup(dir.Ino, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if a, err = e.tree.Create(dir.Ino, name, 0o644, testOwner); err != nil {
			return err
		}
		err = e.tree.Open(a.Ino, true, false)
	case err == nil:
		err = e.tree.Open(a.Ino, true, true)
	}
	if err != nil {
		e.t.Fatalf("open %s: %v", p, err)
	}
	defer e.tree.Release(a.Ino)
	if _, err := e.tree.Write(a.Ino, []byte(content), 0); err != nil {
		e.t.Fatalf("write %s: %v", p, err)
	}
	return e.tree.Commit(a.Ino)
}

// mustWrite is write for content that must be accepted.
func (e *mgEnv) mustWrite(p, content string) {
	e.t.Helper()
	if err := e.write(p, content); err != nil {
		e.t.Fatalf("close %s: %v", p, err)
	}
}

func (e *mgEnv) unlink(p string) {
	e.t.Helper()
	parent := fs.Attr{Ino: fs.RootIno}
	if d := path.Dir(p); d != "/" {
		var err error
		if parent, err = e.lookup(d); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := e.tree.Unlink(parent.Ino, path.Base(p)); err != nil {
		e.t.Fatalf("unlink %s: %v", p, err)
	}
}

// --- the store side ---

func (e *mgEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// memory is the memory at p in the store, or nil.
func (e *mgEnv) memory(p string) *store.Memory {
	e.t.Helper()
	m, err := e.remote.MemoryByPath(e.ctx(), e.storeID, p)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// remotePut changes (or creates) the memory at p, as another writer.
func (e *mgEnv) remotePut(p, content string) *store.Memory {
	e.t.Helper()
	var m *store.Memory
	var err error
	if cur := e.memory(p); cur != nil {
		m, err = e.remote.UpdateMemory(e.ctx(), e.storeID, cur.ID, store.UpdateMemoryInput{Content: &content})
	} else {
		m, err = e.remote.CreateMemory(e.ctx(), e.storeID, p, content)
	}
	if err != nil {
		e.t.Fatalf("remote put %s: %v", p, err)
	}
	return m
}

func (e *mgEnv) remoteDelete(p string) {
	e.t.Helper()
	if err := e.remote.DeleteMemory(e.ctx(), e.storeID, e.memory(p).ID, nil); err != nil {
		e.t.Fatalf("remote delete %s: %v", p, err)
	}
}

// storeContents is the store as path -> content; a path listed twice
// fails the test.
func (e *mgEnv) storeContents() map[string]string {
	e.t.Helper()
	ms, err := e.remote.AllMemories(e.ctx(), e.storeID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		if _, dup := out[m.Path]; dup {
			e.t.Fatalf("the store lists %s twice", m.Path)
		}
		out[m.Path] = *m.Content
	}
	return out
}

// ops is the operations of a memory's versions, oldest first.
func (e *mgEnv) ops(memoryID string) []string {
	e.t.Helper()
	var out []string
	for v, err := range e.remote.Versions(e.ctx(), e.storeID, store.ListVersionsOptions{MemoryID: memoryID}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, v.Operation)
	}
	slices.Reverse(out)
	return out
}

// --- the engine ---

// caughtUp waits until the overlay has applied every change the store
// has committed so far (its cursor reached the feed's head).
func (e *mgEnv) caughtUp() {
	e.t.Helper()
	head, err := e.remote.Changes(e.ctx(), e.storeID, 0, 1, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, "the overlay to reach the feed's head", func() bool {
		var cursor int64
		e.onOwner(func() { cursor = e.eng.cursor })
		return cursor >= head.NextCursor
	})
}

// afterMerge returns once no merge of what the overlay was told (a
// listing compared, a feed page applied) is in progress on the owner.
func (e *mgEnv) afterMerge() {
	e.t.Helper()
	eventually(e.t, "the overlay's merges to end", func() bool {
		var n int
		e.onOwner(func() { n = e.eng.own.batches })
		return n == 0
	})
}

// ownerLook is an event that runs fn on the engine's owner (owner.go).
type ownerLook struct {
	fn   func()
	done chan struct{}
}

func (l ownerLook) handle(*Engine) {
	l.fn()
	close(l.done)
}

// onOwner runs fn on the engine's owner and waits until it has: the
// test's look at what the owner keeps (here, once the owner has ended).
func (e *mgEnv) onOwner(fn func()) {
	l := ownerLook{fn: fn, done: make(chan struct{})}
	if !e.eng.send(context.Background(), l) {
		fn()
		return
	}
	<-l.done
}

// waitLocal waits until the mount shows content at p (exists) or no file
// at p (!exists), and returns how long that took.
func (e *mgEnv) waitLocal(p, content string, exists bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	eventually(e.t, "the mount to show the store's "+p, func() bool {
		got, ok := e.read(p)
		return ok == exists && (!exists || got == content)
	})
	return time.Since(start)
}

func (e *mgEnv) sync(deletes, waive bool) SyncResult {
	e.t.Helper()
	return e.eng.SyncNow(e.ctx(), deletes, waive)
}

func (e *mgEnv) pending() []journal.Entry { return e.eng.journal.Pending() }

func (e *mgEnv) conflicts() []Conflict {
	e.t.Helper()
	all, err := e.eng.conflicts.List()
	if err != nil {
		e.t.Fatal(err)
	}
	return all
}

// warnings returns the warnings (and errors) logged whose message holds substr.
func (e *mgEnv) warnings(substr string) []*logrus.Entry {
	var out []*logrus.Entry
	for _, en := range e.hook.AllEntries() {
		if en.Level <= logrus.WarnLevel && strings.Contains(en.Message, substr) {
			out = append(out, en)
		}
	}
	return out
}

// noErrorsLogged fails the test if anything was logged at error level.
func (e *mgEnv) noErrorsLogged() {
	e.t.Helper()
	for _, en := range e.hook.AllEntries() {
		if en.Level <= logrus.ErrorLevel {
			e.t.Errorf("logged an error: %s %v", en.Message, en.Data)
		}
	}
}

// checkConflict checks the conflict log holds exactly one conflict, of
// p, keeping local, lost to a store holding theirs; and that one warning
// named the path and both shas.
func (e *mgEnv) checkConflict(p, local, theirs string) {
	e.t.Helper()
	all := e.conflicts()
	if len(all) != 1 {
		e.t.Fatalf("conflict log = %+v, want one conflict of %s", all, p)
	}
	c := all[0]
	if c.Path != p || c.LocalSHA != store.SHA256Hex(local) || c.StoreSHA != store.SHA256Hex(theirs) || c.StoreID != e.storeID || c.Size != len(local) {
		e.t.Errorf("conflict = %+v; want path %s, local sha of %q, store sha of %q", c, p, local, theirs)
	}
	if _, b, err := e.eng.conflicts.Get(c.ID); err != nil || string(b) != local {
		e.t.Errorf("conflict content = %q, %v; want %q", b, err, local)
	}
	ws := e.warnings("conflict")
	if len(ws) != 1 {
		e.t.Fatalf("%d conflict warnings, want 1: %v", len(ws), ws)
	}
	if ws[0].Data["path"] != p || ws[0].Data["local_sha256"] != store.SHA256Hex(local) || ws[0].Data["store_sha256"] != store.SHA256Hex(theirs) {
		e.t.Errorf("conflict warning %q %v: want the path and both shas", ws[0].Message, ws[0].Data)
	}
}

// noConflicts checks that nothing went to the conflict log.
func (e *mgEnv) noConflicts() {
	e.t.Helper()
	if all := e.conflicts(); len(all) != 0 {
		e.t.Errorf("conflict log = %+v, want none", all)
	}
	if ws := e.warnings("conflict"); len(ws) != 0 {
		e.t.Errorf("conflict warnings: %v", ws)
	}
}

func (e *mgEnv) noPending() {
	e.t.Helper()
	if p := e.pending(); len(p) != 0 {
		e.t.Errorf("pending = %+v, want nothing", p)
	}
}

func (e *mgEnv) wantStore(want map[string]string) {
	e.t.Helper()
	if got := e.storeContents(); !maps.Equal(got, want) {
		e.t.Errorf("store = %q\nwant    %q", got, want)
	}
}

func (e *mgEnv) wantLocal(p, want string) {
	e.t.Helper()
	if got, ok := e.read(p); !ok || got != want {
		e.t.Errorf("mount %s = %q (exists %v), want %q", p, got, ok, want)
	}
}

func (e *mgEnv) wantNoLocal(p string) {
	e.t.Helper()
	if got, ok := e.read(p); ok {
		e.t.Errorf("mount %s = %q, want no such file", p, got)
	}
}
