package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// TestMountFollowsVersionsWithoutFeed: against a strict memfs serve with
// the feed off (--change-feed=false, whose route then answers 404), a
// mount follows the store through its memory versions: it says so once
// and in memfs status, an edit goes up, remote changes (a create, an
// update, a delete made with the admin client) come down, and at idle it
// sends at most one request per interval, over several intervals, with
// more memories than two pages of a listing hold.
func TestMountFollowsVersionsWithoutFeed(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	// More than two pages of a listing: listing every interval would
	// cost three requests per interval.
	for i := range 2*store.MaxListLimit + 10 {
		files[fmt.Sprintf("/m%03d.md", i)] = fmt.Sprintf("memory %d\n", i)
	}
	e := newMtEnvWith(t, files, harness.ServeOptions{Args: []string{"--change-feed=false"}})
	ctx := context.Background()
	if _, err := e.cl.Changes(ctx, e.storeID, 0, 1, 0); !errors.Is(err, store.ErrFeedUnsupported) || store.Status(err) != 404 {
		t.Fatalf("the change feed with --change-feed=false: %v, want a 404", err)
	}
	const interval = 5 * time.Second
	proxy := harness.NewRouteProxy(t, e.serve.URL)
	m := harness.StartMount(t, harness.MountOptions{URL: proxy.URL, APIKey: e.serve.AdminKey, Store: e.storeID, Dir: e.dir,
		StateDir: e.stateDir, Args: []string{"--memory-sync-interval", interval.String()}})
	m.WaitOutput(1, "following the store through its memory versions", 10*time.Second)
	if n := len(m.Lines("following the store")); n != 1 {
		t.Errorf("%d lines say how the mount follows the store, want 1:\n%s", n, m.Output())
	}
	if got := stStatus(t, "--state-dir", e.stateDir).mount(t, e.dir).Sync.Follows; got != syncqueue.FollowsVersions {
		t.Errorf("memfs status --json: follows %q, want %q", got, syncqueue.FollowsVersions)
	}
	if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, "follows     the versions created since the last one seen, every interval (no feed)") {
		t.Errorf("memfs status does not say the mount follows the versions:\n%s", text)
	}

	// An edit goes up.
	if err := os.WriteFile(filepath.Join(e.dir, "local.md"), []byte("local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtPoll(t, "the local file in the store", func() (bool, string) {
		p, err := e.cl.ListMemories(ctx, e.storeID, store.ListMemoriesOptions{Limit: store.MaxListLimit})
		for _, it := range p.Data {
			if it.Memory != nil && it.Memory.Path == "/local.md" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d items, %v", len(p.Data), err)
	})

	// Remote changes come down: a create, an update, a delete.
	ids := map[string]string{}
	p, err := e.cl.ListMemories(ctx, e.storeID, store.ListMemoriesOptions{Limit: store.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Data {
		if it.Memory != nil {
			ids[it.Memory.Path] = it.Memory.ID
		}
	}
	if _, err := e.cl.CreateMemory(ctx, e.storeID, "/remote.md", "remote\n"); err != nil {
		t.Fatal(err)
	}
	content := "changed remotely\n"
	if _, err := e.cl.UpdateMemory(ctx, e.storeID, ids["/m001.md"], store.UpdateMemoryInput{Content: &content}); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.DeleteMemory(ctx, e.storeID, ids["/m002.md"], nil); err != nil {
		t.Fatal(err)
	}
	mtPoll(t, "the remote changes on the mount", func() (bool, string) {
		r, err1 := os.ReadFile(filepath.Join(e.dir, "remote.md"))
		u, err2 := os.ReadFile(filepath.Join(e.dir, "m001.md"))
		_, err3 := os.Stat(filepath.Join(e.dir, "m002.md"))
		ok := err1 == nil && string(r) == "remote\n" && err2 == nil && string(u) == content && os.IsNotExist(err3)
		return ok, fmt.Sprintf("remote.md %q %v, m001.md %q %v, m002.md %v", r, err1, u, err2, err3)
	})
	// Every file's content on the mount, so nothing is fetched at idle.
	for p := range files {
		if _, err := os.ReadFile(filepath.Join(e.dir, p)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}

	// Idle: over n intervals, at most n+1 requests (one per interval, and
	// one more for where the window falls), each a versions listing.
	const n = 4
	before := len(proxy.Requests())
	time.Sleep(n * interval) // the window measured, not a wait for a condition
	idle := proxy.Requests()[before:]
	if len(idle) > n+1 {
		t.Errorf("%d requests at idle over %d intervals, want at most %d: %+v", len(idle), n, n+1, idle)
	}
	for _, r := range idle {
		if !strings.HasSuffix(r.Path, "/memory_versions") {
			t.Errorf("at idle the mount sent %s %s, want only the versions listing", r.Method, r.Path)
		}
	}
	mtStop(t, m)
}
