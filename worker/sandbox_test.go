package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// sbSpec is a sandbox of a merged-/usr host with two mounts.
func sbSpec() sandboxSpec {
	return sandboxSpec{
		Bwrap: "/usr/bin/bwrap", Setpriv: "/usr/bin/setpriv", Exe: "/usr/local/bin/memfs", Socket: "/run/memfs-tools-1/api.sock",
		Workdir: "/var/lib/memfs/work/sesn_1",
		Mounts:  []sandboxMount{{Path: "/mnt/memory/notes"}, {Path: "/mnt/memory/guide", ReadOnly: true}},
		Network: NetworkHost, User: ToolsUser{Name: "agent", UID: 1001, GID: 1001}, Privileged: true,
		Hide: []string{"/etc/memfs-keys/env.key", "/var/lib/memfs/replay.key"},
		Host: map[string]hostEntry{
			"/usr": {Dir: true}, "/etc": {Dir: true}, "/bin": {Symlink: "usr/bin"}, "/lib": {Symlink: "usr/lib"}, "/lib64": {Symlink: "usr/lib64"},
			"/sbin": {Symlink: "usr/sbin"}, "/etc/shadow": {}, "/etc/ssh": {Dir: true}, "/etc/memfs-keys/env.key": {}, "/var/lib/memfs/replay.key": {},
		},
	}
}

