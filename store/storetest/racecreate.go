package storetest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// Creates racing in one store: the rules a backend's create path must keep
// however it shortens its transaction (sqlstore's one-round-trip create on
// PostgreSQL, doc.go there).

// testConcurrentFileDir races creates of a file and of memories below it.
// No unique index can refuse both "/d" and "/d/a", so this guards the
// file/directory rule under concurrency: afterwards either "/d" alone
// exists or every memory below it does, never both, and each refused
// create is a path conflict.
func testConcurrentFileDir(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	h0 := head(t, b, s.ID)
	created := 0
	for round := range 8 {
		dir := fmt.Sprintf("/r%d/d", round)
		below := []string{dir + "/a", dir + "/b", dir + "/c/e", dir + "/f/g/h"}
		paths := append([]string{dir, dir}, below...)
		errs := race(len(paths), func(i int) error {
			_, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: paths[i], Content: paths[i], Actor: apiActor})
			return err
		})
		var won []string
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, paths[i])
			case errors.Is(err, store.ErrPathConflict):
			default:
				t.Fatalf("round %d: create %s: %v, want success or ErrPathConflict", round, paths[i], err)
			}
		}
		sort.Strings(won)
		if !(len(won) == 1 && won[0] == dir) && strings.Join(won, " ") != strings.Join(below, " ") {
			t.Fatalf("round %d: created %q, want only %s or all of %q", round, won, dir, below)
		}
		var listed []string
		for _, it := range listAll(t, b, s.ID, store.ListMemoriesOptions{PathPrefix: fmt.Sprintf("/r%d/", round)}) {
			listed = append(listed, it.Memory.Path)
		}
		equalStrings(t, fmt.Sprintf("round %d: listing", round), listed, won)
		created += len(won)
	}
	if h := head(t, b, s.ID); h != h0+int64(created) {
		t.Fatalf("feed head %d, want %d (one change per create)", h, h0+int64(created))
	}
	if vs := allVersions(t, b, s.ID, store.ListVersionsOptions{}); len(vs) != created {
		t.Fatalf("%d versions, want %d (one per create)", len(vs), created)
	}
}

// testFeedReaderNoGaps follows the feed while creates race into the store.
// Every page must continue exactly where the last one ended: a reader
// that saw seq N+1 before N was visible would move its cursor past N and
// never see it.
func testFeedReaderNoGaps(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	// A cursor of 0 asks for the head, so start the reader after a first
	// change.
	create(t, b, s.ID, "/start", "")
	cursor := head(t, b, s.ID)
	const writers, each = 8, 25
	done := make(chan []error, 1)
	go func() {
		done <- race(writers, func(i int) error {
			for j := range each {
				if _, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: fmt.Sprintf("/w%d/m%d", i, j), Content: "x", Actor: apiActor}); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	var errs []error
	for len(seen) < writers*each {
		if time.Now().After(deadline) {
			t.Fatalf("saw %d of %d creates in the feed before the deadline", len(seen), writers*each)
		}
		if errs == nil {
			select {
			case errs = <-done:
				for i, err := range errs {
					ok(t, err, fmt.Sprintf("writer %d", i))
				}
			default:
			}
		}
		p, err := b.Changes(ctxBG(), s.ID, cursor, 7)
		ok(t, err, fmt.Sprintf("Changes(after=%d)", cursor))
		for k, c := range p.Data {
			if c.Seq != cursor+int64(k)+1 {
				t.Fatalf("after cursor %d the feed gave seq %d at position %d: a gap a reader would skip", cursor, c.Seq, k)
			}
			if seen[c.Path] {
				t.Fatalf("%s appears twice in the feed", c.Path)
			}
			seen[c.Path] = true
		}
		cursor = p.NextCursor
	}
	if errs == nil {
		for i, err := range <-done {
			ok(t, err, fmt.Sprintf("writer %d", i))
		}
	}
}

// testConcurrentInvalidPath races valid creates with one whose path the
// API refuses: it alone fails, with ErrInvalid, whatever it raced with.
func testConcurrentInvalidPath(t *testing.T, open Opener) {
	b := open(t, 0)
	s := newStore(t, b, "s")
	paths := []string{"/ok0", "/ok1", "/bad\x00path", "/ok2", "/ok3", "/ok4"}
	errs := race(len(paths), func(i int) error {
		_, err := b.CreateMemory(ctxBG(), s.ID, store.CreateMemoryInput{Path: paths[i], Content: "x", Actor: apiActor})
		return err
	})
	var listed []string
	for i, err := range errs {
		if paths[i] == "/bad\x00path" {
			wantErr(t, err, store.ErrInvalid, "create with a NUL in its path")
			continue
		}
		ok(t, err, "create "+paths[i])
		listed = append(listed, paths[i])
	}
	var got []string
	for _, it := range listAll(t, b, s.ID, store.ListMemoriesOptions{}) {
		got = append(got, it.Memory.Path)
	}
	equalStrings(t, "listing", got, listed)
}
