package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// vb builds versions newest first, as the API lists them: each call adds
// an older one.
type vb struct{ vs []store.Version }

func ptr[T any](v T) *T { return &v }

func (b *vb) add(id, mem, op, path, content string, at int, by string) *vb {
	v := store.Version{ID: id, MemoryID: mem, Operation: op, CreatedAt: t0.Add(time.Duration(at) * time.Minute)}
	if op != store.OpDeleted {
		v.Path, v.Content = ptr(path), ptr(content)
		v.ContentSHA256, v.ContentSizeBytes = ptr("sha-"+content), ptr(int64(len(content)))
	}
	if strings.HasPrefix(by, "sesn_") {
		v.CreatedBy = &store.Actor{Type: store.ActorSession, SessionID: by}
	} else {
		v.CreatedBy = &store.Actor{Type: store.ActorAPI, APIKeyID: by}
	}
	b.vs = append([]store.Version{v}, b.vs...)
	return b
}

func (b *vb) redact(id string) *vb {
	for i := range b.vs {
		if b.vs[i].ID == id {
			b.vs[i].Path, b.vs[i].Content, b.vs[i].ContentSHA256, b.vs[i].ContentSizeBytes = nil, nil, nil, nil
			b.vs[i].RedactedAt = ptr(t0.Add(time.Hour))
		}
	}
	return b
}

func paths(s Snapshot) string {
	var out []string
	for _, e := range s.Entries {
		out = append(out, e.Path+"="+e.VersionID)
	}
	return strings.Join(out, " ")
}

func TestSnapshotOf(t *testing.T) {
	// a: created, edited, moved to /z; b: created, deleted; c: created
	// later; d: its version at minute 4 redacted.
	b := (&vb{}).
		add("v1", "a", store.OpCreated, "/a", "a1", 1, "k").
		add("v2", "b", store.OpCreated, "/b", "b1", 2, "k").
		add("v3", "a", store.OpModified, "/a", "a2", 3, "k").
		add("v4", "d", store.OpCreated, "/d", "d1", 4, "k").
		add("v5", "b", store.OpDeleted, "", "", 5, "k").
		add("v6", "a", store.OpModified, "/z", "a2", 6, "k").
		add("v7", "d", store.OpModified, "/d", "d2", 7, "k").
		add("v8", "c", store.OpCreated, "/b", "c1", 8, "k").
		redact("v4")
	for _, c := range []struct {
		at       int
		want     string
		redacted string
	}{
		{0, "", ""},
		{1, "/a=v1", ""},
		{2, "/a=v1 /b=v2", ""},
		{3, "/a=v3 /b=v2", ""},
		{4, "/a=v3 /b=v2", "d"},
		{5, "/a=v3", "d"},
		{6, "/z=v6", "d"},
		{7, "/d=v7 /z=v6", ""},
		{8, "/b=v8 /d=v7 /z=v6", ""}, // /b again: a new memory
		{60, "/b=v8 /d=v7 /z=v6", ""},
	} {
		s := SnapshotOf(b.vs, t0.Add(time.Duration(c.at)*time.Minute))
		if got := paths(s); got != c.want || strings.Join(s.Redacted, ",") != c.redacted {
			t.Errorf("at minute %d: %q, redacted %v; want %q, redacted %q", c.at, got, s.Redacted, c.want, c.redacted)
		}
	}
	// A moment between two versions is the earlier's.
	if got := paths(SnapshotOf(b.vs, t0.Add(3*time.Minute-time.Nanosecond))); got != "/a=v1 /b=v2" {
		t.Errorf("just before minute 3: %q", got)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-12-01T09:30:00Z":        time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC),
		"2026-12-01T09:30:00.5+01:00": time.Date(2026, 12, 1, 8, 30, 0, 5e8, time.UTC),
		"2h":                          now.Add(-2 * time.Hour),
		"1h30m":                       now.Add(-90 * time.Minute),
		"3d":                          now.Add(-72 * time.Hour),
		" 90s ":                       now.Add(-90 * time.Second),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-2h", "2026-12-01", "3.5d", "memver_01"} {
		if _, err := ParseTime(bad, now); err == nil {
			t.Errorf("ParseTime(%q) took it", bad)
		}
	}
}

