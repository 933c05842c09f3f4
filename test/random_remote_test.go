package test

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue"
	"github.com/memfs/memfs/test/harness"
)

// The randomized test's other writer (a client changing the store
// directly) and its faults (the store going away, the state dir's disk
// filling up). Both run between steps, right after a sync, so the model
// knows which files the store and the mount agree on.

// syncedFiles are the files the store holds with the mount's content and
// that have nothing pending: the ones the other writer may change.
func (r *rnd) syncedFiles() []string {
	r.t.Helper()
	pending := map[string]bool{}
	for _, c := range r.mnt.Engine().Status().Pending {
		pending[strings.TrimPrefix(c.Path, "/")] = true
	}
	ctx, cancel := context.WithTimeout(r.ctx, rndOpTimeout)
	defer cancel()
	mems, err := r.cl.AllMemories(ctx, r.storeID, store.ListMemoriesOptions{})
	if err != nil {
		r.fail("list the store: %v", err)
	}
	var out []string
	for _, m := range mems {
		p := strings.TrimPrefix(m.Path, "/")
		if c, ok := r.m.files[p]; ok && !pending[p] && m.ContentSHA256 == store.SHA256Hex(string(c)) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// remoteRound has the other writer make one to three changes, some of
// them racing an unsynced local change of the same file on purpose, then
// waits until the mount has applied everything the feed holds and checks
// it shows what the merge rules say.
func (r *rnd) remoteRound(i int) {
	r.t.Helper()
	if !r.pct(40) {
		return
	}
	cands := r.syncedFiles()
	for range 1 + r.rng.IntN(3) {
		kind := r.rng.IntN(7)
		if len(cands) == 0 {
			kind = 1 // nothing synced to change: a create
		}
		var p string
		if kind != 1 {
			k := r.rng.IntN(len(cands))
			p = cands[k]
			cands = slices.Delete(cands, k, k+1)
		}
		switch kind {
		case 0:
			r.remoteEdit(i, p)
		case 1:
			r.remoteCreate(i)
		case 2:
			r.remoteRename(i, p)
		case 3:
			r.remoteDelete(i, p, false)
		case 4:
			// Changed on both sides: the store wins, the local version
			// goes to the conflict log. (Emptying an empty file changes
			// nothing: then there is no local version to keep.)
			local := r.content(200)
			changed := len(local) > 0 || len(r.m.files[p]) > 0
			r.create(i, "race-local-edit", p, false, local)
			if changed {
				r.conflicts[r.stateDir] = append(r.conflicts[r.stateDir], rndConflict{path: p, content: local})
			}
			r.remoteEdit(i, p)
		case 5:
			// Deleted here, changed there: the store's version comes back.
			r.record(i, "race-local-delete", "unlink "+p, 0)
			r.expect("unlink "+p, 0, syscall.Unlink(r.abs(p)))
			delete(r.m.files, p)
			r.remoteEdit(i, p)
		case 6:
			// Changed here, deleted there: the local file is the only
			// copy; the next sync creates it again.
			local := r.content(200)
			changed := len(local) > 0 || len(r.m.files[p]) > 0
			r.create(i, "race-local-edit", p, false, local)
			r.remoteDelete(i, p, changed)
		}
	}
	r.waitOverlay(fmt.Sprintf("after the other writer's changes at step %d", i))
}

// remoteCtx bounds one request of the other writer.
func (r *rnd) remoteCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, rndOpTimeout)
}

// memoryAt is the memory the store holds at p.
func (r *rnd) memoryAt(p string) *store.Memory {
	r.t.Helper()
	ctx, cancel := r.remoteCtx()
	defer cancel()
	m, err := r.cl.MemoryByPath(ctx, r.storeID, "/"+p)
	if err != nil {
		r.fail("the other writer: get /%s: %v", p, err)
	}
	return m
}

