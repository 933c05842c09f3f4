package syncqueue

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/sqlstore"
)

// One test per row of the rule table of docs/sync.md, against a real server
// (see merge_env_test.go). Remote changes arrive through the change feed
// (the flusher's interval is an hour: nothing else could bring them within
// the deadlines); local uploads are driven with SyncNow.

var mgFiles = map[string]string{"/a.md": "base a\n", "/b.md": "base b\n", "/dir/c.md": "base c\n"}

// mgWith returns mgFiles with changes (an empty content deletes).
func mgWith(changes map[string]string) map[string]string {
	out := map[string]string{}
	for p, c := range mgFiles {
		out[p] = c
	}
	for p, c := range changes {
		if c == "" {
			delete(out, p)
		} else {
			out[p] = c
		}
	}
	return out
}

// Store changed, local unchanged: take the store's content.
func TestMergeStoreChangedLocalUnchanged(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	ino, _ := e.lookup("/dir/c.md")
	e.remotePut("/dir/c.md", "remote c, longer than before\n")
	d := e.waitLocal("/dir/c.md", "remote c, longer than before\n", true)
	t.Logf("remote change applied after %s", d)
	if a, _ := e.lookup("/dir/c.md"); a.Ino != ino.Ino || a.Size != int64(len("remote c, longer than before\n")) {
		t.Errorf("attr after the remote change = %+v, want inode %d and the new size", a, ino.Ino)
	}
	e.noPending()
	if res := e.sync(true, true); res.Uploaded+res.Deleted+res.Failed != 0 {
		t.Errorf("a pass after a remote change sent something: %+v", res)
	}
	e.noConflicts()
	e.noErrorsLogged()
	if ops := e.ops(e.ids["/dir/c.md"]); !slices.Equal(ops, []string{"created", "modified"}) {
		t.Errorf("versions = %v, want [created modified]", ops)
	}
}