func stepsString(p Plan) string {
	var out []string
	for _, s := range p.Steps {
		line := fmt.Sprintf("%s:%s %s>%s", s.MemoryID, s.Action, s.Path, s.To)
		if s.Back != nil {
			line += "@" + s.Back.ID
		}
		if s.Skip != "" {
			line += " skip(" + s.Skip + ")"
		}
		if s.Forced {
			line += " forced"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestPlanRevertSession(t *testing.T) {
	const S, O = "sesn_S", "sesn_O"
	h := map[string][]store.Version{
		// created by S: deleted.
		"new": (&vb{}).add("n1", "new", store.OpCreated, "/new", "x", 10, S).add("n2", "new", store.OpModified, "/new", "y", 11, S).vs,
		// edited twice by S: back to before its first edit.
		"ed": (&vb{}).add("e1", "ed", store.OpCreated, "/ed", "e0", 1, "k").add("e2", "ed", store.OpModified, "/ed", "e1", 10, S).add("e3", "ed", store.OpModified, "/ed", "e2", 12, S).vs,
		// moved by S: moved back.
		"mv": (&vb{}).add("m1", "mv", store.OpCreated, "/mv", "m", 1, "k").add("m2", "mv", store.OpModified, "/moved", "m", 10, S).vs,
		// deleted by S: made again.
		"gone": (&vb{}).add("g1", "gone", store.OpCreated, "/gone", "g", 1, "k").add("g2", "gone", store.OpDeleted, "", "", 10, S).vs,
		// edited by S, then by O: left alone.
		"both": (&vb{}).add("b1", "both", store.OpCreated, "/both", "b0", 1, "k").add("b2", "both", store.OpModified, "/both", "b1", 10, S).add("b3", "both", store.OpModified, "/both", "b2", 20, O).vs,
		// edited by S and back again by S: nothing to do.
		"same": (&vb{}).add("s1", "same", store.OpCreated, "/same", "s0", 1, "k").add("s2", "same", store.OpModified, "/same", "s1", 10, S).add("s3", "same", store.OpModified, "/same", "s0", 11, S).vs,
		// never touched by S: not in the plan.
		"other": (&vb{}).add("o1", "other", store.OpCreated, "/other", "o", 1, O).vs,
		// its version before S's edit is redacted.
		"red": (&vb{}).add("r1", "red", store.OpCreated, "/red", "r0", 1, "k").add("r2", "red", store.OpModified, "/red", "r1", 10, S).redact("r1").vs,
	}
	live := lives("/new", "new", "/ed", "ed", "/moved", "mv", "/both", "both", "/same", "same", "/other", "other", "/red", "red")
	got := stepsString(planRevert(Scope{SessionID: S}, h, live, false))
	want := strings.Join([]string{
		"both:restore /both>/both@b1 skip(changed since by session:sesn_O at 2026-12-01T09:20:00Z)",
		"ed:restore /ed>/ed@e1",
		"gone:recreate >/gone@g1",
		"mv:restore /moved>/mv@m1",
		"new:delete /new>",
		"red:restore /red>@r1 skip(the version to go back to (r1) is redacted)",
		"same:none /same>/same@s1",
	}, "\n")
	if got != want {
		t.Errorf("plan:\n%s\nwant:\n%s", got, want)
	}
	forced := stepsString(planRevert(Scope{SessionID: S}, h, live, true))
	if !strings.Contains(forced, "both:restore /both>/both@b1 forced") {
		t.Errorf("--force plan:\n%s", forced)
	}
}

// lives is the store now: path, memory id, ... (each holding sha-ID).
func lives(kv ...string) map[string]Live {
	out := map[string]Live{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = Live{ID: kv[i+1], SHA256: "sha-" + kv[i+1]}
	}
	return out
}

func TestPlanRevertPaths(t *testing.T) {
	const S = "sesn_S"
	h := map[string][]store.Version{
		// S moved /a to /b and created a new /a: the delete frees /a.
		"a":    (&vb{}).add("a1", "a", store.OpCreated, "/a", "a", 1, "k").add("a2", "a", store.OpModified, "/b", "a", 10, S).vs,
		"newa": (&vb{}).add("x1", "newa", store.OpCreated, "/a", "x", 11, S).vs,
		// S deleted /c; someone else made a new /c since: taken.
		"c": (&vb{}).add("c1", "c", store.OpCreated, "/c", "c", 1, "k").add("c2", "c", store.OpDeleted, "", "", 10, S).vs,
	}
	live := lives("/b", "a", "/a", "newa", "/c", "c-new")
	got := stepsString(planRevert(Scope{SessionID: S}, h, live, false))
	want := strings.Join([]string{
		"newa:delete /a>",
		"a:restore /b>/a@a1",
		"c:recreate >/c@c1 skip(its path then, /c, is taken by c-new)",
	}, "\n")
	if got != want {
		t.Errorf("plan:\n%s\nwant:\n%s", got, want)
	}
	// /c made again by an earlier revert, with the content it goes back
	// to: nothing more to do.
	live["/c"] = Live{ID: "c-again", SHA256: "sha-c"}
	if got := stepsString(planRevert(Scope{SessionID: S}, h, live, false)); !strings.Contains(got, "c:none >/c@c1") || strings.Contains(got, "skip") {
		t.Errorf("plan with /c made again:\n%s", got)
	}
}

func TestPlanRevertSince(t *testing.T) {
	h := map[string][]store.Version{
		"a": (&vb{}).add("a1", "a", store.OpCreated, "/a", "a0", 1, "k").add("a2", "a", store.OpModified, "/a", "a1", 10, "sesn_1").add("a3", "a", store.OpModified, "/a", "a2", 20, "sesn_2").vs,
		"b": (&vb{}).add("b1", "b", store.OpCreated, "/b", "b", 1, "k").vs,
	}
	live := lives("/a", "a", "/b", "b")
	// Since minute 5: both later edits go, whoever made them; b is untouched.
	got := stepsString(planRevert(Scope{Since: t0.Add(5 * time.Minute)}, h, live, false))
	if got != "a:restore /a>/a@a1" {
		t.Errorf("plan since minute 5: %q", got)
	}
	// Since minute 10 exactly: the edit at minute 10 is not after it.
	if got := stepsString(planRevert(Scope{Since: t0.Add(10 * time.Minute)}, h, live, false)); got != "a:restore /a>/a@a2" {
		t.Errorf("plan since minute 10: %q", got)
	}
}

// fakeSource serves a history of versions (newest first) as the API
// would: the versions listing with its filters, and the memories now.
type fakeSource struct {
	vs   []store.Version
	full bool // the whole versions listing up to a time was asked for
}

func (f *fakeSource) GetStore(ctx context.Context, id string) (*store.Store, error) {
	return &store.Store{ID: id, Name: "s"}, nil
}

func (f *fakeSource) ListVersions(ctx context.Context, storeID string, opts store.ListVersionsOptions) (store.Page[store.Version], error) {
	if opts.CreatedLTE != nil && opts.MemoryID == "" {
		f.full = true
	}
	var p store.Page[store.Version]
	for _, v := range f.vs {
		switch {
		case opts.CreatedLTE != nil && v.CreatedAt.After(*opts.CreatedLTE),
			opts.CreatedGTE != nil && v.CreatedAt.Before(*opts.CreatedGTE),
			opts.MemoryID != "" && v.MemoryID != opts.MemoryID:
			continue
		}
		p.Data = append(p.Data, v)
		if opts.Limit == 1 {
			break
		}
	}
	return p, nil
}

func (f *fakeSource) GetVersion(ctx context.Context, storeID, id string) (*store.Version, error) {
	for _, v := range f.vs {
		if v.ID == id {
			return &v, nil
		}
	}
	return nil, store.Errorf(store.ErrNotFound, "no %s", id)
}

// ListMemories lists the store now, as an AsOf of it lists.
func (f *fakeSource) ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	now := &AsOf{storeID: storeID, snap: SnapshotOf(f.vs, t0.Add(1000*time.Hour))}
	return now.ListMemories(ctx, storeID, opts)
}

// TestBuildSnapshotBothWays builds a store of 300 memories as it was at
// moments of a history of creates, edits, moves and deletes, both from
// the store now (few changes since) and from the versions listing (many),
// and checks each against SnapshotOf of the whole history.
func TestBuildSnapshotBothWays(t *testing.T) {
	b := &vb{}
	n := 0
	next := func() string { n++; return fmt.Sprintf("v%05d", n) }
	minute := 0
	for i := 0; i < 300; i++ {
		b.add(next(), fmt.Sprintf("m%03d", i), store.OpCreated, fmt.Sprintf("/d%d/m%03d", i%7, i), "c0", minute, "k")
	}
	for round := 1; round <= 3; round++ {
		minute += 10
		for i := 0; i < 300; i += round {
			id := fmt.Sprintf("m%03d", i)
			switch (i / 2) % 3 {
			case 0:
				b.add(next(), id, store.OpModified, fmt.Sprintf("/d%d/m%03d", i%7, i), fmt.Sprintf("c%d", round), minute, "k")
			case 1:
				b.add(next(), id, store.OpModified, fmt.Sprintf("/moved%d/m%03d", round, i), "c0", minute, "k")
			}
		}
	}
	minute += 10
	b.add(next(), "m001", store.OpDeleted, "", "", minute, "k")
	b.add(next(), "late", store.OpCreated, "/late", "l", minute+1, "k")
	ctx := context.Background()
	for _, c := range []struct {
		minute  int
		fromNow bool
	}{{0, false}, {15, false}, {25, false}, {35, true}, {minute, true}, {minute + 5, true}} {
		at := t0.Add(time.Duration(c.minute)*time.Minute + time.Second)
		src := &fakeSource{vs: b.vs}
		got, err := BuildSnapshot(ctx, src, "memstore_1", at)
		if err != nil {
			t.Fatal(err)
		}
		want := SnapshotOf(b.vs, at)
		if paths(got) != paths(want) || len(got.Entries) == 0 {
			t.Errorf("at minute %d: built %d entries, want %d:\n%s\nwant\n%s", c.minute, len(got.Entries), len(want.Entries), paths(got), paths(want))
		}
		if viaNow := !src.full; viaNow != c.fromNow {
			t.Errorf("at minute %d: built from the store now: %v, want %v", c.minute, viaNow, c.fromNow)
		}
	}
}

func TestAsOfListsAsTheAPI(t *testing.T) {
	b := (&vb{}).
		add("v1", "r", store.OpCreated, "/root.md", "r", 1, "k").
		add("v2", "x", store.OpCreated, "/d/x.md", "x", 2, "k").
		add("v3", "y", store.OpCreated, "/d/e/y.md", "y", 3, "k").
		add("v4", "z", store.OpCreated, "/f/z.md", "z", 4, "k").
		add("v5", "z", store.OpModified, "/f/z.md", "z2", 9, "k")
	src := &fakeSource{vs: b.vs}
	ctx := context.Background()
	a, err := NewAsOf(ctx, src, "memstore_1", t0.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	list := func(opts store.ListMemoriesOptions) string {
		p, err := a.ListMemories(ctx, "memstore_1", opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range p.Data {
			if it.Memory != nil {
				out = append(out, it.Memory.Path)
			} else {
				out = append(out, it.Prefix+"…")
			}
		}
		return strings.Join(out, " ")
	}
	if got := list(store.ListMemoriesOptions{Depth: 1}); got != "/d/… /f/… /root.md" {
		t.Errorf("depth 1: %q", got)
	}
	if got := list(store.ListMemoriesOptions{PathPrefix: "/d/"}); got != "/d/e/y.md /d/x.md" {
		t.Errorf("under /d/: %q", got)
	}
	if got := list(store.ListMemoriesOptions{PathPrefix: "/d/", Depth: 1}); got != "/d/e/… /d/x.md" {
		t.Errorf("under /d/ at depth 1: %q", got)
	}
	m, err := a.GetMemory(ctx, "memstore_1", "z")
	if err != nil || *m.Content != "z" || m.MemoryVersionID != "v4" {
		t.Errorf("GetMemory(z) = %+v, %v; want v4's content", m, err)
	}
	if _, err := a.GetMemory(ctx, "memstore_1", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMemory of a memory not there then: %v", err)
	}
	if p, err := a.ListVersions(ctx, "memstore_1", store.ListVersionsOptions{}); err != nil || len(p.Data) != 0 {
		t.Errorf("ListVersions = %v, %v; want nothing new, ever", p.Data, err)
	}
	if _, err := a.Changes(ctx, "memstore_1", 0, 10, 0); !errors.Is(err, store.ErrFeedUnsupported) {
		t.Errorf("Changes: %v", err)
	}
	if _, err := a.CreateMemory(ctx, "memstore_1", "/n.md", "n"); !errors.Is(err, store.ErrForbidden) {
		t.Errorf("CreateMemory: %v, want refused", err)
	}
	if _, err := a.ListMemories(ctx, "memstore_2", store.ListMemoriesOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another store: %v", err)
	}
}

// listLikeAMount lists a as a mount's load does: the root at depth 1,
// then each prefix.
func listLikeAMount(t *testing.T, a *AsOf) {
	t.Helper()
	ctx := context.Background()
	p, err := a.ListMemories(ctx, a.storeID, store.ListMemoriesOptions{Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Data {
		if it.Prefix != "" {
			if _, err := a.ListMemories(ctx, a.storeID, store.ListMemoriesOptions{PathPrefix: it.Prefix}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAsOfAsNow: with no version after the time, the store's own listing
// is the snapshot (one listing), and Verify confirms it, unless a version
// is made after the time before it runs.
func TestAsOfAsNow(t *testing.T) {
	b := (&vb{}).
		add("v1", "r", store.OpCreated, "/root.md", "r", 1, "k").
		add("v2", "x", store.OpCreated, "/d/x.md", "x", 2, "k").
		add("v3", "y", store.OpCreated, "/d/e/y.md", "y", 3, "k").
		add("v4", "x", store.OpModified, "/d/x.md", "x2", 4, "k")
	src := &fakeSource{vs: b.vs}
	ctx := context.Background()
	at := t0.Add(5 * time.Minute)
	a, err := NewAsOf(ctx, src, "memstore_1", at)
	if err != nil || !a.asNow {
		t.Fatalf("NewAsOf with nothing since: as now %v, %v", a != nil && a.asNow, err)
	}
	listLikeAMount(t, a)
	if got, want := paths(a.Snapshot()), paths(SnapshotOf(b.vs, at)); got != want {
		t.Errorf("as now, the listing gave %q, want %q", got, want)
	}
	if err := a.Verify(ctx); err != nil {
		t.Errorf("Verify with nothing since: %v", err)
	}
	m, err := a.GetMemory(ctx, "memstore_1", "x")
	if err != nil || *m.Content != "x2" {
		t.Errorf("GetMemory(x) = %+v, %v", m, err)
	}
	// A version made after the time while (or after) the mount listed:
	// what it listed may be newer; the mount must be made again.
	src.vs = (&vb{vs: src.vs}).add("v5", "z", store.OpCreated, "/z.md", "z", 6, "k").vs
	if err := a.Verify(ctx); !errors.Is(err, ErrChangedWhileRead) {
		t.Errorf("Verify with a version since: %v, want ErrChangedWhileRead", err)
	}
	// A listing that shows a memory changed after the time fails Verify
	// even once that version is redacted away from the filter's view.
	a2 := &AsOf{src: src, storeID: "memstore_1", at: at, asNow: true, byID: map[string]*Entry{}}
	listLikeAMount(t, a2)
	src.vs = b.vs
	if err := a2.Verify(ctx); !errors.Is(err, ErrChangedWhileRead) {
		t.Errorf("Verify after listing a memory newer than the time: %v, want ErrChangedWhileRead", err)
	}
	// From the versions: never as now, Verify always true.
	a3, err := NewAsOfFromVersions(ctx, src, "memstore_1", at)
	if err != nil || a3.asNow || a3.Verify(ctx) != nil || paths(a3.Snapshot()) != paths(SnapshotOf(b.vs, at)) {
		t.Errorf("NewAsOfFromVersions: %v", err)
	}
}
