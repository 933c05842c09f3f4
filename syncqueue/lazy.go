package syncqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"

	"github.com/memfs/memfs/store"
)

// Content behind the listing (docs/operating.md, "Mounting a store"). Open lists the store in the
// basic view and loads the tree lazily (fs/tree_lazy.go): the mount shows
// every path and size before any content arrives. Start then fetches the
// content in the background (fetchAll), and an operation that needs one
// file's bytes first fetches that one file (Fetch), so a reader waits for
// its file only.
//
// A fetched content is put into the tree only when its sha is the base
// this mount agreed on for the memory: it is then exactly what the
// listing described. A memory that changed in the store meanwhile is
// merged like any remote change (applyRemote), so the overlay's rules
// hold for files not fetched yet: a remote edit or move replaces the lazy
// file whole, a remote delete removes it.
//
// A store that stops answering: reads of files not fetched yet fail with
// EIO (never empty or wrong bytes), with one log line until a fetch works
// again; a read waits at most EngineOptions.FetchWait for a store that
// does not answer at all (a fifth of it once fetches are failing); the
// background fetch retries with a backoff until every file has its
// content.

// DefaultFetchWait is EngineOptions.FetchWait's default.
const DefaultFetchWait = 10 * time.Second

// lazyLoad is the engine's state of the content fetch.
type lazyLoad struct {
	mu      sync.Mutex
	flights map[string]*flight // GUARDED_BY(mu): on-demand fetches in flight, by memory id
	down    bool               // GUARDED_BY(mu): the last fetch failed (logged once)
	// failed holds the on-demand fetches that found no answer within
	// their wait less than refetchAfter ago, by memory id: the kernel asks
	// again at once after a failed read (readahead, then the read
	// itself), and that second ask gets the same answer instead of a
	// second wait. Cleared when a fetch works.
	failed map[string]failedFetch // GUARDED_BY(mu)
}

// refetchAfter is how long an on-demand fetch that found no answer is
// answered from lazyLoad.failed: long enough for the kernel's second ask,
// short enough that nobody retrying by hand meets it.
const refetchAfter = 250 * time.Millisecond

type failedFetch struct {
	at  time.Time
	err error
}

// flight is one fetch that concurrent callers for the same file share.
type flight struct {
	done chan struct{}
	err  error
}

// Fetch brings the content of the file fileID (a memory id: a lazy file
// is always a memory loaded from the store) into the tree: the tree calls
// it (fs.Fetcher) when an operation needs the bytes. Concurrent calls for
// one file share one request.
func (e *Engine) Fetch(fileID string) error {
	l := &e.lazy
	l.mu.Lock()
	if f, ok := l.flights[fileID]; ok {
		l.mu.Unlock()
		<-f.done
		return f.err
	}
	if ff, ok := l.failed[fileID]; ok && time.Since(ff.at) < refetchAfter {
		l.mu.Unlock()
		return ff.err
	}
	f := &flight{done: make(chan struct{})}
	l.flights[fileID] = f
	wait := e.opts.FetchWait
	if l.down {
		wait /= 5 // known failing: try, but don't make every reader wait long
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.life, wait)
	f.err = e.fetchOne(ctx, fileID)
	cancel()
	if errors.Is(f.err, context.DeadlineExceeded) {
		f.err = fmt.Errorf("no answer from the memory store within %s: %w", wait, f.err)
	}
	l.mu.Lock()
	delete(l.flights, fileID)
	if errors.Is(f.err, context.DeadlineExceeded) {
		if l.failed == nil {
			l.failed = make(map[string]failedFetch)
		}
		l.failed[fileID] = failedFetch{at: time.Now(), err: f.err}
	}
	l.mu.Unlock()
	close(f.done)
	return f.err
}

// fetchOne fetches one memory and puts it into the tree: as the file's
// content when it is still what the mount agreed on, else merged as a
// remote change. The owner makes the request (fetchWanted): once the
// memory is free (busy.go), so the answer is carried out on the state it
// was asked from. It waits for the answer, or until ctx ends while the
// memory is still busy (a request made with ctx is answered when ctx
// ends).
func (e *Engine) fetchOne(ctx context.Context, id string) error {
	w := fetchWanted{ctx: ctx, id: id, reply: make(chan error, 1), started: make(chan struct{})}
	if !e.send(ctx, w) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errOwnerGone
	}
	select {
	case err := <-w.reply:
		return err
	case <-ctx.Done():
	}
	select {
	case <-w.started:
		return <-w.reply
	default:
		return ctx.Err()
	}
}