// Store unchanged, local changed: upload with the base sha as precondition.
func TestMergeLocalChangedStoreUnchanged(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.mustWrite("/a.md", "local a\n")
	e.mustWrite("/new/n.md", "new here\n")
	if res := e.sync(true, false); res.Uploaded != 2 || res.Failed != 0 || res.Left != 0 {
		t.Fatalf("pass = %+v, want 2 uploaded", res)
	}
	e.wantStore(mgWith(map[string]string{"/a.md": "local a\n", "/new/n.md": "new here\n"}))
	if m := e.memory("/a.md"); m.ID != e.ids["/a.md"] {
		t.Errorf("/a.md has a new id %s, want %s kept", m.ID, e.ids["/a.md"])
	}
	ups := e.proxy.requests("update")
	if len(ups) != 1 {
		t.Fatalf("%d update requests, want 1", len(ups))
	}
	var body struct {
		Content      string
		Precondition struct {
			Type          string
			ContentSHA256 string `json:"content_sha256"`
		}
	}
	if err := json.Unmarshal(ups[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Content != "local a\n" || body.Precondition.Type != "content_sha256" || body.Precondition.ContentSHA256 != store.SHA256Hex("base a\n") {
		t.Errorf("update body %s: want the content and a content_sha256 precondition on the base's sha", ups[0].body)
	}
	// Our own uploads come back through the feed: not remote edits.
	e.caughtUp()
	e.wantLocal("/a.md", "local a\n")
	e.noPending()
	e.noConflicts()
	e.noErrorsLogged()
	if res := e.sync(true, true); res.Uploaded+res.Failed != 0 {
		t.Errorf("a second pass sent something: %+v", res)
	}
}

// Changed on both sides, the overlay seeing the store's change first: the
// store wins, the local version goes to the conflict log, one warning.
func TestMergeBothChanged(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.mustWrite("/a.md", "mine\n")
	e.remotePut("/a.md", "theirs\n")
	e.waitLocal("/a.md", "theirs\n", true)
	e.caughtUp()
	e.checkConflict("/a.md", "mine\n", "theirs\n")
	e.noPending()
	if res := e.sync(true, true); res.Uploaded+res.Failed != 0 {
		t.Errorf("the losing version was uploaded after all: %+v", res)
	}
	e.wantStore(mgWith(map[string]string{"/a.md": "theirs\n"}))
	if ops := e.ops(e.ids["/a.md"]); !slices.Equal(ops, []string{"created", "modified"}) {
		t.Errorf("versions = %v, want [created modified]", ops)
	}
	// The file goes on syncing normally afterwards.
	e.mustWrite("/a.md", "after\n")
	if res := e.sync(false, false); res.Uploaded != 1 {
		t.Errorf("pass after the conflict = %+v, want 1 uploaded", res)
	}
	e.wantStore(mgWith(map[string]string{"/a.md": "after\n"}))
	e.noErrorsLogged()
}

// Upload refused 409 (the flusher sees the collision first: the feed is
// held): same outcome as changed/changed.
func TestMergeUploadRefused409(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.proxy.holdFeed()
	e.mustWrite("/a.md", "mine\n")
	e.remotePut("/a.md", "theirs\n")
	res := e.sync(true, false)
	if res.Uploaded != 0 || res.Left != 0 {
		t.Errorf("pass = %+v, want nothing uploaded, nothing left", res)
	}
	e.wantLocal("/a.md", "theirs\n")
	e.checkConflict("/a.md", "mine\n", "theirs\n")
	e.noPending()
	// The feed then brings the same change: nothing more happens.
	e.proxy.releaseFeed()
	e.caughtUp()
	e.wantLocal("/a.md", "theirs\n")
	e.checkConflict("/a.md", "mine\n", "theirs\n")
	if ups := e.proxy.requests("update"); len(ups) != 1 {
		t.Errorf("%d update requests, want 1 (refused, not retried)", len(ups))
	}
	e.wantStore(mgWith(map[string]string{"/a.md": "theirs\n"}))
	e.noErrorsLogged()
}

// Deleted in the store, unchanged here: the local file goes (and the
// directory that only held it).
func TestMergeStoreDeletedLocalUnchanged(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.remoteDelete("/dir/c.md")
	e.waitLocal("/dir/c.md", "", false)
	if _, err := e.lookup("/dir"); err == nil {
		t.Error("/dir is still there: it only held the deleted file")
	}
	e.noPending()
	if res := e.sync(true, true); res.Uploaded+res.Deleted+res.Failed != 0 {
		t.Errorf("pass after a remote delete sent something: %+v", res)
	}
	e.wantStore(mgWith(map[string]string{"/dir/c.md": ""}))
	e.noConflicts()
	e.noErrorsLogged()
}

// Deleted in the store, changed here: the local file is the only copy, so
// a new memory is created from it.
func TestMergeStoreDeletedLocalChanged(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.mustWrite("/b.md", "mine, still wanted\n")
	e.remoteDelete("/b.md")
	e.caughtUp()
	e.wantLocal("/b.md", "mine, still wanted\n")
	if ws := e.warnings("deleted in the store but changed here"); len(ws) != 1 {
		t.Errorf("%d warnings about the re-creation, want 1", len(ws))
	}
	if res := e.sync(true, true); res.Uploaded != 1 || res.Failed != 0 || res.Left != 0 {
		t.Errorf("pass = %+v, want 1 uploaded", res)
	}
	e.wantStore(mgWith(map[string]string{"/b.md": "mine, still wanted\n"}))
	m := e.memory("/b.md")
	if m.ID == e.ids["/b.md"] {
		t.Errorf("/b.md kept the deleted memory's id %s: want a new memory", m.ID)
	}
	if ops := e.ops(m.ID); !slices.Equal(ops, []string{"created"}) {
		t.Errorf("versions of the new memory = %v, want [created]", ops)
	}
	e.caughtUp()
	e.wantLocal("/b.md", "mine, still wanted\n")
	e.noPending()
	e.noConflicts()
	// It is an ordinary file of the new memory now.
	e.mustWrite("/b.md", "again\n")
	if res := e.sync(false, false); res.Uploaded != 1 || res.Failed != 0 {
		t.Errorf("pass = %+v, want 1 uploaded", res)
	}
	if got := e.memory("/b.md"); got.ID != m.ID || got.ContentSHA256 != store.SHA256Hex("again\n") {
		t.Errorf("/b.md = %+v, want the new memory %s updated", got, m.ID)
	}
	e.noErrorsLogged()
}

// Changed in the store, deleted here: the store's version comes back.
func TestMergeStoreChangedLocalDeleted(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.unlink("/dir/c.md")
	e.remotePut("/dir/c.md", "theirs c\n")
	e.waitLocal("/dir/c.md", "theirs c\n", true)
	e.caughtUp()
	if ws := e.warnings("restored"); len(ws) != 1 {
		t.Errorf("%d warnings about the restore, want 1", len(ws))
	}
	e.noPending()
	if res := e.sync(true, true); res.Deleted+res.Uploaded+res.Failed != 0 {
		t.Errorf("pass = %+v, want nothing sent", res)
	}
	if dels := e.proxy.requests("delete"); len(dels) != 0 {
		t.Errorf("delete requests %v, want none", dels)
	}
	e.wantStore(mgWith(map[string]string{"/dir/c.md": "theirs c\n"}))
	e.noConflicts()
	e.noErrorsLogged()
}

// Unchanged in the store, deleted here: deleted in the store as the
// deletion mode says, with the base sha as precondition.
func TestMergeLocalDeletedStoreUnchanged(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{DeletionsEnabled, DeletionsLogOnly, DeletionsDisabled} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := mgSetup(t, mgFiles)
			e.start(func(o *EngineOptions) { o.Deletions = mode })
			e.unlink("/b.md")
			// Not at once: a delete waits 30 s and a later pass.
			if res := e.sync(true, false); res.Deleted != 0 || res.DeletesPending != 1 {
				t.Errorf("first pass = %+v, want the delete held", res)
			}
			e.wantStore(mgFiles)
			res := e.sync(true, true)
			e.wantNoLocal("/b.md")
			e.noPending()
			dels := e.proxy.requests("delete")
			switch mode {
			case DeletionsEnabled:
				if res.Deleted != 1 || len(dels) != 1 {
					t.Fatalf("pass = %+v, %d delete requests; want 1 deleted", res, len(dels))
				}
				e.wantStore(mgWith(map[string]string{"/b.md": ""}))
				u, _ := url.Parse(dels[0].url)
				if got := u.Query().Get("expected_content_sha256"); got != store.SHA256Hex("base b\n") {
					t.Errorf("delete %s: want expected_content_sha256 = the base sha", dels[0].url)
				}
			case DeletionsLogOnly:
				if len(dels) != 0 {
					t.Errorf("log_only sent %d deletes", len(dels))
				}
				if ws := e.warnings("would delete memory /b.md"); len(ws) != 1 {
					t.Errorf("%d 'would delete' lines, want 1", len(ws))
				}
				e.wantStore(mgFiles)
			case DeletionsDisabled:
				if len(dels) != 0 {
					t.Errorf("disabled sent %d deletes", len(dels))
				}
				e.wantStore(mgFiles)
			}
			// Nothing comes back down, nothing more goes up.
			if res := e.sync(true, true); res.Deleted+res.Uploaded+res.Failed+res.Left != 0 {
				t.Errorf("a later pass = %+v, want nothing", res)
			}
			e.caughtUp()
			e.wantNoLocal("/b.md")
			e.noConflicts()
			e.noErrorsLogged()
		})
	}
}

