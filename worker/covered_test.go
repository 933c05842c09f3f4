package worker

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/fs"
)

func testCover(id int, dir string, inside bool) fs.Cover {
	return fs.Cover{MountInfo: fs.MountInfo{Dir: dir, FSType: "ext4", Source: "/dev/sda1"}, ID: id, Root: "/", Inside: inside}
}

// coverMetrics records Covered; coverReport calls nothing else of
// StoreMetrics (the embedded nil interface would panic).
type coverMetrics struct {
	StoreMetrics
	n []int
}

func (c *coverMetrics) Covered(n int) { c.n = append(c.n, n) }

// TestCoverReport: one error line when a cover appears, naming it, one
// info line when it goes, nothing for a cover already reported; the
// metrics follow the count.
func TestCoverReport(t *testing.T) {
	log, hook := test.NewNullLogger()
	cm := &coverMetrics{}
	r := &coverReport{log: log.WithField("store", "memstore_a"), metrics: cm}
	over := testCover(41, "/mnt/memory/notes", false)
	over.Root = "/tmp/fake" // a bind mount
	inside := testCover(42, "/mnt/memory/notes/sub", true)

	r.changed([]fs.Cover{over})
	r.changed([]fs.Cover{inside, over})
	r.changed([]fs.Cover{inside})
	r.changed(nil)

	var got []string
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level.String()+": "+e.Message+" cover="+e.Data["cover"].(string))
	}
	want := []string{
		"error: something is mounted over the store's mount path: /mnt/memory/notes (ext4 /dev/sda1[/tmp/fake]); the agent may see files that are not the store's cover=/mnt/memory/notes",
		"error: something is mounted inside the store's mount path: /mnt/memory/notes/sub (ext4 /dev/sda1); the agent may see files that are not the store's cover=/mnt/memory/notes/sub",
		"info: /mnt/memory/notes is no longer mounted over the store's mount path cover=/mnt/memory/notes",
		"info: /mnt/memory/notes/sub is no longer mounted inside the store's mount path cover=/mnt/memory/notes/sub",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e := hook.AllEntries()[0]; e.Data["store"] != "memstore_a" || e.Data["cover_type"] != "ext4" || e.Data["cover_source"] != "/dev/sda1[/tmp/fake]" {
		t.Errorf("the error line's fields: %v", e.Data)
	}
	if got := cm.n; len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 1 || got[3] != 0 {
		t.Errorf("Covered was told %v, want [1 2 1 0]", got)
	}
}

// TestCoverChanges: covers are told apart by mount id and mount point; a
// mount id reused at another path is a new cover.
func TestCoverChanges(t *testing.T) {
	a, b := testCover(41, "/m/a", false), testCover(42, "/m/a/b", true)
	reused := testCover(41, "/m/a/c", true)
	for _, tc := range []struct {
		name           string
		before, after  []fs.Cover
		appeared, went string
	}{
		{"none", nil, nil, "", ""},
		{"one appears", nil, []fs.Cover{a}, "/m/a", ""},
		{"one more", []fs.Cover{a}, []fs.Cover{b, a}, "/m/a/b", ""},
		{"one goes", []fs.Cover{b, a}, []fs.Cover{a}, "", "/m/a/b"},
		{"same", []fs.Cover{a}, []fs.Cover{a}, "", ""},
		{"an id reused elsewhere", []fs.Cover{a}, []fs.Cover{reused}, "/m/a/c", "/m/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap, went := coverChanges(tc.before, tc.after)
			dirs := func(cs []fs.Cover) string {
				var out []string
				for _, c := range cs {
					out = append(out, c.Dir)
				}
				return strings.Join(out, " ")
			}
			if dirs(ap) != tc.appeared || dirs(went) != tc.went {
				t.Errorf("appeared %q, went %q; want %q, %q", dirs(ap), dirs(went), tc.appeared, tc.went)
			}
		})
	}
}