// fill puts m's content into its lazy file if m is what the mount agreed
// on, and reports whether m needs nothing more (filled, or not lazy and
// agreed on).
func (e *Engine) fill(m *store.Memory) bool {
	if m == nil || m.Content == nil {
		return false
	}
	k, ok := e.ms.known[m.ID]
	if !ok || k.sha != m.ContentSHA256 {
		return false
	}
	e.tree.Fill(e.ms.byMemory[m.ID], contentBytes(m))
	return true
}

// contentBytes is m's content as bytes without a copy: the tree keeps
// content it is given without writing into it (fs/tree_lazy.go), and the
// journal copies what it is given, so the decoded response's bytes are
// the one copy of the file's content.
func contentBytes(m *store.Memory) []byte {
	return unsafe.Slice(unsafe.StringData(*m.Content), len(*m.Content))
}

// fetchAll fetches the content of every lazy file: the store's full
// listing first (20 memories a request, by directory in parallel), then
// one request per file still lazy (changed in the store while listed),
// retrying with a backoff while the store fails, until none is left or
// ctx ends. It logs one line when all content is in.
func (e *Engine) fetchAll(ctx context.Context) {
	start := time.Now()
	b := newBackoff(time.Second, 30*time.Second)
	listed := false
	for left := e.tree.LazyCount(); left > 0; {
		var err error
		if !listed {
			_, err = listStore(ctx, e.opts.Store, e.opts.StoreID, e.opts.Concurrency, true, func(ms []store.Memory) {
				l := listedPage{ms: ms, done: make(chan struct{})}
				if e.send(ctx, l) {
					<-l.done
				}
			})
			listed = err == nil
		} else {
			err = e.fetchEach(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !isLocal(err) { // a merge that waits here is not the store failing
				e.fetchFailed(err)
			}
			if !sleepCtx(ctx, b.next()) {
				return
			}
			continue
		}
		e.fetchWorked()
		if now := e.tree.LazyCount(); now < left {
			left = now
			b.reset()
		} else if !sleepCtx(ctx, b.next()) {
			return // no progress (a merge that waits): don't spin
		}
	}
	e.log.WithFields(logrus.Fields{"memories": e.loaded, "seconds": math.Round(time.Since(start).Seconds()*100) / 100}).
		Info("memory contents fetched")
	// The load's garbage (responses, decoded pages) is about the size of
	// the content; without this the process keeps it resident until the
	// runtime's scavenger gives it back, minutes later (the M1 benchmark).
	debug.FreeOSMemory()
}

// fetchEach fetches every file still lazy, one request each, up to
// Concurrency at once.
func (e *Engine) fetchEach(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.opts.Concurrency)
	for _, id := range e.tree.Lazy() {
		g.Go(func() error { return e.fetchOne(gctx, id) })
	}
	return g.Wait()
}

// fetchFailed logs the first of a run of failed fetches.
func (e *Engine) fetchFailed(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	l := &e.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.down {
		l.down = true
		e.log.WithError(err).Error("the content of files not fetched yet can't be fetched: reading them fails with EIO until the memory store answers (retried)")
	}
}

// fetchWorked ends a run of failed fetches.
func (e *Engine) fetchWorked() {
	l := &e.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.failed)
	if l.down {
		l.down = false
		e.log.Info("the memory store answers again: files not fetched yet can be read")
	}
}

// ContentProgress is how much of the store's content is on the mount:
// Fetched of Total memories listed at mount.
type ContentProgress struct {
	Fetched int `json:"fetched"`
	Total   int `json:"total"`
}

// contentProgress is the content fetch's progress now.
func (e *Engine) contentProgress() ContentProgress {
	if e.tree == nil {
		return ContentProgress{}
	}
	return ContentProgress{Fetched: max(0, e.loaded-e.tree.LazyCount()), Total: e.loaded}
}