// Changed to the same bytes on both sides: adopted, no conflict, no extra
// version — whichever side sees it first.
func TestMergeSameBytes(t *testing.T) {
	t.Parallel()
	t.Run("overlay first", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		e.mustWrite("/a.md", "same\n")
		e.remotePut("/a.md", "same\n")
		e.caughtUp()
		e.noPending()
		if res := e.sync(true, true); res.Uploaded+res.Failed != 0 {
			t.Errorf("pass = %+v, want nothing sent", res)
		}
		if ups := e.proxy.requests("update"); len(ups) != 0 {
			t.Errorf("%d updates sent, want none", len(ups))
		}
		if gets := e.proxy.requests("get"); len(gets) != 0 {
			t.Errorf("%d memories fetched, want none (the feed's sha says it all)", len(gets))
		}
		e.wantLocal("/a.md", "same\n")
		if ops := e.ops(e.ids["/a.md"]); !slices.Equal(ops, []string{"created", "modified"}) {
			t.Errorf("versions = %v, want [created modified]", ops)
		}
		e.noConflicts()
		e.noErrorsLogged()
	})
	t.Run("flusher first", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		e.proxy.holdFeed()
		e.mustWrite("/a.md", "same\n")
		e.remotePut("/a.md", "same\n")
		if res := e.sync(true, false); res.Failed != 0 || res.Left != 0 {
			t.Errorf("pass = %+v, want nothing failed or left", res)
		}
		e.proxy.releaseFeed()
		e.caughtUp()
		e.noPending()
		e.wantLocal("/a.md", "same\n")
		if ops := e.ops(e.ids["/a.md"]); !slices.Equal(ops, []string{"created", "modified"}) {
			t.Errorf("versions = %v, want [created modified]", ops)
		}
		e.noConflicts()
		e.noErrorsLogged()
	})
}

// Deleted on both sides: nothing to do.
func TestMergeBothDeleted(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.unlink("/a.md")
	e.remoteDelete("/a.md")
	e.caughtUp()
	e.noPending()
	if res := e.sync(true, true); res.Deleted+res.Uploaded+res.Failed+res.Left != 0 {
		t.Errorf("pass = %+v, want nothing", res)
	}
	if dels := e.proxy.requests("delete"); len(dels) != 0 {
		t.Errorf("delete requests %v, want none", dels)
	}
	e.wantNoLocal("/a.md")
	e.wantStore(mgWith(map[string]string{"/a.md": ""}))
	e.noConflicts()
	if ws := e.warnings(""); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}

