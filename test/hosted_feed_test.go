package test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// Against the hosted API: the change feed is a memfs extension, and a
// server that refuses its route in any way (400, 403, 405, 501, as well as
// 404) is a server without it; a worker's mounts use the session token
// only on the routes the official worker uses it on.

// TestMountFeedRefusedFollowsByListing: a mount whose server refuses the
// change feed and the memory versions with 400, 403, 405 or 501 mounts anyway, says once that it
// follows the store by listing it, memfs status (text and JSON) says
// "listing", and a change made in the store shows on the mount.
func TestMountFeedRefusedFollowsByListing(t *testing.T) {
	for _, status := range []int{400, 403, 405, 501} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
			proxy := harness.NewRouteProxy(t, e.serve.URL)
			proxy.Refuse(http.MethodGet, `/changes$`, status, "invalid_request_error", "no route for GET …/changes")
			proxy.Refuse(http.MethodGet, `/memory_versions$`, status, "invalid_request_error", "no route for GET …/memory_versions")
			m := harness.StartMount(t, harness.MountOptions{URL: proxy.URL, APIKey: e.serve.AdminKey, Store: e.storeID, Dir: e.dir,
				StateDir: e.stateDir, Args: []string{"--memory-sync-interval", "5s"}})
			line := m.WaitOutput(1, "following the store by listing it every interval", 10*time.Second)
			if !strings.Contains(line, fmt.Sprint(status)) {
				t.Errorf("the info line does not give the feed's answer (%d): %s", status, line)
			}
			if n := len(m.Lines("following the store")); n != 1 {
				t.Errorf("%d lines say how the mount follows the store, want 1:\n%s", n, m.Output())
			}
			if got := stStatus(t, "--state-dir", e.stateDir).mount(t, e.dir).Sync.Follows; got != syncqueue.FollowsListing {
				t.Errorf("memfs status --json: follows %q, want %q", got, syncqueue.FollowsListing)
			}
			if text := stText(t, "--state-dir", e.stateDir); !strings.Contains(text, "follows     listing the store every interval") {
				t.Errorf("memfs status does not say the mount follows by listing:\n%s", text)
			}
			if _, err := e.cl.CreateMemory(context.Background(), e.storeID, "/remote.md", "remote\n"); err != nil {
				t.Fatal(err)
			}
			mtPoll(t, "the remote memory on the mount", func() (bool, string) {
				b, err := os.ReadFile(filepath.Join(e.dir, "remote.md"))
				return err == nil && string(b) == "remote\n", fmt.Sprintf("%q, %v", b, err)
			})
			mtStop(t, m)
		})
	}
}

// TestMountFollowsFeed: with memfs serve's feed, the info line and status
// say "feed".
func TestMountFollowsFeed(t *testing.T) {
	t.Parallel()
	e := newMtEnv(t, map[string]string{"/a.md": "a\n"})
	m := e.mount()
	m.WaitOutput(1, "following the store through its change feed", 10*time.Second)
	if got := stStatus(t, "--state-dir", e.stateDir).mount(t, e.dir).Sync.Follows; got != syncqueue.FollowsFeed {
		t.Errorf("memfs status --json: follows %q, want %q", got, syncqueue.FollowsFeed)
	}
	mtStop(t, m)
}

// TestWorkerMountsStayOnSessionRoutes: a worker running a session with two
// stores (one read-only), through a sync and its stop, sends with the
// session token only what the official worker sends with it (the memories
// routes, the session get, events, heartbeat and stop) and the change
// feed, the memfs extension it probes: never GET /v1/memory_stores/{id}.
// The store's name in memfs status comes from the session's resources.
func TestWorkerMountsStayOnSessionRoutes(t *testing.T) {
	t.Parallel()
	e := newWkEnvAt(t, nil)
	rw := e.newStore("rw", map[string]string{"/a.md": "a\n"})
	ro := e.newStore("ro", map[string]string{"/b.md": "b\n"})
	proxy := harness.NewRouteProxy(t, e.serve.URL)
	w := harness.StartWorker(t, harness.WorkerOptions{URL: proxy.URL, EnvironmentID: e.envID, EnvironmentKey: e.envKey,
		MemoryRoot: e.root, StateDir: e.stateDir, Args: []string{"--memory-sync-interval", "5s"}})
	sess := e.newSession(wkRW(rw), wkRO(ro))
	e.waitRunning(w, sess)
	mtMustSh(t, sess.Resources[0].MountPath, `echo new > new.md`)
	e.waitStore(rw, map[string]string{"/a.md": "a\n", "/new.md": "new\n"}, wkSyncTimeout)
	names := map[string]bool{}
	for _, m := range stStatus(t, "--state-dir", e.stateDir).Processes[0].Mounts {
		names[m.StoreName] = true
	}
	if !names["rw"] || !names["ro"] {
		t.Errorf("memfs status names the stores %v, want rw and ro", names)
	}
	w.Signal(syscall.SIGTERM)
	if code := w.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs worker exited %d:\n%s", code, w.Output())
	}
	allowed := []string{
		`^/v1/memory_stores/[^/]+/memories(/[^/]+)?$`,
		`^/v1/memory_stores/[^/]+/changes$`, // the memfs extension, probed
		`^/v1/sessions/[^/]+$`,
		`^/v1/sessions/[^/]+/events(/stream)?$`,
		`^/v1/environments/[^/]+/work/[^/]+/(heartbeat|stop)$`,
	}
	seen := 0
	for _, r := range proxy.Requests() {
		if r.Credential == e.envKey || r.Credential == e.serve.AdminKey {
			continue
		}
		seen++
		ok := false
		for _, a := range allowed {
			ok = ok || regexpMatch(a, r.Path)
		}
		if !ok {
			t.Errorf("the worker sent %s %s with the session token", r.Method, r.Path)
		}
	}
	if seen == 0 {
		t.Fatalf("the proxy saw no request with the session token")
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
