package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)

	j.SetBase("mem_a", "mem_a", "sha-a0")
	j.SetBase("mem_b", "mem_b", "sha-b0")
	j.SetBase("mem_c", "mem_c", "sha-c0")
	la := put(t, j, "mem_a", "/a.md", "a1")
	put(t, j, "local-1", "/new.md", "n1")
	lb := del(t, j, "mem_b", "/b.md")
	lc := put(t, j, "mem_c", "/c.md", "c1")
	confirm(t, j, "mem_c", lc, "mem_c", "sha-c1", "/c.md")
	put(t, j, "local-2", "/empty.md", "")
	la2 := put(t, j, "mem_a", "/renamed/a.md", "a2")

	want := j.Pending()
	if len(want) != 4 {
		t.Fatalf("pending before close: %+v", want)
	}
	ids := []string{want[0].FileID, want[1].FileID, want[2].FileID, want[3].FileID}
	if !reflect.DeepEqual(ids, []string{"local-1", "mem_b", "local-2", "mem_a"}) {
		t.Fatalf("pending not in LSN order: %v", ids)
	}
	a := want[3]
	if a.Origin != "mem_a" || a.BaseSHA != "sha-a0" || a.Path != "/renamed/a.md" || string(a.Content) != "a2" || a.LSN != la2 || a.Deleted {
		t.Fatalf("mem_a entry: %+v (first put lsn %d)", a, la)
	}
	if b := want[1]; !b.Deleted || b.Content != nil || b.Origin != "mem_b" || b.BaseSHA != "sha-b0" || b.LSN != lb {
		t.Fatalf("mem_b entry: %+v", b)
	}
	if n := want[0]; n.Origin != "" || n.BaseSHA != "" || string(n.Content) != "n1" {
		t.Fatalf("local-1 entry: %+v", n)
	}
	last := j.Stats().LastLSN
	closeJ(t, j)

	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
	}
	if lsn := put(t, j, "mem_a", "/renamed/a.md", "a3"); lsn <= last {
		t.Fatalf("lsn after reopen %d, not above %d", lsn, last)
	}
	// The base of a pending entry survives the reopen (from its record).
	if b, ok := j.Base("mem_a"); !ok || b != (Base{"mem_a", "sha-a0"}) {
		t.Fatalf("base of mem_a after reopen: %+v %v", b, ok)
	}
}

func TestLSNMonotonicAfterEverythingConfirmed(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	var last uint64
	for i := range 5 {
		last = put(t, j, "f", "/f.md", fmt.Sprint(i))
	}
	confirm(t, j, "f", last, "mem_f", "sha", "/f.md")
	// Nothing pending: the journal shrinks to its header, which must still
	// carry the LSN.
	eventually(t, "journal to shrink to its header", func() bool { return fileSize(t, journalPath(dir)) == testEmptyLen })
	closeJ(t, j)

	j = open(t, dir, opts)
	if got := j.Stats().LastLSN; got != last+1 {
		t.Fatalf("LastLSN after reopen %d, want %d", got, last+1)
	}
	if lsn := put(t, j, "g", "/g.md", "x"); lsn != last+2 {
		t.Fatalf("first lsn after reopen %d, want %d", lsn, last+2)
	}
}

func TestCoalescingAndRebase(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	j.SetBase("mem_1", "mem_1", "sha0")
	lsns := make([]uint64, 100)
	for i := range lsns {
		lsns[i] = put(t, j, "mem_1", "/f.md", fmt.Sprintf("v%d", i))
		if i > 0 && lsns[i] <= lsns[i-1] {
			t.Fatalf("lsn %d after %d", lsns[i], lsns[i-1])
		}
	}
	p := j.Pending()
	if len(p) != 1 || string(p[0].Content) != "v99" || p[0].LSN != lsns[99] || p[0].BaseSHA != "sha0" {
		t.Fatalf("after 100 puts: %+v", p)
	}

	// The flusher uploaded v49; v99 was written meanwhile.
	confirm(t, j, "mem_1", lsns[49], "mem_1", "sha49", "/f.md")
	p = j.Pending()
	if len(p) != 1 || string(p[0].Content) != "v99" || p[0].LSN != lsns[99] || p[0].Origin != "mem_1" || p[0].BaseSHA != "sha49" {
		t.Fatalf("after confirming an older lsn: %+v", p)
	}
	for _, l := range []uint64{lsns[49], lsns[10]} {
		if err := j.Confirm("mem_1", l, "mem_1", "stale", "/f.md"); !errors.Is(err, ErrNotPending) {
			t.Fatalf("a stale confirm of lsn %d: %v", l, err)
		}
	}
	if p := j.Pending(); p[0].BaseSHA != "sha49" {
		t.Fatalf("a stale confirm rebased: %+v", p)
	}
	closeJ(t, j)

	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, p) {
		t.Fatalf("after reopen: %+v, want %+v", got, p)
	}
	confirm(t, j, "mem_1", lsns[99], "mem_1", "sha99", "/f.md")
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("after confirming the latest: %+v", p)
	}
	if b, _ := j.Base("mem_1"); b != (Base{"mem_1", "sha99"}) {
		t.Fatalf("base after release: %+v", b)
	}
	lsn := put(t, j, "mem_1", "/f.md", "v100")
	if p := j.Pending(); len(p) != 1 || p[0].BaseSHA != "sha99" || p[0].LSN != lsn {
		t.Fatalf("a put after release is not made against the confirmed sha: %+v", p)
	}
	// A repeated confirmation changes nothing.
	if err := j.Confirm("mem_1", lsns[99], "mem_1", "sha99", "/f.md"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("confirm of a released lsn: %v", err)
	}
	if err := j.Confirm("mem_1", lsn+1, "mem_1", "x", "/f.md"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("confirm of a future lsn: %v", err)
	}
	if err := j.Confirm("nobody", 1, "mem_x", "x", "/x.md"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("confirm of an unknown file: %v", err)
	}
}