// Deleted in the store, changed here to content the store can't take:
// the local file stays, and is not sent again until it changes.
func TestMergeStoreDeletedLocalRefused(t *testing.T) {
	t.Parallel()
	t.Run("invalid UTF-8", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		bad := "not \xff utf-8\n"
		if err := e.write("/a.md", bad); err != fs.ErrNotUTF8 {
			t.Fatalf("close of invalid UTF-8 = %v, want ErrNotUTF8", err)
		}
		e.remoteDelete("/a.md")
		e.caughtUp()
		e.wantLocal("/a.md", bad)
		for range 2 {
			if res := e.sync(true, true); res.Uploaded+res.Deleted != 0 {
				t.Errorf("pass = %+v, want nothing sent", res)
			}
		}
		if n := len(e.proxy.requests("create")) + len(e.proxy.requests("update")); n != 0 {
			t.Errorf("%d uploads of invalid UTF-8, want none", n)
		}
		e.wantLocal("/a.md", bad)
		e.wantStore(mgWith(map[string]string{"/a.md": ""}))
		// Once valid, it goes up as a new memory.
		e.mustWrite("/a.md", "valid now\n")
		if res := e.sync(true, true); res.Uploaded != 1 || res.Left != 0 {
			t.Errorf("pass = %+v, want 1 uploaded", res)
		}
		e.wantStore(mgWith(map[string]string{"/a.md": "valid now\n"}))
		e.noConflicts()
		e.noErrorsLogged()
	})
	t.Run("refused by the server", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		// The tree refuses content over the store's limit itself, so the
		// server's 413 is injected.
		var refuse atomic.Bool
		refuse.Store(true)
		e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
			if kind == "create" && refuse.Load() {
				mgWriteError(w, http.StatusRequestEntityTooLarge, "request_too_large", "content too large")
				return true
			}
			return false
		})
		e.mustWrite("/a.md", "too big for this server\n")
		e.remoteDelete("/a.md")
		e.caughtUp()
		for i := range 3 {
			if res := e.sync(true, true); res.Uploaded != 0 {
				t.Errorf("pass %d = %+v, want nothing uploaded", i, res)
			}
		}
		if n := len(e.proxy.requests("create")); n != 1 {
			t.Errorf("%d creates sent, want 1: a refused file is not retried until it changes", n)
		}
		if ws := e.warnings("refused this file"); len(ws) != 1 {
			t.Errorf("%d 'refused' warnings, want 1", len(ws))
		}
		e.wantLocal("/a.md", "too big for this server\n")
		refuse.Store(false)
		e.mustWrite("/a.md", "smaller\n")
		if res := e.sync(true, true); res.Uploaded != 1 || res.Left != 0 {
			t.Errorf("pass after the change = %+v, want 1 uploaded", res)
		}
		e.wantStore(mgWith(map[string]string{"/a.md": "smaller\n"}))
		e.noConflicts()
	})
}

// A remote rename moves the local file: same inode, same content, nothing
// journaled.
func TestMergeRemoteRename(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	before, err := e.lookup("/dir/c.md")
	if err != nil {
		t.Fatal(err)
	}
	to := "/moved/deeper/c2.md"
	if _, err := e.remote.UpdateMemory(e.ctx(), e.storeID, e.ids["/dir/c.md"], store.UpdateMemoryInput{Path: &to}); err != nil {
		t.Fatal(err)
	}
	e.waitLocal(to, "base c\n", true)
	e.wantNoLocal("/dir/c.md")
	after, _ := e.lookup(to)
	if after.Ino != before.Ino {
		t.Errorf("inode %d after the rename, want %d", after.Ino, before.Ino)
	}
	e.caughtUp()
	e.noPending()
	if res := e.sync(true, true); res.Uploaded+res.Deleted+res.Failed != 0 {
		t.Errorf("pass after a remote rename = %+v, want nothing", res)
	}
	if m := e.memory(to); m == nil || m.ID != e.ids["/dir/c.md"] {
		t.Errorf("memory at %s = %+v, want %s", to, m, e.ids["/dir/c.md"])
	}
	// A local change after the move updates the moved memory.
	e.mustWrite(to, "changed after the move\n")
	if res := e.sync(false, false); res.Uploaded != 1 {
		t.Errorf("pass = %+v, want 1 uploaded", res)
	}
	if m := e.memory(to); m.ID != e.ids["/dir/c.md"] || m.ContentSHA256 != store.SHA256Hex("changed after the move\n") {
		t.Errorf("memory at %s = %+v", to, m)
	}
	e.noConflicts()
	e.noErrorsLogged()
}

// A memory created in the store where a new local file (not yet uploaded)
// stands: the store wins, or the two are adopted if the bytes are the same.
func TestMergeRemoteCreateOverLocalNew(t *testing.T) {
	t.Parallel()
	t.Run("different bytes", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		e.mustWrite("/n/new.md", "mine\n")
		m := e.remotePut("/n/new.md", "theirs\n")
		e.waitLocal("/n/new.md", "theirs\n", true)
		e.caughtUp()
		e.checkConflict("/n/new.md", "mine\n", "theirs\n")
		if c := e.conflicts()[0]; c.StoreMemoryID != m.ID {
			t.Errorf("conflict names memory %s, want %s", c.StoreMemoryID, m.ID)
		}
		e.noPending()
		if res := e.sync(true, true); res.Uploaded+res.Failed != 0 {
			t.Errorf("pass = %+v, want nothing sent", res)
		}
		e.wantStore(mgWith(map[string]string{"/n/new.md": "theirs\n"}))
		// The local file is that memory's copy now.
		e.mustWrite("/n/new.md", "mine again\n")
		if res := e.sync(false, false); res.Uploaded != 1 {
			t.Errorf("pass = %+v, want 1 uploaded", res)
		}
		if got := e.memory("/n/new.md"); got.ID != m.ID {
			t.Errorf("/n/new.md is memory %s, want %s updated", got.ID, m.ID)
		}
		e.noErrorsLogged()
	})
	t.Run("same bytes", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		e.mustWrite("/n/new.md", "same\n")
		m := e.remotePut("/n/new.md", "same\n")
		e.caughtUp()
		e.noPending()
		e.noConflicts()
		if res := e.sync(true, true); res.Uploaded+res.Failed != 0 {
			t.Errorf("pass = %+v, want nothing sent", res)
		}
		if ops := e.ops(m.ID); !slices.Equal(ops, []string{"created"}) {
			t.Errorf("versions = %v, want [created]", ops)
		}
		e.wantStore(mgWith(map[string]string{"/n/new.md": "same\n"}))
		e.noErrorsLogged()
	})
}

