package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/test/harness"
)

// minStopTimeout is the least stop timeout for memfs serve and the
// worker: a final sync takes up to 30 s, plus unmounting.
const minStopTimeout = 35 * time.Second

// memfsPath is where the units expect the binary.
const memfsPath = "/usr/local/bin/memfs"

// mountNamespaceOptions give a service a mount namespace of its own, whose
// mounts systemd marks slave: a FUSE mount the worker made there would
// never reach the host, where the sandboxes look for it.
var mountNamespaceOptions = []string{
	"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
	"ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "ExecPaths", "NoExecPaths",
	"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
	"ProtectProc", "ProcSubset", "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths",
	"DynamicUser", "PrivateUsers", "PrivateNetwork", "PrivateIPC", "RootDirectory", "RootImage",
	"MountImages", "ExtensionImages", "ExtensionDirectories", "LogNamespace", "NetworkNamespacePath",
}

// checkStopping checks what every memfs service unit needs to stop
// cleanly: one SIGTERM to the main process, a timeout that covers the
// final sync, a restart on failure but not after a usage error.
func checkStopping(u *unitFile) []string {
	var p []string
	if km := u.get("Service", "KillMode"); km != "mixed" && km != "control-group" {
		p = append(p, fmt.Sprintf("KillMode=%q: want mixed (SIGTERM to the main process only) or control-group; process and none leave the cgroup unkilled", km))
	}
	if s := u.get("Service", "KillSignal"); s != "" && s != "SIGTERM" && s != "TERM" {
		p = append(p, fmt.Sprintf("KillSignal=%s: memfs stops cleanly on SIGTERM", s))
	}
	if u.has("Service", "ExecStop") {
		p = append(p, "ExecStop= sends a stop of its own before systemd's SIGTERM: the second signal cuts the final sync short")
	}
	if d, err := parseTimespan(u.get("Service", "TimeoutStopSec")); err != nil {
		p = append(p, fmt.Sprintf("TimeoutStopSec: %v", err))
	} else if d < minStopTimeout {
		p = append(p, fmt.Sprintf("TimeoutStopSec=%v: at least %v (the final sync takes up to 30 s)", d, minStopTimeout))
	}
	if r := u.get("Service", "Restart"); r != "on-failure" && r != "always" {
		p = append(p, fmt.Sprintf("Restart=%q: a memfs that died should come back", r))
	}
	if !slices.Contains(u.words("Service", "RestartPreventExitStatus"), "2") {
		p = append(p, "RestartPreventExitStatus has no 2: a usage error would be restarted forever")
	}
	return p
}

// checkWorkerUnit checks what the worker needs for FUSE and what keeps
// its mounts visible to the host.
func checkWorkerUnit(u *unitFile) []string {
	p := checkStopping(u)
	exec := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec) < 2 || exec[0] != memfsPath || exec[1] != "worker" {
		p = append(p, fmt.Sprintf("ExecStart=%q: want %s worker ...", u.get("Service", "ExecStart"), memfsPath))
	}
	for _, o := range mountNamespaceOptions {
		if u.has("Service", o) {
			p = append(p, fmt.Sprintf("%s= gives the worker a mount namespace of its own: its mounts would not reach the host", o))
		}
	}
	if f := u.get("Service", "MountFlags"); f != "" && f != "shared" {
		p = append(p, fmt.Sprintf("MountFlags=%s keeps the worker's mounts from the host", f))
	}
	if usr := u.get("Service", "User"); usr != "" && usr != "root" && usr != "0" {
		p = append(p, fmt.Sprintf("User=%s: the worker mounts with mount(2), which needs root", usr))
	}
	if !slices.Contains(u.words("Service", "CapabilityBoundingSet"), "CAP_SYS_ADMIN") {
		p = append(p, "CapabilityBoundingSet lacks CAP_SYS_ADMIN: mount(2) fails")
	}
	devOK := false
	for _, v := range u.sections["Service"]["DeviceAllow"] {
		if f := strings.Fields(v); len(f) >= 1 && f[0] == "/dev/fuse" && (len(f) == 1 || strings.Contains(f[1], "r") && strings.Contains(f[1], "w")) {
			devOK = true
		}
	}
	if !devOK {
		p = append(p, "DeviceAllow has no \"/dev/fuse rw\"")
	}
	if pol := u.get("Service", "DevicePolicy"); pol != "" && pol != "closed" && pol != "auto" {
		p = append(p, fmt.Sprintf("DevicePolicy=%s hides /dev/fuse", pol))
	}
	if f := u.words("Service", "SystemCallFilter"); len(f) > 0 && !slices.Contains(f, "@mount") {
		p = append(p, "SystemCallFilter without @mount: mount(2) is refused")
	}
	if u.get("Service", "NoNewPrivileges") != "yes" {
		p = append(p, "NoNewPrivileges is not yes")
	}
	if !strings.Contains(u.get("Service", "ExecStart"), "--environment-key-file %d/") || !u.has("Service", "LoadCredential") {
		p = append(p, "the environment key must come from a credential (LoadCredential= and --environment-key-file %d/...)")
	}
	return p
}

// checkServeUnit checks the store service's unit: stopping, and that it
// runs as no one in particular with nothing it doesn't need.
func checkServeUnit(u *unitFile) []string {
	p := checkStopping(u)
	exec := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec) < 2 || exec[0] != memfsPath || exec[1] != "serve" {
		p = append(p, fmt.Sprintf("ExecStart=%q: want %s serve ...", u.get("Service", "ExecStart"), memfsPath))
	}
	if u.get("Service", "DynamicUser") != "yes" && (u.get("Service", "User") == "" || u.get("Service", "User") == "root") {
		p = append(p, "memfs serve must not run as root (DynamicUser=yes or User=)")
	}
	if caps := u.words("Service", "CapabilityBoundingSet"); !u.has("Service", "CapabilityBoundingSet") || len(caps) > 0 {
		p = append(p, fmt.Sprintf("CapabilityBoundingSet=%q: memfs serve needs no capability", caps))
	}
	if dir := u.get("Service", "StateDirectory"); dir == "" || !strings.Contains(u.get("Service", "ExecStart"), "--data-dir %S/"+dir) {
		p = append(p, "the data dir must be the StateDirectory (--data-dir %S/<StateDirectory>)")
	}
	return p
}