func TestCreatedAndDeletedNeverPending(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	put(t, j, "local-1", "/tmp.md", "scratch")
	put(t, j, "local-1", "/tmp.md", "scratch 2")
	del(t, j, "local-1", "/tmp.md")
	put(t, j, "local-2", "/keep.md", "keep")
	if p := j.Pending(); len(p) != 1 || p[0].FileID != "local-2" {
		t.Fatalf("pending: %+v", p)
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	if p := j.Pending(); len(p) != 1 || p[0].FileID != "local-2" {
		t.Fatalf("pending after reopen: %+v", p)
	}
}

// A file whose create is in flight when it is removed: the store ends up
// holding a memory nobody has locally, so it must be deleted in turn.
func TestDeleteDuringCreateUpload(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	lsn := put(t, j, "local-1", "/n.md", "new")
	if p := j.Pending(); len(p) != 1 { // the flusher takes it...
		t.Fatalf("pending: %+v", p)
	}
	del(t, j, "local-1", "/n.md") // ...the file is removed meanwhile...
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("pending after delete: %+v", p)
	}
	confirm(t, j, "local-1", lsn, "mem_9", "sha9", "/n.md") // ...and the create lands.
	want := j.Pending()
	if len(want) != 1 || !want[0].Deleted || want[0].Origin != "mem_9" || want[0].BaseSHA != "sha9" || want[0].Path != "/n.md" {
		t.Fatalf("want a pending delete of mem_9, got %+v", want)
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen %+v, want %+v", got, want)
	}
	confirm(t, j, "local-1", want[0].LSN, "", "", "/n.md")
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("after the delete was confirmed: %+v", p)
	}
	if _, ok := j.Base("local-1"); ok {
		t.Fatal("a deleted file kept a base")
	}
}

// The same when the file moved before it was removed, as an editor's
// atomic saves do (create the temporary file, rename it over the target,
// then the next save's rename replaces it): the newer state was never
// handed out, but the first one's create is still in flight.
func TestDeleteAfterMoveDuringCreateUpload(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	lsn := put(t, j, "local-1", "/n.md.tmp", "new")
	if p := j.Pending(); len(p) != 1 { // the flusher takes the create...
		t.Fatalf("pending: %+v", p)
	}
	put(t, j, "local-1", "/n.md", "new") // ...the file is renamed over /n.md...
	del(t, j, "local-1", "/n.md")        // ...and replaced by the next save...
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("pending after delete: %+v", p)
	}
	confirm(t, j, "local-1", lsn, "mem_9", "sha9", "/n.md.tmp") // ...when the create lands.
	p := j.Pending()
	if len(p) != 1 || !p[0].Deleted || p[0].Origin != "mem_9" || p[0].BaseSHA != "sha9" {
		t.Fatalf("want a pending delete of mem_9 (else it stays in the store for ever), got %+v", p)
	}
}

func TestConfirmOfDeleteRebasesNewerPutToCreate(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	j.SetBase("mem_1", "mem_1", "sha0")
	ld := del(t, j, "mem_1", "/f.md")
	lp := put(t, j, "mem_1", "/f.md", "back") // recreated before the delete went up
	if p := j.Pending(); len(p) != 1 || p[0].Origin != "mem_1" || p[0].LSN != lp {
		t.Fatalf("pending: %+v", p)
	}
	confirm(t, j, "mem_1", ld, "", "", "/f.md")
	p := j.Pending()
	if len(p) != 1 || p[0].Origin != "" || p[0].BaseSHA != "" || string(p[0].Content) != "back" {
		t.Fatalf("want a create, got %+v", p)
	}
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, p) {
		t.Fatalf("after reopen %+v, want %+v", got, p)
	}
}

func TestSetBaseDoesNotOverrideAPendingEntry(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	j.SetBase("mem_1", "mem_1", "sha0")
	put(t, j, "mem_1", "/f.md", "local edit")
	j.SetBase("mem_1", "mem_1", "sha-remote") // the store moved on
	put(t, j, "mem_1", "/f.md", "local edit 2")
	if p := j.Pending(); p[0].BaseSHA != "sha0" {
		t.Fatalf("the edit's base was replaced: %+v", p[0])
	}
}

