package worker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The environment of the agent's shell (--run-tools).
//
// The SDK's bash tool inherits the worker's environment minus ANTHROPIC_*
// unless it is given one. The worker's environment holds memfs's keys
// (MEMFS_ENVIRONMENT_KEY, MEMFS_REPLAY_API_KEY, ANTHROPIC_WORK_SECRET for
// memfs session, ...) and whatever the service manager put there, so a
// deny-list would have to know every name a deployment uses. The shell gets an
// allow-list instead: the few variables a shell needs to behave normally,
// taken from the worker's environment, plus what the operator names with
// --tool-env KEY=VALUE and --tool-env-file FILE. A memfs or Anthropic
// credential name is refused even there: no key reaches the agent by
// accident.

// toolEnvAllowed are the variables of the worker's environment the agent's
// shell gets (and every LC_* locale variable). The SDK's bash tool sets TERM,
// PS1, PS2 and HISTFILE itself.
var toolEnvAllowed = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"LANG": true, "LANGUAGE": true, "TZ": true, "TMPDIR": true,
}

// defaultToolPath is the shell's PATH when the worker's environment has none.
const defaultToolPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ToolEnv is the agent shell's environment: the allowed variables of environ
// (os.Environ's form), then extra (which wins). The result is never nil: the
// SDK reads nil as "inherit the worker's environment".
func ToolEnv(environ []string, extra map[string]string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (toolEnvAllowed[k] || strings.HasPrefix(k, "LC_")) && !IsCredentialName(k) {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = defaultToolPath
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// IsCredentialName reports whether an environment variable's name is one of
// memfs's or Anthropic's credentials: MEMFS_* or ANTHROPIC_* naming a KEY,
// TOKEN or SECRET (MEMFS_ENVIRONMENT_KEY, MEMFS_API_KEY, MEMFS_ADMIN_KEY,
// MEMFS_REPLAY_API_KEY, ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
// ANTHROPIC_ENVIRONMENT_KEY, ANTHROPIC_WORK_SECRET, ...).
func IsCredentialName(name string) bool {
	u := strings.ToUpper(name)
	if !strings.HasPrefix(u, "MEMFS_") && !strings.HasPrefix(u, "ANTHROPIC_") {
		return false
	}
	return strings.Contains(u, "KEY") || strings.Contains(u, "TOKEN") || strings.Contains(u, "SECRET")
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseToolEnv parses one KEY=VALUE (--tool-env, a line of --tool-env-file).
// The name must be a shell variable name and not a credential's
// (IsCredentialName); the value is taken verbatim and may be empty.
func ParseToolEnv(kv string) (name, value string, err error) {
	name, value, ok := strings.Cut(kv, "=")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%q is not KEY=VALUE", kv)
	case !envNameRe.MatchString(name):
		return "", "", fmt.Errorf("%q is not a variable name (letters, digits and _, not starting with a digit)", name)
	case IsCredentialName(name):
		return "", "", fmt.Errorf("%s is a memfs or Anthropic credential; it is never given to the agent's shell", name)
	case strings.ContainsRune(value, 0):
		return "", "", fmt.Errorf("the value of %s holds a NUL byte", name)
	}
	return name, value, nil
}

// ReadToolEnvFile reads --tool-env-file: one KEY=VALUE per line, each as
// ParseToolEnv takes it; blank lines and lines starting with # are skipped.
// Values are verbatim: no quotes are removed and nothing is expanded.
func ReadToolEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, err := ParseToolEnv(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return env, nil
}