// mgLoseResponses makes the proxy pass the first request of kind to the
// server and then drop the connection without answering; with allAttempts,
// the retries that follow are dropped too (before reaching the server)
// until the returned func is called.
func mgLoseResponses(p *mgProxy, kind string, allAttempts bool) (stop func()) {
	var n atomic.Int32
	var stopped atomic.Bool
	p.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, k string, body []byte) bool {
		if k != kind || stopped.Load() {
			return false
		}
		switch n.Add(1) {
		case 1:
			p.forward(r, body) // applied, answer lost
			mgDrop(w)
			return true
		default:
			if allAttempts {
				mgDrop(w)
				return true
			}
			return false
		}
	})
	return func() { stopped.Store(true) }
}

// A write whose response is lost: applied once, not a conflict, and the
// overlay doesn't take it for a remote edit.
func TestMergeLostResponse(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"update", "create"} {
		for _, all := range []bool{false, true} {
			name := kind + "/retry answered"
			if all {
				name = kind + "/every retry lost"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newMgEnv(t, mgFiles)
				p := "/a.md"
				if kind == "create" {
					p = "/new.md"
				}
				stop := mgLoseResponses(e.proxy, kind, all)
				e.mustWrite(p, "mine\n")
				res := e.sync(true, false)
				if !all && (res.Uploaded != 1 || res.Failed != 0 || res.Left != 0) {
					t.Errorf("pass = %+v, want 1 uploaded", res)
				}
				if all && res.Failed != 1 {
					t.Errorf("pass = %+v, want 1 failed", res)
				}
				if n := len(e.proxy.requests(kind)); n < 2 {
					t.Errorf("%d %s requests, want the lost one and a retry", n, kind)
				}
				// The overlay sees the write in the feed (maybe before the
				// flusher could confirm it).
				e.caughtUp()
				stop()
				e.wantLocal(p, "mine\n")
				if res := e.sync(true, false); res.Failed != 0 || res.Left != 0 {
					t.Errorf("next pass = %+v, want nothing failed or left", res)
				}
				e.caughtUp()
				e.noPending()
				e.wantLocal(p, "mine\n")
				e.wantStore(mgWith(map[string]string{p: "mine\n"})) // no duplicate
				m := e.memory(p)
				want := []string{"created", "modified"}
				if kind == "create" {
					want = []string{"created"}
				}
				if ops := e.ops(m.ID); !slices.Equal(ops, want) {
					t.Errorf("versions of %s = %v, want %v", p, ops, want)
				}
				e.noConflicts()
				e.noErrorsLogged()
				// And a later identical write by someone else is still
				// remote: not taken for ours.
				e.mustWrite(p, "mine 2\n")
				e.remotePut(p, "theirs\n")
				e.waitLocal(p, "theirs\n", true)
				e.caughtUp()
				e.checkConflict(p, "mine 2\n", "theirs\n")
			})
		}
	}
}

// mgFeedNotFound makes the change feed and the memory versions answer 404
// as a server without them would (the server's envelope,
// not_found_error): the overlay lists the store.
func mgFeedNotFound(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
	if kind != "changes" && kind != "versions" {
		return false
	}
	mgWriteError(w, http.StatusNotFound, "not_found_error", "Not found")
	return true
}

// mgOnlyFeedNotFound makes the change feed alone answer 404: the overlay
// follows the memory versions.
func mgOnlyFeedNotFound(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
	if kind != "changes" {
		return false
	}
	mgWriteError(w, http.StatusNotFound, "not_found_error", "Not found")
	return true
}

// Against a server without the change feed, the overlay follows the
// memory versions: remote changes (an update, a create, a delete) arrive,
// only the memories the versions name are fetched, and the store is not
// listed again (its listing is the mount's, and the safety net's every 10
// minutes). It runs in a synctest bubble (bubble_test.go): the intervals
// pass in virtual time.
func TestOverlayVersionsFollow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testOverlayVersionsFollow)
}

