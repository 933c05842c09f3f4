package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/memfs/memfs/store"
)

var paginationTests = []test{
	{"MemoriesUnderChange", testPageMemoriesUnderChange},
	{"DepthUnderChange", testPageDepthUnderChange},
	{"StoresUnderChange", testPageStoresUnderChange},
	{"VersionsUnderChange", testPageVersionsUnderChange},
}

var concurrencyTests = []test{
	{"SamePrecondition", testConcurrentPrecondition},
	{"SamePath", testConcurrentSamePath},
	{"Cap", testConcurrentCap},
	{"FeedOrder", testConcurrentFeedOrder},
	{"FileDir", testConcurrentFileDir},
	{"FeedReaderNoGaps", testFeedReaderNoGaps},
	{"InvalidPath", testConcurrentInvalidPath},
}

// writer runs fn(0), fn(1), ... in a goroutine that starts when released
// and reports each committed step on progress. A t.Cleanup releases it and
// waits for it, so it never outlives the test.
type writer struct {
	start    chan struct{}
	once     sync.Once
	progress chan struct{}
	done     chan struct{}
	err      error // set before done is closed
}

func startWriter(t *testing.T, steps int, fn func(i int) error) *writer {
	w := &writer{start: make(chan struct{}), progress: make(chan struct{}, steps), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		<-w.start
		for i := range steps {
			if err := fn(i); err != nil {
				w.err = fmt.Errorf("writer step %d: %w", i, err)
				return
			}
			w.progress <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		w.release()
		<-w.done
	})
	return w
}

// release lets the writer start (idempotent).
func (w *writer) release() { w.once.Do(func() { close(w.start) }) }

// step waits for the writer's next committed step, so pages and writes
// interleave for certain; once the writer is done it returns at once.
func (w *writer) step() {
	select {
	case <-w.progress:
	case <-w.done:
	}
}

// wait waits for the writer to finish and fails the test on its error.
func (w *writer) wait(t *testing.T) {
	t.Helper()
	w.release()
	<-w.done
	if w.err != nil {
		t.Fatal(w.err)
	}
}

// pageUnderChange pages through a memory listing with the writer released
// after the first page and stepping between pages. It returns every item
// name in listing order.
func pageUnderChange(t *testing.T, b store.Backend, storeID string, opts store.ListMemoriesOptions, w *writer) []string {
	t.Helper()
	var names []string
	for i := range maxPages {
		p, err := b.ListMemories(t.Context(), storeID, opts)
		ok(t, err, "ListMemories")
		names = append(names, itemNames(t, p.Data)...)
		if i == 0 {
			w.release()
		}
		if p.NextPage == "" {
			return names
		}
		w.step()
		opts.Page = p.NextPage
	}
	t.Fatalf("more than %d pages", maxPages)
	return nil
}

// checkOnce fails unless every name in want appears exactly once in got
// and nothing in got appears twice.
func checkOnce(t *testing.T, what string, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, n := range got {
		count[n]++
		if count[n] == 2 {
			t.Fatalf("%s: %q appears twice", what, n)
		}
	}
	for _, n := range want {
		if count[n] != 1 {
			t.Fatalf("%s: %q appears %d times, want once", what, n, count[n])
		}
	}
}

// checkAscending fails unless names are in strictly increasing byte order.
func checkAscending(t *testing.T, what string, names []string) {
	t.Helper()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("%s: %q listed before %q", what, names[i-1], names[i])
		}
	}
}

func testPageMemoriesUnderChange(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	var originals []string
	for i := range 60 {
		p := fmt.Sprintf("/p/%03d0", i)
		originals = append(originals, p)
		create(t, b, s.ID, p, "original")
	}
	// The writer inserts between the originals, before and after the
	// reader's position, and deletes some of its own inserts again.
	w := startWriter(t, 60, func(i int) error {
		m, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: fmt.Sprintf("/p/%03d5", 59-i), Content: "new", Actor: apiActor})
		if err != nil || i%3 != 0 {
			return err
		}
		return b.DeleteMemory(ctxBG(), s.ID, m.ID, store.DeleteMemoryInput{Actor: apiActor})
	})
	got := pageUnderChange(t, b, s.ID, store.ListMemoriesOptions{Limit: 7}, w)
	w.wait(t)
	checkOnce(t, "paging with limit 7 under inserts", got, originals)
	checkAscending(t, "paging under inserts", got)
}