// pairs are the (option, argument...) groups of a bwrap command line, as
// strings, so a test can ask whether "--ro-bind A B" is in it.
func hasArgs(argv []string, want ...string) bool {
	for i := range argv {
		if i+len(want) <= len(argv) && slices.Equal(argv[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

func indexArgs(argv []string, want ...string) int {
	for i := range argv {
		if i+len(want) <= len(argv) && slices.Equal(argv[i:i+len(want)], want) {
			return i
		}
	}
	return -1
}

func TestBwrapArgs(t *testing.T) {
	argv := bwrapArgs(sbSpec())
	line := strings.Join(argv, " ")
	for _, want := range [][]string{
		{"--die-with-parent"}, {"--new-session"}, {"--unshare-pid"}, {"--unshare-ipc"}, {"--unshare-uts"},
		{"--ro-bind", "/usr", "/usr"}, {"--ro-bind", "/etc", "/etc"}, {"--symlink", "usr/bin", "/bin"}, {"--symlink", "usr/lib64", "/lib64"},
		{"--ro-bind", "/dev/null", "/etc/shadow"}, {"--tmpfs", "/etc/ssh"}, {"--ro-bind", "/dev/null", "/etc/memfs-keys/env.key"},
		{"--proc", "/proc"}, {"--dev", "/dev"}, {"--perms", "1777", "--tmpfs", "/tmp"}, {"--tmpfs", "/run"},
		{"--bind", "/var/lib/memfs/work/sesn_1", "/var/lib/memfs/work/sesn_1"},
		{"--bind", "/mnt/memory/notes", "/mnt/memory/notes"}, {"--ro-bind", "/mnt/memory/guide", "/mnt/memory/guide"},
		{"--perms", "0755", "--dir", "/var"}, {"--perms", "0755", "--dir", "/var/lib/memfs/work"}, {"--perms", "0755", "--dir", "/mnt/memory"},
		{"--ro-bind", "/usr/local/bin/memfs", sandboxExe}, {"--bind", "/run/memfs-tools-1/api.sock", sandboxSocket},
		{"--clearenv"}, {"--cap-drop", "ALL"},
		{"--", "/usr/bin/setpriv", "--reuid=1001", "--regid=1001", "--clear-groups", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", sandboxExe, ToolsRunnerCommand},
	} {
		if !hasArgs(argv, want...) {
			t.Errorf("the sandbox's command line lacks %q:\n%s", want, line)
		}
	}
	for _, never := range []string{"--unshare-net", "--unshare-user", "/var/lib/memfs/replay.key", "--bind / ", "--dev-bind"} {
		if strings.Contains(line+" ", never) {
			t.Errorf("the sandbox's command line holds %q:\n%s", never, line)
		}
	}
	// Order: the tmpfs /tmp before the binds that may land on it; the folders
	// above a bind before it; the masks after /etc.
	if i, j := indexArgs(argv, "--tmpfs", "/tmp"), indexArgs(argv, "--bind", "/mnt/memory/notes", "/mnt/memory/notes"); i < 0 || j < i {
		t.Errorf("the mounts are bound before /tmp is made:\n%s", line)
	}
	if i, j := indexArgs(argv, "--dir", "/mnt/memory"), indexArgs(argv, "--bind", "/mnt/memory/notes", "/mnt/memory/notes"); i < 0 || j < i {
		t.Errorf("/mnt/memory is made after the mount below it:\n%s", line)
	}
	if i, j := indexArgs(argv, "--ro-bind", "/etc", "/etc"), indexArgs(argv, "--ro-bind", "/dev/null", "/etc/shadow"); j < i {
		t.Errorf("/etc/shadow is masked before /etc is bound:\n%s", line)
	}
	if n := strings.Count(line, "--dir /mnt/memory "); n != 1 {
		t.Errorf("/mnt/memory is made %d times, want once:\n%s", n, line)
	}
}

func TestBwrapArgsNetworkNoneAndUnprivileged(t *testing.T) {
	s := sbSpec()
	s.Network, s.Privileged = NetworkNone, false
	argv := bwrapArgs(s)
	if !hasArgs(argv, "--unshare-net") {
		t.Errorf("--tools-network none has no --unshare-net: %q", argv)
	}
	if hasArgs(argv, "--cap-drop", "ALL") || slices.Contains(argv, "/usr/bin/setpriv") {
		t.Errorf("an unprivileged sandbox asks for caps or setpriv: %q", argv)
	}
	if got := argv[len(argv)-3:]; !slices.Equal(got, []string{"--", sandboxExe, ToolsRunnerCommand}) {
		t.Errorf("an unprivileged sandbox runs %q", got)
	}
}

// TestBwrapArgsMountUnderTmp: a mount path under /tmp lands on the
// sandbox's own /tmp, with its folders 0755.
func TestBwrapArgsMountUnderTmp(t *testing.T) {
	s := sbSpec()
	s.Workdir, s.Mounts = "/tmp/x/state/work/s", []sandboxMount{{Path: "/tmp/x/mnt/a"}}
	argv := bwrapArgs(s)
	for _, d := range []string{"/tmp/x", "/tmp/x/state", "/tmp/x/state/work", "/tmp/x/mnt"} {
		if !hasArgs(argv, "--perms", "0755", "--dir", d) {
			t.Errorf("%s is not made 0755: %q", d, argv)
		}
	}
	if hasArgs(argv, "--dir", "/tmp") {
		t.Errorf("/tmp is made again over its tmpfs: %q", argv)
	}
}

func TestSessionRoutes(t *testing.T) {
	allow := sessionRoutes("sesn_A")
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/v1/sessions/sesn_A", true},
		{"GET", "/v1/sessions/sesn_A/events", true},
		{"GET", "/v1/sessions/sesn_A/events/stream", true},
		{"POST", "/v1/sessions/sesn_A/events", true},
		{"GET", "/v1/skills/skill_1/versions/2", true},
		{"POST", "/v1/sessions/sesn_A/archive", false},
		{"DELETE", "/v1/sessions/sesn_A", false},
		{"GET", "/v1/sessions/sesn_AB", false},
		{"GET", "/v1/sessions/sesn_B/events", false},
		{"GET", "/v1/sessions/sesn_A/../sesn_B", false},
		{"GET", "/v1/sessions/sesn_A/..", false},
		{"GET", "/v1/sessions/sesn_A//x", false},
		{"GET", "/v1/sessions", false},
		{"GET", "/v1/memory_stores/memstore_1/memories", false},
		{"GET", "/v1/environments/env_1/work/poll", false},
		{"POST", "/v1/environments/env_1/work/w/ack", false},
		{"POST", "/v1/skills/skill_1", false},
	} {
		if got := allow(c.method, c.path); got != c.want {
			t.Errorf("%s %s: allowed %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// TestAPIProxy: the proxy forwards an allowed route with the session token
// in place of whatever the sandbox sent, refuses the rest with 403 (the
// API never sees them), and makes its socket the tools user's, 0600.
func TestAPIProxy(t *testing.T) {
	var seen []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization")+" x-api-key="+r.Header.Get("X-Api-Key")+" beta="+r.Header.Get("Anthropic-Beta"))
		io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()
	log, _ := test.NewNullLogger()
	p, err := startAPIProxy(upstream.URL, "sesn_A", "tok-A", uint32(os.Getuid()), uint32(os.Getgid()), http.DefaultTransport, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if fi, err := os.Stat(p.sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket %s: %v, %v; want mode 0600", p.sock, fi, err)
	}
	if len(p.sock) > 100 {
		t.Errorf("the socket's path is %d bytes long (a unix socket's may be 107)", len(p.sock))
	}
	c := &http.Client{Transport: &http.Transport{DialContext: (&unixDialer{p.sock}).dial}}
	do := func(method, path string) int {
		req, _ := http.NewRequest(method, "http://x"+path, bytes.NewReader(nil))
		req.Header.Set("Authorization", "Bearer forged")
		req.Header.Set("X-Api-Key", "forged-too")
		req.Header.Set("Anthropic-Beta", "managed-agents-2026-04-01")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do("GET", "/v1/sessions/sesn_A/events"); code != 200 {
		t.Errorf("an allowed route: %d", code)
	}
	if code := do("GET", "/v1/memory_stores/memstore_1/memories"); code != 403 {
		t.Errorf("a store's route: %d, want 403", code)
	}
	if code := do("POST", "/v1/sessions/sesn_B/events"); code != 403 {
		t.Errorf("another session's route: %d, want 403", code)
	}
	want := []string{"GET /v1/sessions/sesn_A/events auth=Bearer tok-A x-api-key= beta=managed-agents-2026-04-01"}
	if !slices.Equal(seen, want) {
		t.Errorf("the API saw %q, want %q", seen, want)
	}
	p.close()
	if _, err := os.Stat(filepath.Dir(p.sock)); !os.IsNotExist(err) {
		t.Errorf("the socket's directory is left after close: %v", err)
	}
}

// TestRelayRunner: the runner's JSON lines are logged as the worker's,
// never above error, with a bounded count of fields; its end is read from
// the line carrying tools_end; a line that is not JSON is logged as text.
func TestRelayRunner(t *testing.T) {
	log, hook := test.NewNullLogger()
	fields := map[string]any{"level": "panic", "msg": "loud"}
	for i := range 100 {
		fields[strings.Repeat("f", i+1)] = i
	}
	loud, _ := json.Marshal(fields)
	in := strings.Join([]string{
		`{"level":"info","msg":"dispatched tool","tool":"bash"}`,
		string(loud),
		`not json`,
		`{"level":"error","msg":"the session tool runner failed","tools_end":"error","error":"boom"}`,
	}, "\n") + "\n"
	end := relayRunner(strings.NewReader(in), log)
	if end.kind != runnerEndError || end.err != "boom" {
		t.Errorf("end %+v, want error boom", end)
	}
	es := hook.AllEntries()
	if len(es) != 4 {
		t.Fatalf("%d lines logged, want 4", len(es))
	}
	if es[0].Message != "dispatched tool" || es[0].Data["tool"] != "bash" || es[0].Level != logrus.InfoLevel {
		t.Errorf("first line: %+v", es[0])
	}
	if es[1].Level != logrus.InfoLevel || len(es[1].Data) > maxRelayFields {
		t.Errorf("a panic line from the sandbox: level %s, %d fields; want info and at most %d", es[1].Level, len(es[1].Data), maxRelayFields)
	}
	if es[2].Data["line"] != "not json" {
		t.Errorf("a text line: %+v", es[2])
	}
	if r := end.result(nil, ""); r.ending != EndError || !strings.Contains(r.err.Error(), "boom") {
		t.Errorf("result %+v", r)
	}
	if r := (runnerEnd{}).result(nil, "bwrap: Can't mount proc"); r.ending != EndError || !strings.Contains(r.err.Error(), "bwrap: Can't mount proc") {
		t.Errorf("a sandbox that ended without its runner's end: %+v", r)
	}
}

type unixDialer struct{ path string }

func (d *unixDialer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, "unix", d.path)
}