// remoteEdit changes p's content in the store.
func (r *rnd) remoteEdit(i int, p string) {
	r.t.Helper()
	id := r.memoryAt(p).ID
	r.remoteN++
	c := fmt.Sprintf("edited elsewhere (%d)\n", r.remoteN)
	r.ops = append(r.ops, fmt.Sprintf("%d: the other writer edits /%s", i, p))
	ctx, cancel := r.remoteCtx()
	defer cancel()
	if _, err := r.cl.UpdateMemory(ctx, r.storeID, id, store.UpdateMemoryInput{Content: &c}); err != nil {
		r.fail("the other writer: edit /%s: %v", p, err)
	}
	r.m.files[p] = []byte(c)
}

// remoteNewPath is a fresh path in an existing directory of the model
// that the store can hold: not below a path the store still has as a
// memory (a file here moved or deleted, with the change still pending,
// and a folder made in its place).
func (r *rnd) remoteNewPath() string {
	r.t.Helper()
	ctx, cancel := r.remoteCtx()
	defer cancel()
	mems, err := r.cl.AllMemories(ctx, r.storeID, store.ListMemoriesOptions{})
	if err != nil {
		r.fail("the other writer: list the store: %v", err)
	}
	memory := map[string]bool{}
	for _, m := range mems {
		memory[strings.TrimPrefix(m.Path, "/")] = true
	}
	var dirs []string
	for _, d := range r.m.sortedDirs() {
		if rndDepth(d) < rndMaxDepth && !rndBelowMemory(d, memory) {
			dirs = append(dirs, d)
		}
	}
	r.remoteN++
	return rndJoin(rndPick(r, dirs), fmt.Sprintf("r%d.md", r.remoteN))
}

// remoteCreate creates a memory at a fresh path.
func (r *rnd) remoteCreate(i int) {
	r.t.Helper()
	p := r.remoteNewPath()
	c := fmt.Sprintf("created elsewhere (%d)\n", r.remoteN)
	r.ops = append(r.ops, fmt.Sprintf("%d: the other writer creates /%s", i, p))
	ctx, cancel := r.remoteCtx()
	defer cancel()
	if _, err := r.cl.CreateMemory(ctx, r.storeID, "/"+p, c); err != nil {
		r.fail("the other writer: create /%s: %v", p, err)
	}
	r.m.files[p] = []byte(c)
}

// remoteRename moves p's memory to a fresh path.
func (r *rnd) remoteRename(i int, p string) {
	r.t.Helper()
	id := r.memoryAt(p).ID
	q := r.remoteNewPath()
	r.ops = append(r.ops, fmt.Sprintf("%d: the other writer moves /%s to /%s", i, p, q))
	ctx, cancel := r.remoteCtx()
	defer cancel()
	nq := "/" + q
	if _, err := r.cl.UpdateMemory(ctx, r.storeID, id, store.UpdateMemoryInput{Path: &nq}); err != nil {
		r.fail("the other writer: move /%s: %v", p, err)
	}
	r.m.files[q] = r.m.files[p]
	delete(r.m.files, p)
	r.m.pruneAbove(p)
}

// remoteDelete deletes p's memory. With changedHere the file has a local
// change the store never saw: it stays (it is the only copy), and the
// next sync creates it again.
func (r *rnd) remoteDelete(i int, p string, changedHere bool) {
	r.t.Helper()
	m := r.memoryAt(p)
	r.ops = append(r.ops, fmt.Sprintf("%d: the other writer deletes /%s", i, p))
	ctx, cancel := r.remoteCtx()
	defer cancel()
	if err := r.cl.DeleteMemory(ctx, r.storeID, m.ID, nil); err != nil {
		r.fail("the other writer: delete /%s: %v", p, err)
	}
	if !changedHere {
		delete(r.m.files, p)
		r.m.pruneAbove(p)
	}
}

// pruneAbove removes the directories above p that hold nothing any more:
// the mount drops the folders a file the store moved or deleted leaves
// empty (the store has no folders).
func (m *rndModel) pruneAbove(p string) {
	for d := rndParent(p); d != "" && m.empty(d); d = rndParent(d) {
		delete(m.dirs, d)
	}
}