func testOverlayVersionsFollow(t *testing.T) {
	e := mgSetupBubble(t, mgWith(map[string]string{"/same.md": "unchanged\n"}), sqlstore.Options{})
	e.proxy.setFault(mgOnlyFeedNotFound)
	e.start(func(o *EngineOptions) { o.Interval = MinInterval })
	e.waitContent()
	if got := e.eng.Status().Follows; got != FollowsVersions {
		t.Fatalf("follows %q, want %q", got, FollowsVersions)
	}
	listed := len(e.proxy.requests("list"))
	e.remotePut("/a.md", "theirs a\n")
	e.remoteDelete("/dir/c.md")
	e.remotePut("/new.md", "theirs new\n")
	sleep(3 * MinInterval)
	a, _ := e.read("/a.md")
	_, c := e.read("/dir/c.md")
	n, _ := e.read("/new.md")
	if a != "theirs a\n" || c || n != "theirs new\n" {
		t.Fatalf("remote changes did not arrive within %s through the versions", 3*MinInterval)
	}
	e.wantLocal("/same.md", "unchanged\n")
	for _, g := range e.proxy.requests("get") {
		if strings.Contains(g.url, e.ids["/same.md"]) {
			t.Errorf("fetched %s: it did not change", g.url)
		}
	}
	if n := len(e.proxy.requests("list")); n != listed {
		t.Errorf("the store was listed %d more times while following the versions", n-listed)
	}
	if len(e.proxy.requests("versions")) == 0 {
		t.Error("no versions listing")
	}
}

// Against a server without the change feed and the memory versions,
// remote changes still arrive: the overlay lists the store every interval.
// It runs in a synctest bubble (bubble_test.go): the intervals pass in
// virtual time.
func TestOverlayListingFallback(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testOverlayListingFallback)
}

func testOverlayListingFallback(t *testing.T) {
	e := mgSetupBubble(t, mgWith(map[string]string{"/same.md": "unchanged\n"}), sqlstore.Options{})
	e.proxy.setFault(mgFeedNotFound)
	e.start(func(o *EngineOptions) { o.Interval = MinInterval })
	e.waitContent()
	loaded := len(e.proxy.requests("list")) // the initial load's and the content fetch's (full view)
	// The first listing runs at Start; wait until it has been compared, so
	// that the changes below are new to the overlay.
	eventually(t, "the first listing", func() bool { return len(e.proxy.requests("list")) > loaded })
	e.afterMerge()
	e.remotePut("/a.md", "theirs a\n")
	// Remote first: whether a flusher tick or the next listing sees the
	// collision, it is one (a local write uploaded just before the remote
	// one would not be).
	e.remotePut("/b.md", "theirs b\n")
	e.mustWrite("/b.md", "mine b\n")
	e.remoteDelete("/dir/c.md")
	e.remotePut("/new.md", "theirs new\n")
	sleep(3 * MinInterval)
	a, _ := e.read("/a.md")
	b, _ := e.read("/b.md")
	_, c := e.read("/dir/c.md")
	n, _ := e.read("/new.md")
	if a != "theirs a\n" || b != "theirs b\n" || c || n != "theirs new\n" {
		t.Fatalf("remote changes did not arrive within %s without the feed", 3*MinInterval)
	}
	e.checkConflict("/b.md", "mine b\n", "theirs b\n")
	e.wantLocal("/same.md", "unchanged\n")
	// Only what changed was fetched, not the unchanged memory; the deleted
	// one was looked up on its own before its file went (a listing is
	// never taken for a deletion).
	lookedUp := false
	for _, g := range e.proxy.requests("get") {
		if strings.Contains(g.url, e.ids["/same.md"]) {
			t.Errorf("fetched %s: it did not change", g.url)
		}
		lookedUp = lookedUp || strings.Contains(g.url, e.ids["/dir/c.md"])
	}
	if !lookedUp {
		t.Error("the memory missing from the listing was deleted locally without being looked up")
	}
	for _, l := range e.proxy.requests("list")[loaded:] {
		if !strings.Contains(l.url, "view=basic") {
			t.Errorf("listing %s: want the basic view", l.url)
		}
	}
	e.noErrorsLogged()
}

