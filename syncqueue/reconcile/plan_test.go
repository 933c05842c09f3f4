package reconcile

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestPlanUploads(t *testing.T) {
	cases := []struct {
		name  string
		items []PlanItem
		pass  PlanPass
		want  UploadPlan
	}{
		{"a create, an update and a delete",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/a"}, {FileID: "m2", LSN: 2, Path: "/b", Origin: "mem_2"}, {FileID: "m3", LSN: 3, Path: "/c", Origin: "mem_3", Deleted: true}},
			PlanPass{Now: t0},
			UploadPlan{Ops: []UploadOp{{UploadCreate, 0, -1}, {UploadUpdate, 1, -1}}, Deletes: []int{2}}},
		{"delete folded into create: an atomic save is one update of the memory",
			[]PlanItem{{FileID: "m1", LSN: 1, Path: "/notes.md", Origin: "mem_1", Deleted: true}, {FileID: "l2", LSN: 2, Path: "/notes.md"}},
			PlanPass{Now: t0},
			UploadPlan{Ops: []UploadOp{{UploadUpdate, 1, 0}}}},
		{"delete folded into create: only one delete per create",
			[]PlanItem{{FileID: "l2", LSN: 3, Path: "/x"}, {FileID: "m1", LSN: 1, Path: "/x", Origin: "mem_1", Deleted: true}, {FileID: "m9", LSN: 2, Path: "/x", Origin: "mem_9", Deleted: true}},
			PlanPass{Now: t0},
			UploadPlan{Ops: []UploadOp{{UploadUpdate, 0, 1}}, Deletes: []int{2}}},
		{"a file created and removed between passes sends nothing",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/a", Deleted: true}},
			PlanPass{Now: t0}, UploadPlan{}},
		{"a refused version waits until it changes",
			[]PlanItem{{FileID: "m1", LSN: 1, Path: "/a", Origin: "mem_1", Refused: true}},
			PlanPass{Now: t0}, UploadPlan{}},
		{"not UTF-8 is kept locally",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/a", NotUTF8: true}},
			PlanPass{Now: t0}, UploadPlan{NotUTF8: []int{0}}},
		{"a scratch create is held for its grace",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/.agenttoolset-1", Scratch: true, ScratchUntil: t0.Add(time.Second)}},
			PlanPass{Now: t0}, UploadPlan{}},
		{"a scratch create goes up after its grace",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/.agenttoolset-1", Scratch: true, ScratchUntil: t0}},
			PlanPass{Now: t0}, UploadPlan{Ops: []UploadOp{{UploadCreate, 0, -1}}}},
		{"final: a scratch create goes up within its grace",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/.agenttoolset-1", Scratch: true, ScratchUntil: t0.Add(time.Second)}},
			PlanPass{Now: t0, Final: true}, UploadPlan{Ops: []UploadOp{{UploadCreate, 0, -1}}}},
		{"cap: with the store at its cap, creates wait apart, updates go",
			[]PlanItem{{FileID: "l1", LSN: 1, Path: "/a"}, {FileID: "m2", LSN: 2, Path: "/b", Origin: "mem_2"}, {FileID: "m3", LSN: 3, Path: "/c", Origin: "mem_3", Deleted: true}, {FileID: "l4", LSN: 4, Path: "/c"}},
			PlanPass{Now: t0, CapFull: true},
			UploadPlan{Ops: []UploadOp{{UploadUpdate, 1, -1}, {UploadUpdate, 3, 2}}, AtCap: []UploadOp{{UploadCreate, 0, -1}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PlanUploads(c.items, c.pass); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("PlanUploads:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestOldestFirst(t *testing.T) {
	xs := []PlanItem{{LSN: 3}, {LSN: 1}, {LSN: 2}}
	OldestFirst(xs, func(it PlanItem) uint64 { return it.LSN })
	if xs[0].LSN != 1 || xs[1].LSN != 2 || xs[2].LSN != 3 {
		t.Fatalf("OldestFirst: %+v", xs)
	}
}

func TestDeleteCap(t *testing.T) {
	for size, want := range map[int]int{0: 8, 1: 8, 32: 8, 36: 9, 100: 25, 200: 50, 201: 50, 10000: 50} {
		if got := DeleteCap(size); got != want {
			t.Errorf("DeleteCap(%d) = %d, want %d", size, got, want)
		}
	}
}

func dels(n int) []PendingDelete {
	var ds []PendingDelete
	for i := n; i > 0; i-- { // newest first: Due comes back oldest first
		ds = append(ds, PendingDelete{FileID: string(rune('a'+i%26)) + string(rune('a'+i/26)), LSN: uint64(i)})
	}
	return ds
}

func TestPlanDeletes(t *testing.T) {
	d := []PendingDelete{{FileID: "m1", LSN: 5}}
	seen := map[string]DeleteWatch{"m1": {LSN: 5, Pass: 1, At: t0}}
	base := DeleteRound{Pending: d, Send: true, Delay: 30 * time.Second, StoreSize: 10, LocalFiles: 3}
	at := func(r DeleteRound, pass int, dt time.Duration) DeleteRound {
		r.Pass, r.Now = pass, t0.Add(dt)
		return r
	}
	with := func(r DeleteRound, f func(*DeleteRound)) DeleteRound { f(&r); return r }

	cases := []struct {
		name    string
		r       DeleteRound
		due     []int
		guard   bool
		watches map[string]DeleteWatch
	}{
		{"30s: first seen, not due; the watch starts", at(base, 1, 0), nil, false, seen},
		{"30s: a later pass before 30 s, not due", at(with(base, func(r *DeleteRound) { r.Watches = seen }), 2, 29*time.Second), nil, false, seen},
		{"30s: a later pass at 30 s, due", at(with(base, func(r *DeleteRound) { r.Watches = seen }), 2, 30*time.Second), []int{0}, false, seen},
		{"confirming pass: 30 s but the same pass that first saw it, not due", at(with(base, func(r *DeleteRound) { r.Watches = seen }), 1, time.Minute), nil, false, seen},
		{"confirming pass: a newer version of the delete starts again", at(with(base, func(r *DeleteRound) {
			r.Watches = map[string]DeleteWatch{"m1": {LSN: 4, Pass: 1, At: t0.Add(-time.Hour)}}
		}), 2, 0), nil, false, map[string]DeleteWatch{"m1": {LSN: 5, Pass: 2, At: t0}}},
		{"reappeared: the watch of a delete no longer pending ends", at(with(base, func(r *DeleteRound) {
			r.Pending, r.Watches = nil, seen
		}), 2, time.Minute), nil, false, map[string]DeleteWatch{}},
		{"quiet pass: no delete sent, no watch started", at(with(base, func(r *DeleteRound) { r.Send = false }), 1, 0), nil, false, map[string]DeleteWatch{}},
		{"unclean end: no delete sent, even one long due", at(with(base, func(r *DeleteRound) { r.Send, r.Watches = false, seen }), 9, time.Hour), nil, false, seen},
		{"final: a clean end waives 30 s and the confirming pass", at(with(base, func(r *DeleteRound) { r.Waive = true }), 1, 0), []int{0}, false, seen},
		{"wipe guard: every file gone, the store had two or more", at(with(base, func(r *DeleteRound) {
			r.Pending, r.StoreSize, r.LocalFiles, r.Waive = []PendingDelete{{"m1", 5}, {"m2", 6}}, 2, 0, true
		}), 1, 0), nil, true, map[string]DeleteWatch{}},
		{"wipe guard: not with a file left", at(with(base, func(r *DeleteRound) {
			r.Pending, r.StoreSize, r.LocalFiles, r.Waive = []PendingDelete{{"m1", 5}, {"m2", 6}}, 2, 1, true
		}), 1, 0), []int{0, 1}, false, map[string]DeleteWatch{"m1": {5, 1, t0}, "m2": {6, 1, t0}}},
		{"wipe guard: not for a store of one", at(with(base, func(r *DeleteRound) {
			r.StoreSize, r.LocalFiles, r.Waive = 1, 0, true
		}), 1, 0), []int{0}, false, seen},
		{"wipe guard: not when the deletes leave memories in the store", at(with(base, func(r *DeleteRound) {
			r.Pending, r.StoreSize, r.LocalFiles, r.Waive = []PendingDelete{{"m1", 5}, {"m2", 6}}, 3, 0, true
		}), 1, 0), []int{0, 1}, false, map[string]DeleteWatch{"m1": {5, 1, t0}, "m2": {6, 1, t0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := PlanDeletes(c.r)
			if !reflect.DeepEqual(pl.Due, c.due) || pl.Guard != c.guard || !reflect.DeepEqual(pl.Watches, c.watches) {
				t.Fatalf("PlanDeletes: due %v guard %v watches %v, want due %v guard %v watches %v", pl.Due, pl.Guard, pl.Watches, c.due, c.guard, c.watches)
			}
		})
	}
}

// TestPlanDeletesCap: one pass sends at most the cap, oldest first; the
// final sync too.
func TestPlanDeletesCap(t *testing.T) {
	for _, c := range []struct {
		name                 string
		pending, store, sent int
		waive                bool
	}{
		{"cap: a small store sends 8", 20, 21, 8, false},
		{"cap: a quarter of the store", 100, 160, 40, false},
		{"cap: at most 50", 300, 1000, 50, false},
		{"cap: final sync keeps the cap", 300, 1000, 50, true},
		{"cap: under the cap all go", 5, 100, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := DeleteRound{Pending: dels(c.pending), Send: true, Waive: c.waive, Now: t0.Add(time.Minute), Pass: 2, Delay: 30 * time.Second,
				StoreSize: c.store, LocalFiles: 1, Watches: map[string]DeleteWatch{}}
			for _, d := range r.Pending {
				r.Watches[d.FileID] = DeleteWatch{LSN: d.LSN, Pass: 1, At: t0}
			}
			pl := PlanDeletes(r)
			if len(pl.Due) != c.sent || pl.HeldBack != c.pending-c.sent {
				t.Fatalf("due %d held back %d, want %d and %d", len(pl.Due), pl.HeldBack, c.sent, c.pending-c.sent)
			}
			for k, i := range pl.Due {
				if r.Pending[i].LSN != uint64(k+1) {
					t.Fatalf("due[%d] is LSN %d: not oldest first", k, r.Pending[i].LSN)
				}
			}
		})
	}
}

func TestDeleteModes(t *testing.T) {
	for m, want := range map[DeleteMode]DeleteDisposal{DeleteEnabled: DeleteSend, DeleteLogOnly: DeleteLogSettle, DeleteDisabled: DeleteSettleOnly} {
		if got := m.Disposal(); got != want {
			t.Errorf("mode %d: disposal %d, want %d", m, got, want)
		}
	}
}

func TestChooseParked(t *testing.T) {
	cases := []struct {
		name    string
		blocked []BlockedMove
		want    int
	}{
		{"cycle: mv a b; mv b a parks the first", []BlockedMove{{Path: "/b", StorePath: "/a"}, {Path: "/a", StorePath: "/b"}}, 0},
		{"cycle: a create has nothing to park", []BlockedMove{{Create: true, Path: "/b"}, {Path: "/a", StorePath: "/b"}, {Path: "/b", StorePath: "/a"}}, 1},
		{"cycle: a file and a folder trading places", []BlockedMove{{Path: "/d", StorePath: "/f"}, {Path: "/f/x", StorePath: "/d/x"}}, 0},
		{"cycle: a memory whose store path is unknown is skipped", []BlockedMove{{Path: "/b"}, {Path: "/a", StorePath: "/b"}}, 1},
		{"cycle: only unknown memories", []BlockedMove{{Path: "/b"}, {Path: "/a"}}, -1},
		{"cycle: blocked by something outside the pass, nothing to park", []BlockedMove{{Path: "/b", StorePath: "/a"}, {Path: "/c", StorePath: "/d"}}, -1},
		{"cycle: only creates", []BlockedMove{{Create: true, Path: "/a"}, {Create: true, Path: "/a"}}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i, ok := ChooseParked(c.blocked)
			if i != c.want || ok != (c.want >= 0) {
				t.Fatalf("ChooseParked = %d, %v; want %d", i, ok, c.want)
			}
		})
	}
}

func TestParkPath(t *testing.T) {
	if got, want := ParkPath("mem_1", []byte{0xde, 0xad, 0xbe, 0xef}), "/.memfs-moving-mem_1-deadbeef"; got != want {
		t.Fatalf("ParkPath = %q, want %q", got, want)
	}
}

func TestPathsCollide(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"/a", "/a", true}, {"/a", "/a/b", true}, {"/a/b", "/a", true}, {"/a", "/ab", false}, {"/a", "/b", false}} {
		if got := PathsCollide(c.a, c.b); got != c.want {
			t.Errorf("PathsCollide(%q, %q) = %v", c.a, c.b, got)
		}
	}
}