func TestPutLimitsAndArguments(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.MaxContentBytes = 10
	j := open(t, dir, opts)
	if _, err := j.Put("f", "/f.md", make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized put: %v", err)
	}
	if _, err := j.Put("", "/f.md", nil); err == nil {
		t.Fatal("put with an empty file id succeeded")
	}
	if _, err := j.Delete("", "/f.md"); err == nil {
		t.Fatal("delete with an empty file id succeeded")
	}
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("a refused call left state: %+v", p)
	}
}

func TestPutCopiesContent(t *testing.T) {
	opts, _ := testOpts()
	j := open(t, t.TempDir(), opts)
	buf := []byte("hello")
	put(t, j, "f", "/f.md", string(buf))
	if _, err := j.Put("g", "/g.md", buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	if got := string(pendingByID(j)["g"].Content); got != "hello" {
		t.Fatalf("content aliased the caller's buffer: %q", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{GroupCommit: -1, Auth: testAuth},
		{GroupCommit: time.Minute, Auth: testAuth},
		{CompactMinBytes: -1, Auth: testAuth},
		{MaxContentBytes: -1, Auth: testAuth},
		{MaxContentBytes: maxRecordLen, Auth: testAuth},
		{},
		{Auth: Auth{Key: testAuth.Key, Identity: testAuth.Identity}},
		{Auth: Auth{Key: testAuth.Key, Identity: testAuth.Identity, StoreID: "s", Session: "../x"}},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
		if _, err := Open(t.TempDir(), o); err == nil {
			t.Errorf("Open with %+v succeeded", o)
		}
	}
	if err := (Options{Auth: testAuth}).Validate(); err != nil {
		t.Errorf("zero Options: %v", err)
	}
	if d := (Options{}).withDefaults(); d.GroupCommit != 100*time.Millisecond || d.CompactMinBytes != 1<<20 || d.Log == nil {
		t.Errorf("defaults: %+v", d)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	j := open(t, dir, opts)
	_, err := Open(dir, opts)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v", err)
	}
	for _, s := range []string{dir, fmt.Sprintf("pid %d", os.Getpid()), "another memfs process"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("lock error %q does not mention %q", err, s)
		}
	}
	closeJ(t, j)
	j2 := open(t, dir, opts)
	closeJ(t, j2)
}

func TestCloseStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t)
	opts, _ := testOpts()
	opts.GroupCommit = 10 * time.Second // Close must not wait for the window
	j, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	lsn := put(t, j, "f", "/f.md", "x")
	start := time.Now()
	closeJ(t, j)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if got := j.Stats().SyncedLSN; got != lsn {
		t.Fatalf("Close did not fdatasync: synced %d, want %d", got, lsn)
	}
	if _, err := j.Put("f", "/f.md", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if _, err := j.Delete("f", "/f.md"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Delete after Close: %v", err)
	}
	if err := j.Confirm("f", lsn, "m", "s", "/f.md"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Confirm after Close: %v", err)
	}
	if err := j.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if err := j.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestGroupCommit(t *testing.T) {
	opts, _ := testOpts()
	opts.GroupCommit = 10 * time.Second
	j := open(t, t.TempDir(), opts)
	lsn := put(t, j, "f", "/f.md", "x")
	if s := j.Stats(); s.SyncedLSN >= lsn {
		t.Fatalf("synced before the window or a Sync: %+v", s)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := j.Stats(); s.SyncedLSN != lsn {
		t.Fatalf("Sync did not sync: %+v", s)
	}

	opts.GroupCommit = 20 * time.Millisecond
	j2 := open(t, t.TempDir(), opts)
	lsn = put(t, j2, "f", "/f.md", "x")
	eventually(t, "the group commit to fdatasync", func() bool { return j2.Stats().SyncedLSN >= lsn })
}

// Concurrent callers, with compactions interleaved: the live state and a
// replay of the file must agree.
func TestConcurrentUseReplaysToTheSameState(t *testing.T) {
	dir := t.TempDir()
	opts, _ := testOpts()
	opts.GroupCommit = time.Millisecond
	opts.CompactMinBytes = 8 << 10
	j := open(t, dir, opts)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				id := fmt.Sprintf("w%d-f%d", w, i%7)
				if i%5 == 0 {
					j.SetBase(id, "mem_"+id, "sha")
				}
				lsn, err := j.Put(id, "/"+id, []byte(strings.Repeat("x", i)))
				if err != nil {
					t.Error(err)
					return
				}
				switch i % 4 {
				case 1:
					if err := j.Confirm(id, lsn, "mem_"+id, fmt.Sprint("sha", lsn), "/"+id); err != nil {
						t.Error(err)
					}
				case 2:
					if _, err := j.Delete(id, "/"+id); err != nil {
						t.Error(err)
					}
				case 3:
					if err := j.Sync(); err != nil {
						t.Error(err)
					}
					j.Pending()
				}
			}
		}()
	}
	wg.Wait()
	want := j.Pending()
	closeJ(t, j)
	j = open(t, dir, opts)
	if got := j.Pending(); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay differs from the live state:\n got %+v\nwant %+v", got, want)
	}
}
