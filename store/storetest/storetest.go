// Package storetest is the conformance suite for store.Backend
// implementations: every backend (SQLite, PostgreSQL, and any future one)
// runs the same tests, so they behave the same behind the HTTP API.
//
// Call Run from a _test.go file of the backend's package:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, maxMemories int) store.Backend {
//			db, err := mybackend.Open(...)
//			if err != nil { t.Fatal(err) }
//			t.Cleanup(func() { db.Close() })
//			return db
//		})
//	}
//
// The open function must return a fresh, empty backend each time it is
// called (tests count stores and prune the whole change feed) with its
// memory cap set to maxMemories (0 = the default), and must arrange
// (t.Cleanup) for it to be closed. Each subtest opens its own backend.
//
// The tests use only the store.Backend interface and the real clock. They
// never sleep to wait: waits poll a condition with a deadline.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

// Opener returns a fresh, empty backend whose memory cap is maxMemories
// (0 = the default), closed by a t.Cleanup it registers.
type Opener = func(t *testing.T, maxMemories int) store.Backend

// test is one conformance test.
type test struct {
	name string
	fn   func(t *testing.T, open Opener)
}

// group is a named set of tests, run as one level of subtests.
type group struct {
	name  string
	tests []test
}

// Run runs the conformance suite, one subtest per behaviour, each on a
// fresh backend from open.
func Run(t *testing.T, open Opener) {
	t.Helper()
	groups := []group{
		{"Stores", storeTests},
		{"Memories", memoryTests},
		{"Listing", listTests},
		{"Pagination", paginationTests},
		{"Concurrency", concurrencyTests},
		{"Versions", versionTests},
		{"Changes", changeTests},
		{"Keys", keyTests},
		{"Environments", environmentTests},
		{"Sessions", sessionTests},
		{"Agents", agentTests},
		{"Work", workTests},
		{"Events", eventTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
			}
		})
	}
}

// Actors used by the tests.
var (
	apiActor     = store.APIActor("apikey_storetest")
	otherAPI     = store.APIActor("apikey_other")
	sessionActor = store.SessionActor("sesn_storetest")
	otherSession = store.SessionActor("sesn_other")
)

// waitBound is how long a test waits for something that should happen
// promptly (a wake-up) before failing. It bounds a failure; passing tests
// never wait for it.
const waitBound = 10 * time.Second

func ptr[T any](v T) *T { return &v }

// wantErr fails the test unless err matches kind (errors.Is).
func wantErr(t *testing.T, err, kind error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %v", what, kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got error %v, want %v", what, err, kind)
	}
}

// ok fails the test on err.
func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func newStore(t *testing.T, b store.Backend, name string) *store.Store {
	t.Helper()
	s, err := b.CreateStore(t.Context(), store.CreateStoreInput{Name: name})
	ok(t, err, "CreateStore "+name)
	return s
}

func create(t *testing.T, b store.Backend, storeID, path, content string) *store.Memory {
	t.Helper()
	return createBy(t, b, storeID, path, content, apiActor)
}

func createBy(t *testing.T, b store.Backend, storeID, path, content string, by store.Actor) *store.Memory {
	t.Helper()
	m, err := b.CreateMemory(t.Context(), storeID, store.CreateMemoryInput{Path: path, Content: content, Actor: by})
	ok(t, err, "CreateMemory "+path)
	return m
}

func update(t *testing.T, b store.Backend, storeID, memoryID string, in store.UpdateMemoryInput) *store.Memory {
	t.Helper()
	if in.Actor.Type == "" {
		in.Actor = apiActor
	}
	m, err := b.UpdateMemory(t.Context(), storeID, memoryID, in)
	ok(t, err, "UpdateMemory "+memoryID)
	return m
}

func get(t *testing.T, b store.Backend, storeID, memoryID string) *store.Memory {
	t.Helper()
	m, err := b.GetMemory(t.Context(), storeID, memoryID)
	ok(t, err, "GetMemory "+memoryID)
	return m
}

// contentOf returns the content of a full-view memory, failing when it is nil.
func contentOf(t *testing.T, m *store.Memory) string {
	t.Helper()
	if m.Content == nil {
		t.Fatalf("memory %s (%s) has nil content, want it filled", m.ID, m.Path)
	}
	return *m.Content
}

// maxPages bounds every paging loop, so a token that never ends fails
// instead of hanging.
const maxPages = 1000

// listPages pages through a memory listing and returns each page's items.
func listPages(t *testing.T, b store.Backend, storeID string, opts store.ListMemoriesOptions) [][]store.MemoryListItem {
	t.Helper()
	var pages [][]store.MemoryListItem
	for range maxPages {
		p, err := b.ListMemories(t.Context(), storeID, opts)
		ok(t, err, fmt.Sprintf("ListMemories %+v", opts))
		limit := opts.Limit
		if limit > 0 && len(p.Data) > limit {
			t.Fatalf("ListMemories limit %d returned %d items", limit, len(p.Data))
		}
		pages = append(pages, p.Data)
		if p.NextPage == "" {
			return pages
		}
		if len(p.Data) == 0 {
			t.Fatalf("ListMemories %+v returned an empty page with a next_page", opts)
		}
		opts.Page = p.NextPage
	}
	t.Fatalf("ListMemories %+v: more than %d pages", opts, maxPages)
	return nil
}