// A cursor the feed no longer holds (410) makes the overlay list the store
// again, then follow the feed from its head.
func TestOverlayCursorGone(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.waitContent() // the background content fetch lists too: the listings counted are the overlay's
	var armed atomic.Bool
	armed.Store(true)
	n := e.proxy.setFault(func(p *mgProxy, w http.ResponseWriter, r *http.Request, kind string, body []byte) bool {
		if kind != "changes" || !strings.Contains(r.URL.RawQuery, "after=") {
			return false
		}
		rec := p.forward(r, body)
		var page store.ChangePage
		json.Unmarshal(rec.Body.Bytes(), &page)
		if len(page.Data) > 0 && armed.CompareAndSwap(true, false) {
			// The change is in the feed, but this answer says the cursor
			// expired: only a listing can bring it now.
			mgWriteError(w, http.StatusGone, "invalid_request_error", "the change feed no longer holds changes after this cursor")
			return true
		}
		mgCopy(w, rec)
		return true
	})
	e.proxy.waitNewPoll(t, n)
	listsBefore := len(e.proxy.requests("list"))
	e.remotePut("/a.md", "theirs a\n")
	e.waitLocal("/a.md", "theirs a\n", true)
	if armed.Load() {
		t.Fatal("the 410 was never answered")
	}
	if n := len(e.proxy.requests("list")); n <= listsBefore {
		t.Errorf("no listing after the 410")
	}
	if ws := e.hook.AllEntries(); !slices.ContainsFunc(ws, func(en *logrus.Entry) bool {
		return strings.Contains(en.Message, "no longer holds this mount's cursor")
	}) {
		t.Error("the 410 was not logged")
	}
	// The feed is followed again from the new head: a later change arrives
	// within the deadline although the interval is an hour.
	lists := len(e.proxy.requests("list"))
	e.remotePut("/b.md", "theirs b\n")
	e.waitLocal("/b.md", "theirs b\n", true)
	e.caughtUp()
	if n := len(e.proxy.requests("list")); n != lists {
		t.Errorf("%d more listings: want the feed followed again", n-lists)
	}
	e.noPending()
	e.noConflicts()
	e.noErrorsLogged()
}

// A store that never changed yet has a feed head of 0: the overlay must
// still follow the feed, so a first change elsewhere shows in about a
// second, not after an interval.
func TestOverlayEmptyStoreFollowsFeed(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, nil)
	e.remotePut("/first.md", "first\n")
	d := e.waitLocal("/first.md", "first\n", true)
	t.Logf("first change of an empty store applied after %s", d)
	e.remotePut("/second.md", "second\n")
	e.waitLocal("/second.md", "second\n", true)
	e.caughtUp()
	e.noErrorsLogged()
}

// A read-only mount follows the store too; nothing on it can change.
func TestMergeReadOnlyFollows(t *testing.T) {
	t.Parallel()
	e := mgSetup(t, mgFiles)
	e.start(func(o *EngineOptions) { o.ReadOnly = true })
	if err := e.write("/z.md", "x"); err == nil {
		t.Fatal("a write on a read-only mount succeeded")
	}
	e.remotePut("/a.md", "theirs a\n")
	e.remoteDelete("/dir/c.md")
	e.remotePut("/new.md", "new\n")
	e.waitLocal("/a.md", "theirs a\n", true)
	e.waitLocal("/dir/c.md", "", false)
	e.waitLocal("/new.md", "new\n", true)
	if res := e.sync(true, true); res != (SyncResult{}) {
		t.Errorf("a pass of a read-only mount = %+v, want nothing", res)
	}
	if n := len(e.proxy.requests("create")) + len(e.proxy.requests("update")) + len(e.proxy.requests("delete")); n != 0 {
		t.Errorf("a read-only mount sent %d writes", n)
	}
	e.noErrorsLogged()
}

// A write whose every attempt lost its answer, then a newer local change
// before the overlay sees the lost write applied: that write is ours, so
// the newer change goes up on top of it — no conflict, nothing reverted.
func TestMergeLostResponseThenChangedAgain(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"update", "create"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newMgEnv(t, mgFiles)
			p := "/a.md"
			if kind == "create" {
				p = "/new.md"
			}
			e.proxy.holdFeed()
			stop := mgLoseResponses(e.proxy, kind, true)
			e.mustWrite(p, "mine 1\n")
			if res := e.sync(true, false); res.Failed != 1 {
				t.Errorf("pass = %+v, want 1 failed", res)
			}
			if m := e.memory(p); m == nil || m.ContentSHA256 != store.SHA256Hex("mine 1\n") {
				t.Fatalf("the lost write was not applied: %+v", m)
			}
			e.mustWrite(p, "mine 2\n")
			e.proxy.releaseFeed()
			e.caughtUp()
			e.wantLocal(p, "mine 2\n")
			e.noConflicts()
			stop()
			if res := e.sync(true, false); res.Uploaded != 1 || res.Failed != 0 || res.Left != 0 {
				t.Errorf("pass = %+v, want 1 uploaded", res)
			}
			e.wantStore(mgWith(map[string]string{p: "mine 2\n"}))
			want := []string{"created", "modified", "modified"}
			if kind == "create" {
				want = []string{"created", "modified"}
			}
			if ops := e.ops(e.memory(p).ID); !slices.Equal(ops, want) {
				t.Errorf("versions = %v, want %v", ops, want)
			}
			e.caughtUp()
			e.wantLocal(p, "mine 2\n")
			e.noPending()
			e.noConflicts()
		})
	}
}