func unitPath(name string) string { return filepath.Join("systemd", name) }

func TestWorkerUnit(t *testing.T) {
	for _, p := range checkWorkerUnit(readUnit(t, unitPath("memfs-worker.service"))) {
		t.Error(p)
	}
}

func TestServeUnit(t *testing.T) {
	for _, p := range checkServeUnit(readUnit(t, unitPath("memfs-serve.service"))) {
		t.Error(p)
	}
}

// TestUnitChecksCatch feeds the checks units with the mistakes they are
// there for, so a check that stopped looking fails here.
func TestUnitChecksCatch(t *testing.T) {
	b, err := os.ReadFile(unitPath("memfs-worker.service"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	for name, c := range map[string]struct{ old, new, want string }{
		"short timeout":    {"TimeoutStopSec=45", "TimeoutStopSec=20", "TimeoutStopSec"},
		"kill mode":        {"KillMode=mixed", "KillMode=process", "KillMode"},
		"ProtectSystem":    {"NoNewPrivileges=yes", "NoNewPrivileges=yes\nProtectSystem=strict", "ProtectSystem"},
		"PrivateTmp":       {"NoNewPrivileges=yes", "NoNewPrivileges=yes\nPrivateTmp=yes", "PrivateTmp"},
		"no fuse device":   {"DeviceAllow=/dev/fuse rw", "DeviceAllow=/dev/null rw", "/dev/fuse"},
		"no SYS_ADMIN":     {"CapabilityBoundingSet=CAP_SYS_ADMIN ", "CapabilityBoundingSet=", "CAP_SYS_ADMIN"},
		"no @mount":        {"SystemCallFilter=@system-service @mount", "SystemCallFilter=@system-service", "@mount"},
		"ExecStop":         {"KillMode=mixed", "KillMode=mixed\nExecStop=/bin/kill -TERM $MAINPID", "ExecStop"},
		"usage restarts":   {"RestartPreventExitStatus=2", "RestartPreventExitStatus=", "RestartPreventExitStatus"},
		"key not from %d":  {"ExecStart=/usr/local/bin/memfs worker --state-dir %S/memfs --environment-key-file %d/", "ExecStart=/usr/local/bin/memfs worker --state-dir %S/memfs --environment-key-file /etc/memfs/", "credential"},
		"normal user":      {"[Service]\n", "[Service]\nUser=memfs\n", "User=memfs"},
		"private mount ns": {"[Service]\n", "[Service]\nMountFlags=slave\n", "MountFlags"},
	} {
		// Anchored at a line start: the comments quote some settings.
		if !strings.Contains(good, "\n"+c.old) {
			t.Fatalf("%s: the worker unit no longer holds %q; update this test", name, c.old)
		}
		u, err := parseUnit("mutated", strings.Replace(good, "\n"+c.old, "\n"+c.new, 1))
		if err != nil {
			t.Fatal(err)
		}
		problems := strings.Join(checkWorkerUnit(u), "\n")
		if !strings.Contains(problems, c.want) {
			t.Errorf("%s: no problem naming %q reported; got:\n%s", name, c.want, problems)
		}
	}
	s, err := os.ReadFile(unitPath("memfs-serve.service"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit("mutated", strings.NewReplacer("DynamicUser=yes", "", "CapabilityBoundingSet=\n", "CapabilityBoundingSet=CAP_NET_ADMIN\n").Replace(string(s)))
	if err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(checkServeUnit(u), "\n"); !strings.Contains(p, "root") || !strings.Contains(p, "CAP_NET_ADMIN") {
		t.Errorf("a serve unit as root with a capability: problems not reported; got:\n%s", p)
	}
}

// TestSystemdVerify runs systemd-analyze verify on every unit, with the
// ExecStart binary pointed at a memfs built from this checkout (verify
// checks that it exists and is executable). Any output fails: verify
// exits 0 after many warnings (an unknown key, a bad time value).
func TestSystemdVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is not installed, and CI must verify the units: test/run-tests.sh installs the systemd package")
		}
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd; test/run-tests.sh does it as root), so the units are not verified")
	}
	bin := harness.Binary(t)
	units, _ := filepath.Glob(filepath.Join("systemd", "*.service"))
	mounts, _ := filepath.Glob(filepath.Join("systemd", "*.mount"))
	units = append(units, mounts...)
	if len(units) < 3 {
		t.Fatalf("found only %v under systemd/", units)
	}
	dir := t.TempDir()
	verify := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", p).CombinedOutput()
		if err != nil && len(out) == 0 {
			return err.Error()
		}
		return strings.TrimSpace(string(out))
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if out := verify(filepath.Base(u), strings.ReplaceAll(string(b), memfsPath, bin)); out != "" {
			t.Errorf("systemd-analyze verify %s:\n%s", u, out)
		}
	}
	// The same run on a unit with a mistake must complain, or the check
	// above proves nothing.
	if out := verify("broken.service", "[Service]\nExecStart="+bin+" serve\nTimeoutStopSec=soon\n"); !strings.Contains(out, "soon") {
		t.Errorf("systemd-analyze verify said nothing about TimeoutStopSec=soon (output %q)", out)
	}
}
