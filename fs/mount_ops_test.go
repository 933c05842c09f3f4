package fs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/store"
)

// The tests here walk the file operations of docs/operating.md
// ("Mounting a store", "Owners, modes and limits") on a real mount, through the shell or plain syscalls, as a user would.

var loadedMtime = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)

// loadedFiles is what every mount of these tests starts with.
func loadedFiles() []File {
	return []File{
		{FileID: "mem_a", Path: "/a.md", Content: []byte("alpha\n"), Mtime: loadedMtime},
		{FileID: "mem_b", Path: "/d/b.md", Content: []byte("beta\n"), Mtime: loadedMtime},
		{FileID: "mem_c", Path: "/d/sub/c.md", Content: []byte("gamma\n"), Mtime: loadedMtime},
	}
}

var loadedTree = map[string]string{"/a.md": "alpha\n", "/d/": "", "/d/b.md": "beta\n", "/d/sub/": "", "/d/sub/c.md": "gamma\n"}

// lastPuts maps each path put in ops to the content last put there.
func lastPuts(ops []journalOp) map[string]string {
	out := map[string]string{}
	for _, op := range ops {
		if op.Op == "put" {
			out[op.Path] = op.Content
		}
	}
	return out
}

func statT(t *testing.T, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return st
}

func readMountFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func TestMountOps(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		run  func(t *testing.T, m *testMount)
	}{
		{"read", Options{}, func(t *testing.T, m *testMount) {
			if out := m.mustSh(t, "cat a.md d/b.md d/sub/c.md"); out != "alpha\nbeta\ngamma\n" {
				t.Errorf("cat: %q", out)
			}
			// readdir has no "." and "..": POSIX lets a filesystem leave them out.
			if out := m.mustSh(t, "ls -A; ls d"); out != MarkerName+"\na.md\nd\nb.md\nsub\n" {
				t.Errorf("ls: %q", out)
			}
			if out := m.mustSh(t, "stat -c '%F %s %a' a.md d"); out != "regular file 6 644\ndirectory 4096 755\n" {
				t.Errorf("stat: %q", out)
			}
			m.shFails(t, "cat nope.md", "No such file or directory")
			wantOps(t, m.j)
		}},
		{"write and truncate", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "printf hello > n.md && printf ' world' >> n.md")
			if got := readMountFile(t, m.path("/n.md")); got != "hello world" {
				t.Errorf("content %q", got)
			}
			if got := lastPuts(m.j.take()); got["/n.md"] != "hello world" {
				t.Errorf("journal %v: want /n.md last put as %q", got, "hello world")
			}
			m.mustSh(t, "truncate -s 3 n.md && echo X > a.md")
			if got := lastPuts(m.j.take()); got["/n.md"] != "hel" || got["/a.md"] != "X\n" {
				t.Errorf("journal after truncate and overwrite: %v", got)
			}
			if got := readMountFile(t, m.path("/a.md")); got != "X\n" {
				t.Errorf("a.md after > : %q", got)
			}
			if id := treeFileID(t, m.tr, "/a.md"); id != "mem_a" {
				t.Errorf("overwriting a.md changed its id to %s", id)
			}
		}},
		{"close journals the whole content once, before it returns", Options{}, func(t *testing.T, m *testMount) {
			f, err := os.Create(m.path("/n.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"one ", "two ", "three"} {
				if _, err := f.WriteString(s); err != nil {
					t.Fatal(err)
				}
			}
			wantOps(t, m.j) // not before close
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantOps(t, m.j, putOp(treeFileID(t, m.tr, "/n.md"), "/n.md", "one two three"))
			// A reader's close journals nothing.
			if got := readMountFile(t, m.path("/n.md")); got != "one two three" {
				t.Errorf("content %q", got)
			}
			wantOps(t, m.j)
		}},
		{"fsync and fdatasync reach the journal's disk", Options{}, func(t *testing.T, m *testMount) {
			f, err := os.OpenFile(m.path("/a.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("more\n"); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			wantOps(t, m.j, putOp("mem_a", "/a.md", "alpha\nmore\n"), journalOp{Op: "sync"})
			if _, err := f.WriteString("again\n"); err != nil {
				t.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				t.Fatal(err)
			}
			wantOps(t, m.j, putOp("mem_a", "/a.md", "alpha\nmore\nagain\n"), journalOp{Op: "sync"})
		}},
		{"write too large", Options{}, func(t *testing.T, m *testMount) {
			full := strings.Repeat("f", store.MaxContentBytes)
			if err := os.WriteFile(m.path("/full.md"), []byte(full), 0o644); err != nil {
				t.Fatalf("a file of exactly 102,400 bytes: %v", err)
			}
			m.j.take()
			m.shFails(t, "head -c 1 /dev/zero >> full.md", "File too large")
			if got := readMountFile(t, m.path("/full.md")); got != full {
				t.Errorf("content changed by a refused write: %d bytes", len(got))
			}
			f, err := os.OpenFile(m.path("/a.md"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(store.MaxContentBytes + 1); !errors.Is(err, syscall.EFBIG) {
				t.Errorf("ftruncate to 102,401 bytes: %v, want EFBIG", err)
			}
			// A write that crosses the limit is short, as on any
			// filesystem with a file-size limit: the file keeps what fits.
			if n, err := unix.Pwrite(int(f.Fd()), bytes.Repeat([]byte("x"), store.MaxContentBytes+1), 0); err != nil || n != store.MaxContentBytes {
				t.Errorf("pwrite of 102,401 bytes: %d, %v; want %d (a short write)", n, err, store.MaxContentBytes)
			}
			if n, err := unix.Pwrite(int(f.Fd()), []byte("x"), store.MaxContentBytes); !errors.Is(err, syscall.EFBIG) {
				t.Errorf("pwrite at the limit: %d, %v; want EFBIG", n, err)
			}
			if err := f.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if got := readMountFile(t, m.path("/a.md")); got != strings.Repeat("x", store.MaxContentBytes) {
				t.Errorf("a.md after a write across the limit: %d bytes", len(got))
			}
			wantOps(t, m.j, putOp("mem_a", "/a.md", strings.Repeat("x", store.MaxContentBytes)))
		}},
		{"create at the memory cap", Options{MaxFiles: 4}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "touch n.md")
			m.shFails(t, "touch o.md", "No space left on device")
			m.shFails(t, "echo x > d/o.md", "No space left on device")
			m.mustSh(t, "mkdir e && rm n.md && touch o.md")
			wantTree(t, m.tr, map[string]string{"/a.md": "alpha\n", "/d/": "", "/d/b.md": "beta\n", "/d/sub/": "",
				"/d/sub/c.md": "gamma\n", "/e/": "", "/o.md": ""})
		}},
		{"statfs", Options{MaxFiles: 50}, func(t *testing.T, m *testMount) {
			var before, after unix.Statfs_t
			if err := unix.Statfs(m.dir, &before); err != nil {
				t.Fatal(err)
			}
			if before.Files != 50 || before.Ffree != 47 || before.Namelen != MaxNameBytes {
				t.Errorf("statfs files %d free %d namelen %d, want 50, 47 (3 loaded) and 255", before.Files, before.Ffree, before.Namelen)
			}
			if total := before.Blocks * uint64(before.Bsize); total != 50*store.MaxContentBytes {
				t.Errorf("statfs size %d bytes, want %d (cap × largest memory)", total, 50*store.MaxContentBytes)
			}
			m.mustSh(t, "touch n1.md n2.md && head -c 40960 /dev/zero | tr '\\0' x > n3.md")
			if err := unix.Statfs(m.dir, &after); err != nil {
				t.Fatal(err)
			}
			if after.Ffree != 44 {
				t.Errorf("files free %d after 3 creates, want 44", after.Ffree)
			}
			if used := (before.Bfree - after.Bfree) * uint64(after.Bsize); used != 40960 {
				t.Errorf("free space dropped by %d bytes after a 40,960-byte file, want 40,960", used)
			}
			if out := m.mustSh(t, "df -i . | tail -1"); !strings.Contains(out, mountStoreID) || len(strings.Fields(out)) < 4 || strings.Fields(out)[1] != "50" {
				t.Errorf("df -i: %q", out)
			}
		}},
		{"unlink", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "rm a.md d/sub/c.md")
			got := m.j.take()
			want := map[string]bool{deleteOp("mem_a", "/a.md").String(): true, deleteOp("mem_c", "/d/sub/c.md").String(): true}
			if len(got) != 2 || !want[got[0].String()] || !want[got[1].String()] {
				t.Errorf("journal %v, want the two deletes", got)
			}
			m.shFails(t, "cat a.md", "No such file or directory")
			m.shFails(t, "rm d", "Is a directory")
		}},
		{"mkdir and rmdir", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "mkdir -p x/y/z && rmdir x/y/z")
			wantOps(t, m.j) // directories are local only
			m.shFails(t, "rmdir d", "Directory not empty")
			m.shFails(t, "rmdir a.md", "Not a directory")
			m.shFails(t, "mkdir d", "File exists")
			if out := m.mustSh(t, "stat -c %F x/y"); out != "directory\n" {
				t.Errorf("x/y: %q", out)
			}
			m.mustSh(t, "rm d/sub/c.md && rmdir d/sub")
			wantTree(t, m.tr, map[string]string{"/a.md": "alpha\n", "/d/": "", "/d/b.md": "beta\n", "/x/": "", "/x/y/": ""})
		}},
		{"rename a file", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "mv a.md d/z.md")
			wantOps(t, m.j, putOp("mem_a", "/d/z.md", "alpha\n"))
			m.mustSh(t, "mv d/z.md d/b.md")
			wantOps(t, m.j, deleteOp("mem_b", "/d/b.md"), putOp("mem_a", "/d/b.md", "alpha\n"))
			wantTree(t, m.tr, map[string]string{"/d/": "", "/d/b.md": "alpha\n", "/d/sub/": "", "/d/sub/c.md": "gamma\n"})
			if got := readMountFile(t, m.path("/d/b.md")); got != "alpha\n" {
				t.Errorf("d/b.md: %q", got)
			}
		}},
		{"rename flags", Options{}, func(t *testing.T, m *testMount) {
			a, b := m.path("/a.md"), m.path("/d/b.md")
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE); !errors.Is(err, syscall.EEXIST) {
				t.Errorf("RENAME_NOREPLACE over a file: %v, want EEXIST", err)
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("RENAME_EXCHANGE: %v, want EINVAL", err)
			}
			wantOps(t, m.j)
			wantTree(t, m.tr, loadedTree)
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, m.path("/new.md"), unix.RENAME_NOREPLACE); err != nil {
				t.Errorf("RENAME_NOREPLACE to a free name: %v", err)
			}
			wantOps(t, m.j, putOp("mem_a", "/new.md", "alpha\n"))
		}},
		{"rename a directory", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "mkdir d/sub/empty && mv d e")
			got := lastPuts(m.j.take())
			want := map[string]string{"/e/b.md": "beta\n", "/e/sub/c.md": "gamma\n"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("journal puts %v, want %v", got, want)
			}
			if out := m.mustSh(t, "cat e/b.md e/sub/c.md && ls e/sub"); out != "beta\ngamma\nc.md\nempty\n" {
				t.Errorf("after mv: %q", out)
			}
			m.shFails(t, "ls d", "No such file or directory")
			if err := unix.Rename(m.path("/e"), m.path("/e/sub/e2")); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("rename of a directory below itself: %v, want EINVAL", err)
			}
		}},
		{"symlink, link, mknod, mkfifo", Options{}, func(t *testing.T, m *testMount) {
			for _, cmd := range []string{"ln -s a.md l", "ln a.md h", "mkfifo p", "mknod n c 1 3"} {
				m.shFails(t, cmd, "Operation not permitted")
			}
			wantTree(t, m.tr, loadedTree)
			wantOps(t, m.j)
		}},
		{"chmod, chown, utimens", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "chmod 600 a.md && chmod 700 d && chown 1000:1001 a.md && touch -m -d @1500000000 a.md")
			if out := m.mustSh(t, "stat -c '%a %u %g %Y' a.md d"); out != "600 1000 1001 1500000000\n700 0 0 "+
				strconv.FormatInt(statT(t, m.path("/d")).Mtim.Sec, 10)+"\n" {
				t.Errorf("stat after chmod/chown/touch: %q", out)
			}
			wantOps(t, m.j) // kept locally, never synced
		}},
		{"name validation", Options{}, func(t *testing.T, m *testMount) {
			long := strings.Repeat("p", 255)
			deep := m.path("/" + strings.TrimSuffix(strings.Repeat("l/", 19), "/"))
			if err := os.MkdirAll(deep, 0o755); err != nil {
				t.Fatalf("19 levels of directories: %v", err)
			}
			longDir := m.path("/" + long + "/" + long + "/" + long + "/" + long[:250]) // a 1,019-byte store path
			if err := os.MkdirAll(longDir, 0o755); err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name string
				path string
				dir  bool
				want syscall.Errno
			}{
				{"control character", m.path("/a\x01b.md"), false, syscall.EINVAL},
				{"newline", m.path("/a\nb.md"), false, syscall.EINVAL},
				{"U+2028", m.path("/a\u2028b.md"), false, syscall.EINVAL},
				{"format character U+200B", m.path("/a\u200bb.md"), false, syscall.EINVAL},
				{"not NFC", m.path("/e\u0301.md"), false, syscall.EINVAL},
				{"mkdir not NFC", m.path("/e\u0301"), true, syscall.EINVAL},
				{"name of 256 bytes", m.path("/" + strings.Repeat("n", 256)), false, syscall.ENAMETOOLONG},
				{"mkdir name of 256 bytes", m.path("/" + strings.Repeat("n", 256)), true, syscall.ENAMETOOLONG},
				{"path of 1,025 bytes", longDir + "/xxxxx", false, syscall.ENAMETOOLONG},
				{"mkdir at depth 20", deep + "/l", true, syscall.ENAMETOOLONG},
			}
			for _, tc := range tests {
				var err error
				if tc.dir {
					err = unix.Mkdir(tc.path, 0o755)
				} else {
					var fd int
					fd, err = unix.Open(tc.path, unix.O_CREAT|unix.O_WRONLY, 0o644)
					if err == nil {
						unix.Close(fd)
					}
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
				}
			}
			for _, op := range m.j.take() {
				t.Errorf("an invalid name reached the journal: %v", op)
			}
			// The limits are exact.
			for _, p := range []string{longDir + "/xxxx", deep + "/f.md", m.path("/" + strings.Repeat("q", 255)), m.path("/\u00e9.md")} {
				if err := os.WriteFile(p, []byte("ok"), 0o644); err != nil {
					t.Errorf("at the limit: %v", err)
				}
			}
		}},
		{"inode numbers are stable", Options{}, func(t *testing.T, m *testMount) {
			ino := statT(t, m.path("/a.md")).Ino
			if want := inoOf(t, m.tr, "/a.md"); ino != want {
				t.Errorf("st_ino %d, the tree's %d", ino, want)
			}
			if again := statT(t, m.path("/a.md")).Ino; again != ino {
				t.Errorf("second lookup: ino %d, want %d", again, ino)
			}
			m.mustSh(t, "mv a.md d/renamed.md")
			if got := statT(t, m.path("/d/renamed.md")).Ino; got != ino {
				t.Errorf("after rename: ino %d, want %d", got, ino)
			}
			dino := statT(t, m.path("/d")).Ino
			m.mustSh(t, "mv d e")
			if got := statT(t, m.path("/e")).Ino; got != dino {
				t.Errorf("directory after rename: ino %d, want %d", got, dino)
			}
			if got := statT(t, m.path("/e/renamed.md")).Ino; got != ino {
				t.Errorf("file after its directory's rename: ino %d, want %d", got, ino)
			}
		}},
		{"mtime of a loaded file", Options{}, func(t *testing.T, m *testMount) {
			st := statT(t, m.path("/d/b.md"))
			if got := time.Unix(st.Mtim.Unix()).UTC(); !got.Equal(loadedMtime) {
				t.Errorf("mtime %v, want %v", got, loadedMtime)
			}
			if out := m.mustSh(t, "stat -c %Y a.md"); out != strconv.FormatInt(loadedMtime.Unix(), 10)+"\n" {
				t.Errorf("stat -c %%Y: %q", out)
			}
		}},
		{"a write is visible through a second fd at once", Options{}, func(t *testing.T, m *testMount) {
			r, err := os.Open(m.path("/a.md"))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			buf := make([]byte, 64)
			if n, _ := r.ReadAt(buf, 0); string(buf[:n]) != "alpha\n" {
				t.Fatalf("first read %q", buf[:n])
			}
			w, err := os.OpenFile(m.path("/a.md"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := w.WriteAt([]byte("ALPHA\nplus\n"), 0); err != nil {
				t.Fatal(err)
			}
			if n, _ := r.ReadAt(buf, 0); string(buf[:n]) != "ALPHA\nplus\n" {
				t.Errorf("read through the second fd %q, want the new content", buf[:n])
			}
			if out := m.mustSh(t, "cat a.md"); out != "ALPHA\nplus\n" {
				t.Errorf("cat while the writer is open: %q", out)
			}
		}},
		{"an unlinked open file keeps working", Options{}, func(t *testing.T, m *testMount) {
			f, err := os.OpenFile(m.path("/a.md"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m.mustSh(t, "rm a.md")
			var st unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatalf("fstat of an unlinked file: %v", err)
			}
			if st.Size != 6 || st.Nlink != 0 {
				t.Errorf("fstat: size %d nlink %d, want 6 and 0", st.Size, st.Nlink)
			}
			if _, err := f.WriteAt([]byte("ALPHA"), 0); err != nil {
				t.Errorf("write to an unlinked file: %v", err)
			}
			buf := make([]byte, 16)
			if n, err := f.ReadAt(buf, 0); string(buf[:n]) != "ALPHA\n" {
				t.Errorf("read of an unlinked file: %q, %v", buf[:n], err)
			}
			if err := f.Close(); err != nil {
				t.Errorf("close of an unlinked file: %v", err)
			}
			wantOps(t, m.j, deleteOp("mem_a", "/a.md")) // gone from the store, edits and all
		}},
		{"close of invalid UTF-8 is EILSEQ and keeps the content", Options{}, func(t *testing.T, m *testMount) {
			f, err := os.Create(m.path("/bin.md"))
			if err != nil {
				t.Fatal(err)
			}
			bad := "latin-1 caf\xe9\n"
			if _, err := f.WriteString(bad); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); !errors.Is(err, syscall.EILSEQ) {
				t.Errorf("close: %v, want EILSEQ", err)
			}
			if got := readMountFile(t, m.path("/bin.md")); got != bad {
				t.Errorf("content %q, want %q", got, bad)
			}
			if got := lastPuts(m.j.take()); got["/bin.md"] != bad {
				t.Errorf("journal %q: want the invalid content kept", got)
			}
			m.shFails(t, `printf '\377' | tee -a a.md`, "Invalid or incomplete multibyte or wide character")
			if got := readMountFile(t, m.path("/a.md")); got != "alpha\n\xff" {
				t.Errorf("a.md after an invalid append %q", got)
			}
		}},
		{"ls -l sizes are exact", Options{}, func(t *testing.T, m *testMount) {
			sizes := map[string]int{"s0.md": 0, "s1.md": 1, "s4097.md": 4097, "smax.md": store.MaxContentBytes}
			for name, n := range sizes {
				if err := os.WriteFile(m.path("/"+name), bytes.Repeat([]byte("z"), n), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			sizes["a.md"] = 6
			sizes[MarkerName] = len("version 1\n" + mountStoreID)
			for _, line := range strings.Split(strings.TrimSpace(m.mustSh(t, "ls -lnA")), "\n")[1:] {
				f := strings.Fields(line)
				name := f[len(f)-1]
				want, ok := sizes[name]
				if !ok {
					continue
				}
				if f[4] != strconv.Itoa(want) {
					t.Errorf("ls -l shows %s as %s bytes, want %d", name, f[4], want)
				}
				delete(sizes, name)
			}
			if len(sizes) > 0 {
				t.Errorf("ls -l didn't list %v", sizes)
			}
		}},
		{"marker file", Options{}, func(t *testing.T, m *testMount) {
			want := "version 1\n" + mountStoreID
			if out := m.mustSh(t, "cat "+MarkerName); out != want {
				t.Errorf("marker %q, want %q", out, want)
			}
			if out := m.mustSh(t, "stat -c '%F %a' "+MarkerName); out != "regular file 444\n" {
				t.Errorf("marker stat %q", out)
			}
			for _, cmd := range []string{"rm -f " + MarkerName, "mv " + MarkerName + " m", "echo x > " + MarkerName,
				"echo x >> " + MarkerName, "truncate -s 0 " + MarkerName, "mv a.md " + MarkerName} {
				m.shFails(t, cmd, "Operation not permitted")
			}
			if out := m.mustSh(t, "cat "+MarkerName); out != want {
				t.Errorf("marker after refused changes %q", out)
			}
			wantOps(t, m.j)
			wantTree(t, m.tr, loadedTree)
		}},
		{"case-sensitive names", Options{}, func(t *testing.T, m *testMount) {
			m.mustSh(t, "echo upper > Notes.md && echo lower > notes.md")
			if out := m.mustSh(t, "cat Notes.md notes.md"); out != "upper\nlower\n" {
				t.Errorf("%q", out)
			}
		}},
		{"extended attributes are not supported", Options{}, func(t *testing.T, m *testMount) {
			p := m.path("/a.md")
			if _, err := unix.Getxattr(p, "user.x", make([]byte, 64)); !errors.Is(err, unix.ENOTSUP) {
				t.Errorf("getxattr: %v, want ENOTSUP", err)
			}
			if err := unix.Setxattr(p, "user.x", []byte("v"), 0); !errors.Is(err, unix.ENOTSUP) {
				t.Errorf("setxattr: %v, want ENOTSUP", err)
			}
			if n, err := unix.Listxattr(p, make([]byte, 64)); err != nil || n != 0 {
				t.Errorf("listxattr: %d, %v; want an empty list", n, err)
			}
		}},
		{"teardown refuses changes but lets open writers finish", Options{}, func(t *testing.T, m *testMount) {
			f, err := os.OpenFile(m.path("/a.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m.tr.Freeze()
			for _, cmd := range []string{"touch n.md", "echo x >> d/b.md", "rm d/b.md", "mv a.md z.md", "mkdir x"} {
				m.shFails(t, cmd, "Read-only file system")
			}
			if _, err := f.WriteString("last words\n"); err != nil {
				t.Fatalf("write through a handle opened before teardown: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantOps(t, m.j, putOp("mem_a", "/a.md", "alpha\nlast words\n"))
			if out := m.mustSh(t, "cat a.md"); out != "alpha\nlast words\n" {
				t.Errorf("read after teardown started: %q", out)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mountTestTree(t, tc.opts, loadedFiles()...)
			tc.run(t, m)
		})
	}
}

func TestMountReadOnly(t *testing.T) {
	m := mountTestTree(t, Options{ReadOnly: true}, loadedFiles()...)
	if out := m.mustSh(t, "cat a.md d/b.md && ls d"); out != "alpha\nbeta\nb.md\nsub\n" {
		t.Errorf("read: %q", out)
	}
	for _, cmd := range []string{
		"echo x > a.md", "echo x >> a.md", "echo x > n.md", "touch a.md", "touch n.md", "truncate -s 0 a.md",
		"rm a.md", "rm -f " + MarkerName, "mv a.md g.md", "mv d e", "mkdir x", "rmdir d/sub", "chmod 600 a.md",
		"chown 1000 a.md", "touch -m -d @1500000000 a.md", "ln -s a.md l", "ln a.md h", "mkfifo p", "mknod n c 1 3",
	} {
		m.shFails(t, cmd, "Read-only file system")
	}
	if err := unix.Renameat2(unix.AT_FDCWD, m.path("/a.md"), unix.AT_FDCWD, m.path("/d/b.md"), unix.RENAME_NOREPLACE); !errors.Is(err, syscall.EROFS) {
		t.Errorf("renameat2: %v, want EROFS", err)
	}
	if err := unix.Setxattr(m.path("/a.md"), "user.x", []byte("v"), 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("setxattr: %v, want EROFS", err)
	}
	if _, err := os.OpenFile(m.path("/a.md"), os.O_RDWR, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open O_RDWR: %v, want EROFS", err)
	}
	wantTree(t, m.tr, loadedTree)
	st := statT(t, m.path("/a.md"))
	if st.Mode&0o7777 != 0o644 || st.Uid != 0 || st.Mtim.Sec != loadedMtime.Unix() {
		t.Errorf("attributes changed: mode %o uid %d mtime %d", st.Mode&0o7777, st.Uid, st.Mtim.Sec)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(m.dir, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Flags&unix.ST_RDONLY == 0 {
		t.Errorf("statfs flags %#x: the kernel doesn't mount it read-only", sfs.Flags)
	}
	if sfs.Files != store.MaxMemoriesLimit || sfs.Ffree != store.MaxMemoriesLimit-3 {
		t.Errorf("statfs files %d free %d", sfs.Files, sfs.Ffree)
	}
	if out := m.mustSh(t, "cat "+MarkerName); out != "version 1\n"+mountStoreID {
		t.Errorf("marker %q", out)
	}
}
