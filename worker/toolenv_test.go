package worker

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestToolEnv(t *testing.T) {
	environ := []string{
		"PATH=/bin:/usr/bin", "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC",
		"MEMFS_ENVIRONMENT_KEY=sk-env", "MEMFS_REPLAY_API_KEY=sk-replay", "MEMFS_API_KEY=sk-admin",
		"ANTHROPIC_API_KEY=sk-ant", "ANTHROPIC_WORK_SECRET=eyJ", "MEMFS_API_URL=http://x",
		"AWS_SECRET_ACCESS_KEY=aws", "INVOCATION_ID=abc", "NOEQUALS",
	}
	got := ToolEnv(environ, map[string]string{"GIT_AUTHOR_NAME": "agent", "LANG": "en_US.UTF-8"})
	want := map[string]string{"PATH": "/bin:/usr/bin", "HOME": "/root", "LANG": "en_US.UTF-8", "LC_ALL": "C", "TZ": "UTC", "GIT_AUTHOR_NAME": "agent"}
	if !maps.Equal(got, want) {
		t.Errorf("ToolEnv = %v, want %v", got, want)
	}
	if got := ToolEnv(nil, nil); got == nil || got["PATH"] != defaultToolPath || len(got) != 1 {
		t.Errorf("ToolEnv of an empty environment = %v, want only the default PATH (and never nil)", got)
	}
}

func TestParseToolEnv(t *testing.T) {
	for in, want := range map[string][2]string{
		"A=b":          {"A", "b"},
		"_X1=":         {"_X1", ""},
		"URL=a=b c":    {"URL", "a=b c"},
		"GH_TOKEN=tok": {"GH_TOKEN", "tok"}, // not memfs's or Anthropic's: the operator's choice
	} {
		k, v, err := ParseToolEnv(in)
		if err != nil || k != want[0] || v != want[1] {
			t.Errorf("ParseToolEnv(%q) = %q, %q, %v; want %q, %q", in, k, v, err, want[0], want[1])
		}
	}
	for in, why := range map[string]string{
		"NOEQUALS":                "not KEY=VALUE",
		"=x":                      "not a variable name",
		"1A=x":                    "not a variable name",
		"A-B=x":                   "not a variable name",
		"MEMFS_ENVIRONMENT_KEY=x": "credential",
		"memfs_admin_key=x":       "credential",
		"ANTHROPIC_API_KEY=x":     "credential",
		"ANTHROPIC_AUTH_TOKEN=x":  "credential",
		"ANTHROPIC_WORK_SECRET=x": "credential",
		"A=x\x00y":                "NUL",
	} {
		if _, _, err := ParseToolEnv(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseToolEnv(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

func TestReadToolEnvFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tool.env")
	os.WriteFile(p, []byte("# for the agent\n\nGIT_AUTHOR_NAME=The Agent\r\n  # indented comment\nQUOTED=\"kept\"\n"), 0o600)
	got, err := ReadToolEnvFile(p)
	if want := map[string]string{"GIT_AUTHOR_NAME": "The Agent", "QUOTED": `"kept"`}; err != nil || !maps.Equal(got, want) {
		t.Errorf("ReadToolEnvFile = %v, %v; want %v", got, err, want)
	}
	os.WriteFile(p, []byte("A=1\nMEMFS_REPLAY_API_KEY=x\n"), 0o600)
	if _, err := ReadToolEnvFile(p); err == nil || !strings.Contains(err.Error(), p+":2:") {
		t.Errorf("a credential on line 2: %v, want an error naming %s:2", err, p)
	}
	if _, err := ReadToolEnvFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was read")
	}
}

// TestHideCredentials runs itself again in a child process (HideCredentials
// changes the whole process) started with keys in its environment, and
// checks there that they are gone from the environment, from
// /proc/self/environ and from a child's environment, that other variables
// are kept, and that the process is no longer dumpable.
func TestHideCredentials(t *testing.T) {
	if os.Getenv("MEMFS_TEST_HIDE_CHILD") == "1" {
		hideCredentialsChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHideCredentials$", "-test.v")
	cmd.Env = append(os.Environ(), "MEMFS_TEST_HIDE_CHILD=1", "MEMFS_ENVIRONMENT_KEY=sk-memfs-env-0123456789abcdef",
		"ANTHROPIC_API_KEY=sk-ant-0123456789abcdef", "MEMFS_API_URL=http://127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHideCredentials") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
}

func hideCredentialsChild(t *testing.T) {
	names, err := HideCredentials()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Errorf("hid %v, want the two keys", names)
	}
	environ, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sk-memfs-env-0123456789abcdef", "sk-ant-0123456789abcdef"} {
		if strings.Contains(string(environ), secret) {
			t.Errorf("/proc/self/environ still holds %s", secret)
		}
		if strings.Contains(strings.Join(os.Environ(), "\n"), secret) {
			t.Errorf("os.Environ still holds %s", secret)
		}
	}
	if !strings.Contains(string(environ), "MEMFS_API_URL=http://127.0.0.1:1") || os.Getenv("MEMFS_API_URL") == "" {
		t.Error("a variable that is no key was lost")
	}
	child, err := exec.Command("env").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(child), "KEY=") {
		t.Errorf("a child's environment holds a key:\n%s", child)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("dumpable = %d, %v; want 0", d, err)
	}
}