// Content this mount once uploaded successfully, written again later by
// someone else, is a remote edit like any other: it must not be taken for
// our own write (the sha sent is forgotten at the next look at the store).
func TestMergeOldUploadIsNotOurs(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	e.mustWrite("/a.md", "X\n")
	if res := e.sync(false, false); res.Uploaded != 1 {
		t.Fatalf("pass = %+v, want 1 uploaded", res)
	}
	e.remotePut("/a.md", "Y\n")
	e.waitLocal("/a.md", "Y\n", true)
	e.caughtUp()
	e.mustWrite("/a.md", "local Z\n") // made against Y
	e.remotePut("/a.md", "X\n")       // someone else writes X again
	e.waitLocal("/a.md", "X\n", true)
	e.caughtUp()
	e.checkConflict("/a.md", "local Z\n", "X\n")
	if res := e.sync(false, false); res.Uploaded != 0 {
		t.Errorf("pass = %+v: the losing local version was uploaded over someone else's write", res)
	}
	e.wantStore(mgWith(map[string]string{"/a.md": "X\n"}))
}

// A memory moved in the store onto the path of a file created here and not
// yet uploaded: the store wins, the local file's content goes to the
// conflict log — not silently dropped from the mount.
func TestMergeRemoteRenameOntoLocalNew(t *testing.T) {
	t.Parallel()
	e := newMgEnv(t, mgFiles)
	moved, _ := e.lookup("/a.md")
	e.mustWrite("/n.md", "mine\n")
	to := "/n.md"
	if _, err := e.remote.UpdateMemory(e.ctx(), e.storeID, e.ids["/a.md"], store.UpdateMemoryInput{Path: &to}); err != nil {
		t.Fatal(err)
	}
	e.waitLocal("/n.md", "base a\n", true)
	e.caughtUp()
	e.wantNoLocal("/a.md")
	if a, _ := e.lookup("/n.md"); a.Ino != moved.Ino {
		t.Errorf("/n.md is inode %d, want %d (the moved file)", a.Ino, moved.Ino)
	}
	e.checkConflict("/n.md", "mine\n", "base a\n")
	e.noPending()
	if res := e.sync(true, true); res.Uploaded+res.Failed+res.Left != 0 {
		t.Errorf("pass = %+v, want nothing", res)
	}
	e.wantStore(map[string]string{"/n.md": "base a\n", "/b.md": "base b\n", "/dir/c.md": "base c\n"})
	e.noErrorsLogged()
}

// A remote change to a file written through a handle not yet closed: the
// writes so far are a local change (store wins, they go to the conflict
// log); the handle keeps working and its next write applies to the
// store's content.
func TestMergeRemoteChangeWhileOpen(t *testing.T) {
	t.Parallel()
	t.Run("existing file", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		a, _ := e.lookup("/a.md")
		if err := e.tree.Open(a.Ino, true, true); err != nil {
			t.Fatal(err)
		}
		if _, err := e.tree.Write(a.Ino, []byte("draft\n"), 0); err != nil {
			t.Fatal(err)
		}
		e.remotePut("/a.md", "theirs\n")
		e.waitLocal("/a.md", "theirs\n", true)
		e.caughtUp()
		e.checkConflict("/a.md", "draft\n", "theirs\n")
		e.noPending()
		if _, err := e.tree.Write(a.Ino, []byte("more\n"), int64(len("theirs\n"))); err != nil {
			t.Fatalf("write through the open handle after the remote change: %v", err)
		}
		if err := e.tree.Commit(a.Ino); err != nil {
			t.Fatal(err)
		}
		e.tree.Release(a.Ino)
		if res := e.sync(false, false); res.Uploaded != 1 || res.Failed != 0 {
			t.Errorf("pass = %+v, want 1 uploaded", res)
		}
		e.wantStore(mgWith(map[string]string{"/a.md": "theirs\nmore\n"}))
		e.noErrorsLogged()
	})
	t.Run("new file", func(t *testing.T) {
		t.Parallel()
		e := newMgEnv(t, mgFiles)
		n, err := e.tree.Create(fs.RootIno, "n.md", 0o644, testOwner)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.tree.Open(n.Ino, true, false); err != nil {
			t.Fatal(err)
		}
		if _, err := e.tree.Write(n.Ino, []byte("new draft\n"), 0); err != nil {
			t.Fatal(err)
		}
		m := e.remotePut("/n.md", "theirs\n")
		e.waitLocal("/n.md", "theirs\n", true)
		e.caughtUp()
		e.checkConflict("/n.md", "new draft\n", "theirs\n")
		if a, _ := e.lookup("/n.md"); a.Ino != n.Ino {
			t.Errorf("/n.md is inode %d, want the open file's %d", a.Ino, n.Ino)
		}
		if _, err := e.tree.Write(n.Ino, []byte("T"), 0); err != nil {
			t.Fatal(err)
		}
		if err := e.tree.Commit(n.Ino); err != nil {
			t.Fatal(err)
		}
		e.tree.Release(n.Ino)
		if res := e.sync(false, false); res.Uploaded != 1 || res.Failed != 0 {
			t.Errorf("pass = %+v, want 1 uploaded", res)
		}
		if got := e.memory("/n.md"); got.ID != m.ID {
			t.Errorf("/n.md is memory %s, want %s updated", got.ID, m.ID)
		}
		e.wantStore(mgWith(map[string]string{"/n.md": "Theirs\n"}))
		e.noErrorsLogged()
	})
}
