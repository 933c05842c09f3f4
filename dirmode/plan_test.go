package dirmode

import (
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fstat is a stat of a regular file with inode ino, size and mtime.
func fstat(ino uint64, size, mtime int64) unix.Stat_t {
	return unix.Stat_t{Mode: unix.S_IFREG | 0o644, Ino: ino, Size: size, Nlink: 1,
		Mtim: unix.NsecToTimespec(mtime), Ctim: unix.NsecToTimespec(mtime)}
}

// ent is an entry on disk as recorded with st.
func ent(id, p string, st unix.Stat_t) *entry {
	r := recOf(id, p, "sha-"+id, st)
	return &entry{fileID: id, path: p, sha: "sha-" + id, rec: &r}
}

func describe(pl lookPlan) string {
	var out []string
	for _, e := range pl.changed {
		out = append(out, "changed "+e.path)
	}
	for _, m := range pl.moves {
		s := "moved " + m.e.path + " to " + m.to
		if m.replaced != nil {
			s += " replacing " + m.replaced.fileID
		}
		out = append(out, s)
	}
	for _, p := range pl.created {
		out = append(out, "created "+p)
	}
	for _, e := range pl.deleted {
		out = append(out, "deleted "+e.path)
	}
	for _, e := range pl.present {
		out = append(out, "present "+e.path)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func TestPlanLook(t *testing.T) {
	a, b := fstat(1, 10, 100), fstat(2, 20, 200)
	type tc struct {
		name    string
		entries []*entry
		files   map[string]unix.Stat_t
		blind   []string
		want    string
	}
	lazy := &entry{fileID: "l", path: "/l.md", sha: "sha-l", lazy: true}
	lazyAsRecorded := ent("r", "/r.md", b)
	lazyAsRecorded.lazy = true
	for _, c := range []tc{
		{"unchanged", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{"/a.md": a}, nil, ""},
		{"edited in place", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{"/a.md": fstat(1, 11, 101)}, nil, "changed /a.md"},
		{"saved by rename (a new inode)", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{"/a.md": fstat(9, 10, 100)}, nil, "changed /a.md"},
		{"moved", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{"/x/a.md": a}, nil, "moved /a.md to /x/a.md"},
		{"moved over another", []*entry{ent("a", "/a.md", a), ent("b", "/b.md", b)}, map[string]unix.Stat_t{"/b.md": a}, nil, "moved /a.md to /b.md replacing b"},
		{"swapped", []*entry{ent("a", "/a.md", a), ent("b", "/b.md", b)}, map[string]unix.Stat_t{"/b.md": a, "/a.md": b}, nil, "moved /a.md to /b.md; moved /b.md to /a.md"},
		{"a reused inode is no move", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{"/n.md": fstat(1, 3, 300)}, nil, "created /n.md; deleted /a.md"},
		{"moved away, new file at the old path", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{"/x.md": a, "/a.md": b}, nil, "created /a.md; moved /a.md to /x.md"},
		{"deleted", []*entry{ent("a", "/a.md", a)}, map[string]unix.Stat_t{}, nil, "deleted /a.md"},
		{"not gone below a folder not read", []*entry{ent("a", "/d/a.md", a)}, map[string]unix.Stat_t{}, []string{"/d"}, ""},
		{"waiting for content, absent", []*entry{lazy}, map[string]unix.Stat_t{}, nil, ""},
		{"waiting for content, a file there", []*entry{lazy}, map[string]unix.Stat_t{"/l.md": a}, nil, "changed /l.md"},
		{"waiting, as recorded with its content", []*entry{lazyAsRecorded}, map[string]unix.Stat_t{"/r.md": b}, nil, "present /r.md"},
	} {
		t.Run(c.name, func(t *testing.T) {
			byPath := map[string]*entry{}
			for _, e := range c.entries {
				byPath[e.path] = e
			}
			files := map[string]fileStat{}
			for p, st := range c.files {
				files[p] = statOf(st)
			}
			got := describe(planLook(byPath, &disk{files: files, blind: c.blind}))
			if got != c.want {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
}