func testPageDepthUnderChange(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	var want []string
	for i := range 30 {
		create(t, b, s.ID, fmt.Sprintf("/d/%03d0/f", i), "")
		create(t, b, s.ID, fmt.Sprintf("/d/%03d1", i), "")
		want = append(want, fmt.Sprintf("/d/%03d0/", i), fmt.Sprintf("/d/%03d1", i))
	}
	// The writer fills existing directories, makes new ones and new files.
	w := startWriter(t, 60, func(i int) error {
		var p string
		switch i % 3 {
		case 0:
			p = fmt.Sprintf("/d/%03d0/g", 29-i/3)
		case 1:
			p = fmt.Sprintf("/d/%03d5/h", 29-i/3)
		default:
			p = fmt.Sprintf("/d/%03d6", 29-i/3)
		}
		_, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: p, Content: "", Actor: apiActor})
		return err
	})
	got := pageUnderChange(t, b, s.ID, store.ListMemoriesOptions{PathPrefix: "/d/", Depth: 1, Limit: 7}, w)
	w.wait(t)
	checkOnce(t, "depth 1 paging with limit 7 under inserts", got, want)
	checkAscending(t, "depth 1 paging under inserts", got)
}

func testPageStoresUnderChange(t *testing.T, open Opener) {
	b := open(t, 0)
	var originals []string
	for i := range 20 {
		originals = append(originals, newStore(t, b, fmt.Sprintf("s%d", i)).ID)
	}
	w := startWriter(t, 20, func(i int) error {
		_, err := b.CreateStore(ctxBG(), store.CreateStoreInput{Name: fmt.Sprintf("new%d", i)})
		return err
	})
	var got []string
	opts := store.ListStoresOptions{Limit: 7}
	for i := range maxPages {
		p, err := b.ListStores(t.Context(), opts)
		ok(t, err, "ListStores")
		got = append(got, storeIDs(p.Data)...)
		if i == 0 {
			w.release()
		}
		if p.NextPage == "" {
			break
		}
		w.step()
		opts.Page = p.NextPage
	}
	w.wait(t)
	checkOnce(t, "store paging under inserts", got, originals)
	// The originals keep their newest-first order.
	var seen []string
	for _, id := range got {
		for _, o := range originals {
			if id == o {
				seen = append(seen, id)
			}
		}
	}
	equalStrings(t, "originals newest first", seen, reversed(originals))
}

func testPageVersionsUnderChange(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	var mems []*store.Memory
	for i := range 30 {
		m := create(t, b, s.ID, fmt.Sprintf("/v%02d", i), "v1")
		mems = append(mems, m)
		update(t, b, s.ID, m.ID, store.UpdateMemoryInput{Content: ptr("v2")})
	}
	before := versionIDs(allVersions(t, b, s.ID, store.ListVersionsOptions{Limit: 100}))
	if len(before) != 60 {
		t.Fatalf("%d versions before paging, want 60", len(before))
	}
	w := startWriter(t, 60, func(i int) error {
		m := mems[i%30]
		_, err := b.UpdateMemory(ctxBG(), s.ID, m.ID, store.UpdateMemoryInput{Content: ptr(fmt.Sprintf("v%d", 3+i)), Actor: apiActor})
		return err
	})
	var got []string
	opts := store.ListVersionsOptions{Limit: 7}
	for i := range maxPages {
		p, err := b.ListVersions(t.Context(), s.ID, opts)
		ok(t, err, "ListVersions")
		got = append(got, versionIDs(p.Data)...)
		if i == 0 {
			w.release()
		}
		if p.NextPage == "" {
			break
		}
		w.step()
		opts.Page = p.NextPage
	}
	w.wait(t)
	checkOnce(t, "version paging under inserts", got, before)
	var seen []string
	for _, id := range got {
		for _, o := range before {
			if id == o {
				seen = append(seen, id)
			}
		}
	}
	equalStrings(t, "pre-existing versions newest first", seen, before)
}

// race runs fn(i) for i in [0, n) in n goroutines released together and
// returns their errors.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