// listAll returns every item of a memory listing, paging as needed.
func listAll(t *testing.T, b store.Backend, storeID string, opts store.ListMemoriesOptions) []store.MemoryListItem {
	t.Helper()
	var all []store.MemoryListItem
	for _, p := range listPages(t, b, storeID, opts) {
		all = append(all, p...)
	}
	return all
}

// itemNames renders listing items: a memory as its path, a memory_prefix
// as its prefix (which ends in "/", so the two can't be confused).
func itemNames(t *testing.T, items []store.MemoryListItem) []string {
	t.Helper()
	out := make([]string, 0, len(items))
	for _, it := range items {
		switch {
		case it.Memory != nil && it.Prefix == "":
			out = append(out, it.Memory.Path)
		case it.Memory == nil && strings.HasSuffix(it.Prefix, "/"):
			out = append(out, it.Prefix)
		default:
			t.Fatalf("malformed listing item %+v: want exactly one of Memory and Prefix (ending in /)", it)
		}
	}
	return out
}

// listNames lists every item (paging with the given limit) as itemNames.
func listNames(t *testing.T, b store.Backend, storeID string, opts store.ListMemoriesOptions) []string {
	t.Helper()
	return itemNames(t, listAll(t, b, storeID, opts))
}

// allVersions pages through a version listing.
func allVersions(t *testing.T, b store.Backend, storeID string, opts store.ListVersionsOptions) []store.Version {
	t.Helper()
	var all []store.Version
	for range maxPages {
		p, err := b.ListVersions(t.Context(), storeID, opts)
		ok(t, err, fmt.Sprintf("ListVersions %+v", opts))
		if opts.Limit > 0 && len(p.Data) > opts.Limit {
			t.Fatalf("ListVersions limit %d returned %d items", opts.Limit, len(p.Data))
		}
		all = append(all, p.Data...)
		if p.NextPage == "" {
			return all
		}
		opts.Page = p.NextPage
	}
	t.Fatalf("ListVersions %+v: more than %d pages", opts, maxPages)
	return nil
}

// reversed returns a reversed copy of in.
func reversed(in []string) []string {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

func versionIDs(vs []store.Version) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

// allStores pages through a store listing.
func allStores(t *testing.T, b store.Backend, opts store.ListStoresOptions) []store.Store {
	t.Helper()
	var all []store.Store
	for range maxPages {
		p, err := b.ListStores(t.Context(), opts)
		ok(t, err, fmt.Sprintf("ListStores %+v", opts))
		if opts.Limit > 0 && len(p.Data) > opts.Limit {
			t.Fatalf("ListStores limit %d returned %d items", opts.Limit, len(p.Data))
		}
		all = append(all, p.Data...)
		if p.NextPage == "" {
			return all
		}
		opts.Page = p.NextPage
	}
	t.Fatalf("ListStores %+v: more than %d pages", opts, maxPages)
	return nil
}

func storeIDs(ss []store.Store) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// head returns the store's change-feed head (Changes with after=0).
func head(t *testing.T, b store.Backend, storeID string) int64 {
	t.Helper()
	p, err := b.Changes(t.Context(), storeID, 0, 0)
	ok(t, err, "Changes(after=0)")
	if len(p.Data) != 0 {
		t.Fatalf("Changes(after=0) returned %d changes, want none", len(p.Data))
	}
	return p.NextCursor
}

// changesAfter reads the whole feed after a cursor, following has_more.
func changesAfter(t *testing.T, b store.Backend, storeID string, after int64) []store.Change {
	t.Helper()
	var all []store.Change
	for range maxPages {
		p, err := b.Changes(t.Context(), storeID, after, 100)
		ok(t, err, fmt.Sprintf("Changes(after=%d)", after))
		all = append(all, p.Data...)
		if len(p.Data) > 0 && p.NextCursor != p.Data[len(p.Data)-1].Seq {
			t.Fatalf("Changes(after=%d): next_cursor %d, want the last seq %d", after, p.NextCursor, p.Data[len(p.Data)-1].Seq)
		}
		if !p.HasMore {
			return all
		}
		after = p.NextCursor
	}
	t.Fatalf("Changes: more than %d pages", maxPages)
	return nil
}

// waitClockPast spins until the wall clock, at the microsecond resolution
// timestamps are stored with, is after ts, so that the next object gets a
// strictly later created_at. It polls with a deadline; it never sleeps a
// fixed time.
func waitClockPast(t *testing.T, ts time.Time) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !time.Now().Truncate(time.Microsecond).After(ts) {
		if time.Now().After(deadline) {
			t.Fatalf("clock did not pass %v", ts)
		}
		runtime.Gosched()
	}
}

// waitClosed fails the test unless ch is closed within waitBound.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitBound):
		t.Fatalf("%s: channel not closed within %v", what, waitBound)
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// equalStrings fails the test unless got equals want.
func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// checkUTC fails the test unless ts is set and in UTC.
func checkUTC(t *testing.T, what string, ts time.Time) {
	t.Helper()
	if ts.IsZero() {
		t.Fatalf("%s is zero", what)
	}
	if ts.Location() != time.UTC {
		t.Fatalf("%s = %v, want UTC", what, ts)
	}
	if d := time.Since(ts); d < -time.Minute || d > time.Hour {
		t.Fatalf("%s = %v, not near now", what, ts)
	}
}

// ctxBG is for goroutines that may outlive a failing test's context.
func ctxBG() context.Context { return context.Background() }
