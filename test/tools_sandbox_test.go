package test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestToolsSandboxProbes: the attacks the sandbox closes (docs/operating.md,
// "The agent's sandbox"), repeated as tool calls
// from session A on a root worker that runs two sessions (A with a
// read-write and a read-only store, B with a store of its own). Each probe
// is a bash command whose output must show it failed; what the agent owns
// (its work directory, its read-write store) must still work, as the tools
// user, with new files owned by that user. A probe that succeeds fails the
// test, saying which.
func TestToolsSandboxProbes(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	rw := e.newStore("Alpha", map[string]string{"/a.md": "alpha\n"})
	ro := e.newStore("Reference", map[string]string{"/guide.md": "read me\n"})
	other := e.newStore("Beta", map[string]string{"/b.md": "beta\n"})
	// The keys an attacker looked for, where a deployment keeps them.
	keyFile := wkWriteFile(t, e.base, "environment.key", []byte(e.envKey+"\n"), 0o600)
	w := e.startToolsWorker(nil, "--memory-sync-interval", "5s")
	sa := e.newSession(wkRW(rw), wkRO(ro))
	sb := e.newSession(wkRW(other))
	e.waitRunning(w, sa)
	e.waitRunning(w, sb)
	rwDir, roDir, bDir := sa.Resources[0].MountPath, sa.Resources[1].MountPath, sb.Resources[0].MountPath
	workA, workB := e.workdirOf(sa.ID), e.workdirOf(sb.ID)
	worker := strconv.Itoa(w.Pid())
	adminKeyFile := filepath.Join(e.serve.DataDir, "admin.key")
	journal := filepath.Join(e.stateDir, "stores", ro, "journal")

	for _, p := range []struct {
		name, cmd string
		want      []string // every one must be in the output: the probe failed
		never     []string // none may be
	}{
		{"not root, no capabilities, no_new_privs", `id -u; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status`,
			[]string{"65534\n", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"}, nil},
		{"the environment key file", "cat " + keyFile, []string{"No such file or directory"}, []string{e.envKey}},
		{"the admin key file", "cat " + adminKeyFile, []string{"No such file or directory"}, []string{e.serve.AdminKey}},
		{"the state dir (journals, conflict logs)", "ls " + filepath.Join(e.stateDir, "stores") + "; cat " + journal,
			[]string{"cannot access", "No such file or directory"}, nil},
		{"the keys anywhere it can read (but /usr)", "grep -rlaF -D skip -e " + e.envKey + " -e " + e.serve.AdminKey + " / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr 2>/dev/null; echo scanned",
			[]string{"scanned"}, []string{"/"}},
		{"the worker's memory", "cat /proc/" + worker + "/environ /proc/" + worker + "/mem; kill -STOP " + worker,
			[]string{"No such file or directory", "No such process"}, []string{e.envKey}},
		{"the runner's memory (non-dumpable)", "cat /proc/$PPID/environ; (exec 3</proc/$PPID/mem && echo opened)",
			[]string{"Permission denied"}, []string{"opened"}},
		{"the other session's mount path", "ls " + bDir + "; echo evil > " + bDir + "/evil.md",
			[]string{"No such file or directory"}, []string{"b.md"}},
		{"the other session's work directory", "ls " + workB + "; ls " + filepath.Dir(workA),
			[]string{"cannot access '" + workB + "'"}, nil},
		{"a write into the read-only store", "echo x > " + roDir + "/new.md; mv " + roDir + "/guide.md " + roDir + "/moved.md",
			[]string{"Read-only file system"}, nil},
		{"umount of a store", "umount " + rwDir + "; umount -l " + roDir, []string{"must be superuser"}, nil},
		{"a bind mount over the read-only store", "mkdir -p /tmp/fake && echo forged > /tmp/fake/guide.md && mount --bind /tmp/fake " + roDir + "; cat " + roDir + "/guide.md",
			[]string{"must be superuser", "read me"}, []string{"forged"}},
		{"mounting a store itself", "ls -l /dev/fuse; /run/memfs/memfs mount --api-url " + e.serve.URL + " --store " + ro + " /tmp/m",
			[]string{"cannot access '/dev/fuse'"}, nil},
		{"a hard link to a file it does not own", "ln /etc/passwd pw; ln " + roDir + "/guide.md g; ls pw g",
			[]string{"ln: failed to create hard link"}, nil},
		{"a bind mount in the work dir", "mkdir -p root && mount --bind / root", []string{"must be superuser"}, nil},
		{"the API socket, for another store or session", apiGet("/v1/memory_stores/"+ro+"/memories") + "; " + apiGet("/v1/sessions/"+sb.ID) + "; " + apiGet("/v1/environments/"+e.envID+"/work/poll"),
			[]string{"HTTP/1.1 403", "is not a route the agent's tools are given"}, []string{"200 OK", "guide.md", "b.md"}},
		{"the host's other databases and homes", "ls /var/lib /root /home", []string{"cannot access '/var/lib'", "cannot access '/root'", "cannot access '/home'"}, nil},
	} {
		r := e.runTool(sa.ID, "bash", bash(p.cmd+"; true"))
		out := r.text()
		for _, want := range p.want {
			if !strings.Contains(out, want) {
				t.Errorf("probe %q: %s\n%s\nthe output lacks %q: the probe may have succeeded", p.name, p.cmd, out, want)
			}
		}
		for _, never := range p.never {
			if strings.Contains(out, never) {
				t.Errorf("probe %q succeeded: %s\n%s\n(holds %q)", p.name, p.cmd, out, never)
			}
		}
		t.Logf("probe %q: %s\n%s", p.name, p.cmd, strings.TrimSpace(out))
	}
	// The file tools follow no hard link or bind mount made by bash.
	if r := e.runTool(sa.ID, "read", map[string]any{"file_path": filepath.Join(workA, "pw")}); !r.IsError {
		t.Errorf("the read tool read a hard link to /etc/passwd: %q", r.text())
	}

	// What the agent owns still works, as the tools user.
	e.mustTool(sa.ID, "write", map[string]any{"file_path": "notes.txt", "content": "mine\n"})
	e.mustTool(sa.ID, "write", map[string]any{"file_path": rwDir + "/agent.md", "content": "from A\n"})
	if out := e.mustTool(sa.ID, "bash", bash("cat notes.txt "+rwDir+"/a.md "+roDir+"/guide.md")); out != "mine\nalpha\nread me\n" && strings.TrimSpace(out) != "mine\nalpha\nread me" {
		t.Errorf("the agent's own files: %q", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(workA, "notes.txt"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("a file the write tool made in the work dir: %v, uid %d; want the tools user's (65534)", err, st.Uid)
	}
	e.waitStore(rw, map[string]string{"/a.md": "alpha\n", "/agent.md": "from A\n"}, wkSyncTimeout)
	e.checkStore(ro, map[string]string{"/guide.md": "read me\n"})
	e.checkStore(other, map[string]string{"/b.md": "beta\n"})
	if _, err := os.Lstat(filepath.Join(bDir, "evil.md")); err == nil {
		t.Errorf("session A's write reached session B's mount")
	}
	if !w.Running() {
		t.Fatalf("the worker is gone after the probes:\n%s", w.Output())
	}
	// B still works: nothing A did stopped its mounts or its tools.
	if out := e.mustTool(sb.ID, "bash", bash("cat "+bDir+"/b.md")); strings.TrimSpace(out) != "beta" {
		t.Errorf("session B after A's probes: %q", out)
	}
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestToolsNetworkNone: with --tools-network none the tools have only
// loopback — the API server's port is unreachable from bash — yet the
// tool runner still answers (through the worker's proxy).
func TestToolsNetworkNone(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Net", map[string]string{"/n.md": "n\n"})
	w := e.startToolsWorker(nil, "--memory-sync-interval", "5s", "--tools-network", "none")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	host, port, _ := strings.Cut(e.serve.Addr, ":")
	out := e.mustTool(sess.ID, "bash", bash("(echo > /dev/tcp/"+host+"/"+port+") 2>/dev/null && echo reached; echo ---; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; true"))
	if strings.Contains(out, "reached") {
		t.Errorf("the API's port %s was reachable from the tools' shell with --tools-network none:\n%s", e.serve.Addr, out)
	}
	_, ifaces, _ := strings.Cut(out, "---")
	if f := strings.Fields(ifaces); len(f) != 1 || f[0] != "lo" {
		t.Errorf("the tools' network namespace holds %q, want only lo:\n%s", f, out)
	}
	e.mustTool(sess.ID, "write", map[string]any{"file_path": sess.Resources[0].MountPath + "/w.md", "content": "w\n"})
	e.waitStore(st, map[string]string{"/n.md": "n\n", "/w.md": "w\n"}, wkSyncTimeout)
	wkStopWorker(t, w, syscall.SIGTERM)
}

// apiGet is a bash command that sends GET path to the tools' API socket
// (with perl, which Debian always has: bash can't speak to a unix socket).
func apiGet(path string) string {
	return `perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => "/run/memfs/api.sock") or die "connect: $!\n"; print $s "GET ` + path + ` HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"; print while <$s>'`
}

// TestToolsSandboxDiesWithWorker: kill -9 of the worker ends its
// sessions' sandboxes, and everything the agent started in them (a
// background sleep, here): nothing the model ran outlives the worker that
// serves its mounts.
func TestToolsSandboxDiesWithWorker(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	st := e.newStore("Orphans", nil)
	w := e.startToolsWorker(nil, "--memory-sync-interval", "5s")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	marker := "sleep-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// exec -a names the sleep uniquely, so the test finds it on the host.
	e.mustTool(sess.ID, "bash", bash("(exec -a "+marker+" sleep 1000) > /dev/null 2>&1 & echo started"))
	found := func() []int { return tlProcessesNamed(marker) }
	tlWaitFor(t, "the agent's background sleep", wkQuickTimeout, func() bool { return len(found()) == 1 })
	w.Kill()
	tlWaitFor(t, "the agent's processes to end with the worker", wkQuickTimeout, func() bool { return len(found()) == 0 })
}

// tlProcessesNamed lists the pids whose argv[0] is name.
func tlProcessesNamed(name string) []int {
	var out []int
	for pid, cmdline := range tlCmdlines() {
		if strings.HasPrefix(cmdline, name+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// TestToolsUserDefault: without --tools-user the tools run as the owner of
// --memory-root (chowned to the agent's user, as the deploy kit says), and
// the session's mounts and work directory are that user's.
func TestToolsUserDefault(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(e.root, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	st := e.newStore("Owned", map[string]string{"/o.md": "o\n"})
	w := e.startToolsWorkerAs("", nil, "--memory-sync-interval", "5s")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	w.WaitOutput(1, wkQuickTimeout, "running the session's tools", `tools_user="nobody (uid 65534, gid 65534)"`)
	dir := sess.Resources[0].MountPath
	if out := e.mustTool(sess.ID, "bash", bash("id -u; stat -c '%u %U' "+dir+" "+dir+"/o.md .")); out != "65534\n65534 nobody\n65534 nobody\n65534 nobody\n" &&
		strings.TrimSpace(out) != "65534\n65534 nobody\n65534 nobody\n65534 nobody" {
		t.Errorf("the tools' uid and the owners of the mount, a file in it and the work directory: %q, want all 65534", out)
	}
	wkStopWorker(t, w, syscall.SIGTERM)
}