func testConcurrentPrecondition(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	h0 := head(t, b, s.ID)
	m := create(t, b, s.ID, "/c", "start")
	results := make([]*store.Memory, 8)
	errs := race(8, func(i int) error {
		u, err := b.UpdateMemory(ctxBG(), s.ID, m.ID, store.UpdateMemoryInput{
			Content: ptr(fmt.Sprintf("writer %d", i)), ExpectedSHA256: ptr(m.ContentSHA256), Actor: apiActor})
		results[i] = u
		return err
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both passed the same precondition", winner, i)
			}
			winner = i
		case errors.Is(err, store.ErrPreconditionFailed):
		default:
			t.Fatalf("writer %d: %v, want success or ErrPreconditionFailed", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer succeeded")
	}
	g := get(t, b, s.ID, m.ID)
	if contentOf(t, g) != fmt.Sprintf("writer %d", winner) || g.MemoryVersionID != results[winner].MemoryVersionID {
		t.Fatalf("memory = %q version %s, want the winner's (writer %d, %s)", *g.Content, g.MemoryVersionID, winner, results[winner].MemoryVersionID)
	}
	if n := versionCount(t, b, s.ID, m.ID); n != 2 {
		t.Fatalf("%d versions, want 2 (created + the one winner)", n)
	}
	if h := head(t, b, s.ID); h != h0+2 {
		t.Fatalf("feed head %d, want %d (two writes)", h, h0+2)
	}
}

func testConcurrentSamePath(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	h0 := head(t, b, s.ID)
	results := make([]*store.Memory, 8)
	errs := race(8, func(i int) error {
		m, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: "/same", Content: fmt.Sprintf("creator %d", i), Actor: apiActor})
		results[i] = m
		return err
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("creators %d and %d both created /same", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no creator succeeded: %v", errs)
	}
	for i, err := range errs {
		if i != winner {
			wantConflict(t, err, fmt.Sprintf("creator %d", i), results[winner].ID, "/same")
		}
	}
	items := listAll(t, b, s.ID, store.ListMemoriesOptions{Full: true})
	if len(items) != 1 || items[0].Memory.ID != results[winner].ID || contentOf(t, items[0].Memory) != fmt.Sprintf("creator %d", winner) {
		t.Fatalf("after racing creates: %+v, want only the winner's memory", items)
	}
	if vs := allVersions(t, b, s.ID, store.ListVersionsOptions{}); len(vs) != 1 || vs[0].Operation != store.OpCreated {
		t.Fatalf("%d versions, want 1 created", len(vs))
	}
	if h := head(t, b, s.ID); h != h0+1 {
		t.Fatalf("feed head %d, want %d (one write)", h, h0+1)
	}
}

func testConcurrentCap(t *testing.T, open Opener) {
	b := open(t, 5)
	s := newStore(t, b, "s")
	errs := race(8, func(i int) error {
		_, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: fmt.Sprintf("/m%d", i), Content: "", Actor: apiActor})
		return err
	})
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, store.ErrLimit):
		default:
			t.Fatalf("creator %d: %v, want success or ErrLimit", i, err)
		}
	}
	if created != 5 {
		t.Fatalf("%d creates succeeded at a cap of 5", created)
	}
	if n := len(listAll(t, b, s.ID, store.ListMemoriesOptions{})); n != 5 {
		t.Fatalf("%d memories listed, want 5", n)
	}
}

// testConcurrentFeedOrder has 8 goroutines each create a memory and
// update it 3 times; the feed must hold every mutation once, with seq
// increasing by exactly 1, and each memory's own mutations in order.
func testConcurrentFeedOrder(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	cursor := head(t, b, s.ID)
	const writers, updates = 8, 3
	versions := make([][]string, writers) // per writer, its version ids in order
	errs := race(writers, func(i int) error {
		m, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: fmt.Sprintf("/w%d", i), Content: "0", Actor: apiActor})
		if err != nil {
			return err
		}
		versions[i] = append(versions[i], m.MemoryVersionID)
		for u := 1; u <= updates; u++ {
			m, err = b.UpdateMemory(ctxBG(), s.ID, m.ID, store.UpdateMemoryInput{Content: ptr(fmt.Sprint(u)), ExpectedSHA256: ptr(m.ContentSHA256), Actor: apiActor})
			if err != nil {
				return err
			}
			versions[i] = append(versions[i], m.MemoryVersionID)
		}
		return nil
	})
	for i, err := range errs {
		ok(t, err, fmt.Sprintf("writer %d", i))
	}
	changes := changesAfter(t, b, s.ID, cursor)
	if len(changes) != writers*(updates+1) {
		t.Fatalf("%d changes, want %d", len(changes), writers*(updates+1))
	}
	perPath := map[string][]string{}
	for i, c := range changes {
		if c.Seq != cursor+int64(i)+1 {
			t.Fatalf("change %d has seq %d, want %d (strictly +1)", i, c.Seq, cursor+int64(i)+1)
		}
		perPath[c.Path] = append(perPath[c.Path], c.MemoryVersionID)
	}
	for i := range writers {
		equalStrings(t, fmt.Sprintf("feed order of /w%d", i), perPath[fmt.Sprintf("/w%d", i)], versions[i])
	}
	if h := head(t, b, s.ID); h != changes[len(changes)-1].Seq {
		t.Fatalf("head %d, want the last seq %d", h, changes[len(changes)-1].Seq)
	}
}
