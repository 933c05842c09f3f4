package syncqueue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memfs/memfs/fs"
)

// skippingLocal is a local side that keeps files it never uploads, as a
// directory does (a symbolic link, a file over a memory's size): its
// Unjournaled lists them as *fs.Skipped besides the tree's own closes
// the journal could not take. It counts the retries.
type skippingLocal struct {
	*fs.Tree
	skipped map[string]string // path -> reason; set before Open
	retries atomic.Int32
}

func (l *skippingLocal) Unjournaled() map[string]error {
	out := l.Tree.Unjournaled()
	for p, why := range l.skipped {
		out[p] = &fs.Skipped{Reason: why}
	}
	return out
}

func (l *skippingLocal) RetryUnjournaled() (int, error) {
	l.retries.Add(1)
	return l.Tree.RetryUnjournaled()
}

// TestSkippedNotUploaded: a file the local side never uploads is pending
// in status as "not uploaded" with its own reason, after the journal's
// changes and counted apart from them; no pass counts it as waiting for
// room in the journal, nothing retries it, and the mount's end neither
// leaves it in the journal nor reports it lost.
func TestSkippedNotUploaded(t *testing.T) {
	t.Parallel()
	const linkWhy, bigWhy = "a symbolic link: never followed or uploaded", "larger than a memory may be (200000 bytes, at most 102,400): not uploaded until it is smaller"
	obs := &recObserver{}
	e := mgSetup(t, map[string]string{"/a.md": "alpha\n"})
	loc := &skippingLocal{skipped: map[string]string{"/link": linkWhy, "/big.md": bigWhy}}
	eng := e.startOwned(func(o *EngineOptions) {
		o.Observer = obs
		o.Local = func(fo fs.Options) (Local, error) {
			tr, err := fs.NewTree(fo)
			if err != nil {
				return nil, err
			}
			loc.Tree = tr
			return loc, nil
		}
	})
	e.tree = loc.Tree
	e.waitContent()
	e.mustWrite("/b.md", "beta\n")

	st := eng.Status()
	if len(st.Pending) != 3 || st.Pending[0].Op != "create" || st.Pending[0].Path != "/b.md" {
		t.Fatalf("pending %+v; want the create of /b.md first, then the two files not uploaded", st.Pending)
	}
	why := map[string]string{}
	for _, c := range st.Pending[1:] {
		if c.Op != OpNotUploaded {
			t.Errorf("%s: op %q, want %q", c.Path, c.Op, OpNotUploaded)
		}
		why[c.Path] = c.Reason
	}
	if why["/link"] != linkWhy || why["/big.md"] != bigWhy {
		t.Errorf("reasons %v; want the local side's own", why)
	}
	if st.PendingUploads != 1 || st.PendingUnjournaled != 0 || st.NotUploaded != 2 || st.NoSpace || st.JournalError != "" {
		t.Errorf("uploads %d, unjournaled %d, not uploaded %d, no space %v, journal error %q; want 1, 0, 2, false, none",
			st.PendingUploads, st.PendingUnjournaled, st.NotUploaded, st.NoSpace, st.JournalError)
	}

	if res := e.sync(false, false); res.Uploaded != 1 || res.Left != 0 {
		t.Errorf("pass: %+v; want /b.md uploaded, nothing left", res)
	}
	if _, waiting, _ := obs.last(); len(waiting) != 0 {
		t.Errorf("the pass told the observer %v waiting; want nothing (the skipped files are never tried)", waiting)
	}
	time.Sleep(unjournaledRetry + 300*time.Millisecond) // the schedule's retry had its chance
	if n := loc.retries.Load(); n != 0 {
		t.Errorf("RetryUnjournaled called %d times for files never uploaded; want none", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng.Finish(ctx, true)
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l := eng.Left(); !l.Empty() {
		t.Errorf("left %+v (%s); want nothing: the skipped files are not in the journal", l, l)
	}
	e.noErrorsLogged()
	if w := e.warnings("stay in the journal"); len(w) != 0 {
		t.Errorf("the end warned of changes left: %v", w[0].Data)
	}
}
