package syncqueue

import (
	"maps"
	"sync"
	"testing"
)

// recObserver records what an engine tells its Observer.
type recObserver struct {
	mu        sync.Mutex
	passes    []PassInfo
	waiting   []map[string]int
	remote    int
	conflicts int
}

func (o *recObserver) PassDone(p PassInfo, waiting map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.passes = append(o.passes, p)
	o.waiting = append(o.waiting, maps.Clone(waiting))
}

func (o *recObserver) RemoteApplied() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.remote++
}

func (o *recObserver) ConflictKept() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conflicts++
}

func (o *recObserver) last() (PassInfo, map[string]int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.passes[len(o.passes)-1], o.waiting[len(o.waiting)-1], len(o.passes)
}

func (o *recObserver) counts() (remote, conflicts int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.remote, o.conflicts
}

// The engine tells its observer of every pass (with what it left waiting,
// by reason), of each remote change it shows, and of each conflict kept.
func TestObserver(t *testing.T) {
	t.Parallel()
	obs := &recObserver{}
	e := mgSetup(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n"})
	e.start(func(o *EngineOptions) { o.Observer = obs })

	// A pass that uploads one file and leaves one that is not UTF-8.
	e.mustWrite("/ok.md", "goes up\n")
	if err := e.write("/bin.dat", "\xff\xfe"); err == nil {
		t.Fatal("close of content that is not UTF-8 succeeded")
	}
	res := e.sync(true, false)
	p, waiting, n := obs.last()
	if n != 1 || p.Result != res || p.Clean != (res.Failed == 0) || p.At.IsZero() {
		t.Fatalf("after one pass: %d passes told, last %+v; the pass returned %+v", n, p, res)
	}
	if want := map[string]int{ReasonNotUTF8: 1}; !maps.Equal(waiting, want) {
		t.Errorf("waiting after the pass: %v, want %v", waiting, want)
	}
	// Each pass counts what it left again.
	e.sync(true, false)
	if _, waiting, n := obs.last(); n != 2 || waiting[ReasonNotUTF8] != 1 {
		t.Errorf("second pass: %d passes told, waiting %v", n, waiting)
	}

	// A remote change shown on the mount.
	e.remotePut("/b.md", "b from elsewhere\n")
	e.waitLocal("/b.md", "b from elsewhere\n", true)
	if remote, _ := obs.counts(); remote != 1 {
		t.Errorf("remote changes told: %d, want 1", remote)
	}

	// Both sides change /a.md: the store wins, the local version is kept.
	e.mustWrite("/a.md", "mine\n")
	e.remotePut("/a.md", "theirs\n")
	e.waitLocal("/a.md", "theirs\n", true)
	e.caughtUp()
	e.checkConflict("/a.md", "mine\n", "theirs\n")
	if remote, conflicts := obs.counts(); remote != 2 || conflicts != 1 {
		t.Errorf("after the conflict: remote %d, conflicts %d; want 2 and 1", remote, conflicts)
	}
}