// waitOverlay waits until the mount has applied every change the store's
// feed holds, then checks it against the model.
func (r *rnd) waitOverlay(where string) {
	r.t.Helper()
	ctx, cancel := r.remoteCtx()
	defer cancel()
	head, err := r.cl.Changes(ctx, r.storeID, 0, 1, 0)
	if err != nil {
		r.fail("%s: the feed's head: %v", where, err)
	}
	for r.mnt.Engine().Status().FeedCursor < head.NextCursor {
		if ctx.Err() != nil {
			r.fail("%s: the mount did not apply the store's changes within %s", where, rndOpTimeout)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	r.checkMount(where)
}

// checkUnjournaled compares the files status lists as not journaled
// with the model's.
func (r *rnd) checkUnjournaled(where string) {
	r.t.Helper()
	st := r.mnt.Engine().Status()
	var got, want []string
	for _, c := range st.Pending {
		if c.Op == "unjournaled" {
			if c.Reason != syncqueue.ReasonNoSpace {
				r.fail("%s: %s is not journaled, status says because %q", where, c.Path, c.Reason)
			}
			got = append(got, c.Path)
		}
	}
	for p := range r.unjournaled {
		want = append(want, "/"+p)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		r.fail("%s: status lists %v as not journaled, the model %v", where, got, want)
	}
	if len(want) > 0 && !st.NoSpace {
		r.fail("%s: files are not journaled and status does not say the state dir is full", where)
	}
}

// faultEpisode now and then takes the store away, or fills the state
// dir's disk, for a few steps. It returns the last step run.
func (r *rnd) faultEpisode(i int) int {
	r.t.Helper()
	switch {
	case r.pct(10):
		return r.outage(i)
	case r.pct(10):
		return r.diskFull(i)
	}
	return i
}

// outage cuts every connection to the store for a few steps: the mount
// keeps working, a pass uploads nothing, status says the store is
// unreachable; the next sync (after the store is back) checks nothing
// was lost.
func (r *rnd) outage(i int) int {
	r.t.Helper()
	r.ops = append(r.ops, "-- the store goes away")
	r.proxy.Cut()
	n := 4 + r.rng.IntN(6)
	for k := 1; k <= n; k++ {
		r.step(i + k)
	}
	ctx, cancel := context.WithTimeout(r.ctx, rndOpTimeout)
	defer cancel()
	res := r.mnt.Engine().SyncNow(ctx, true, true)
	if res.Uploaded+res.Deleted != 0 {
		r.fail("a pass with the store away uploaded %d and deleted %d", res.Uploaded, res.Deleted)
	}
	for !r.mnt.Engine().Status().Unreachable {
		if ctx.Err() != nil {
			r.fail("status does not say the store is unreachable")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	for _, c := range r.mnt.Engine().Status().Pending {
		if c.Reason == "" {
			r.fail("with the store away, %s of %s waits without a reason", c.Op, c.Path)
		}
	}
	r.checkMount("with the store away")
	r.proxy.Pass()
	r.ops = append(r.ops, "-- the store is back")
	return i + n
}

// diskFull fills the state dir's disk for a few steps: closes fail with
// ENOSPC and keep their content, journaled changes are refused whole
// (the model predicts every errno), status lists what is not journaled;
// once the disk has room again, it is all journaled by itself.
func (r *rnd) diskFull(i int) int {
	r.t.Helper()
	r.ops = append(r.ops, "-- the state dir's disk fills up")
	release := harness.FillDisk(r.t, r.disk)
	r.full = true
	n := 4 + r.rng.IntN(6)
	for k := 1; k <= n; k++ {
		r.step(i + k)
		r.checkUnjournaled(fmt.Sprintf("after step %d, with the disk full", i+k))
	}
	release()
	r.full = false
	r.ops = append(r.ops, "-- the disk has room again")
	deadline := time.Now().Add(rndOpTimeout)
	for {
		left := 0
		for _, c := range r.mnt.Engine().Status().Pending {
			if c.Op == "unjournaled" {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.fail("%d files are still not journaled %s after the disk had room again", left, rndOpTimeout)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	clear(r.unjournaled)
	r.checkMount("after the disk had room again")
	return i + n
}

// rndBelowMemory reports whether the directory d, or a directory above
// it, is a memory's path in the store.
func rndBelowMemory(d string, memory map[string]bool) bool {
	for ; d != "" && d != "."; d = path.Dir(d) {
		if memory[d] {
			return true
		}
	}
	return false
}
