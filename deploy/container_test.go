package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/memfs/memfs/store/client"
)

// compose is the part of a compose file these checks read.
type compose struct {
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	User            string            `yaml:"user"`
	Command         []string          `yaml:"command"`
	Environment     map[string]string `yaml:"environment"`
	Devices         []string          `yaml:"devices"`
	CapAdd          []string          `yaml:"cap_add"`
	SecurityOpt     []string          `yaml:"security_opt"`
	Secrets         []string          `yaml:"secrets"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Volumes         []yaml.Node       `yaml:"volumes"`
}

// bind is a long-syntax bind mount of a service.
type bind struct {
	Type   string `yaml:"type"`
	Source string `yaml:"source"`
	Target string `yaml:"target"`
	Bind   struct {
		Propagation string `yaml:"propagation"`
	} `yaml:"bind"`
}

func (s composeService) binds() []bind {
	var out []bind
	for _, n := range s.Volumes {
		var b bind
		if n.Kind == yaml.MappingNode && n.Decode(&b) == nil && b.Type == "bind" {
			out = append(out, b)
		}
	}
	return out
}

// isRoot says whether a compose user: runs as root ("" takes the image's
// user, which the Dockerfile makes non-root).
func isRoot(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u == "0" || u == "root"
}

func parseCompose(text string) (*compose, error) {
	var c compose
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// checkCompose checks the serve + worker + sandbox pattern: the worker
// can mount FUSE, its mounts reach the host (rshared) and the sandboxes
// (rslave), both memfs services get time for a final sync, and keys come
// from files.
func checkCompose(c *compose) []string {
	var p []string
	serve, ok1 := c.Services["serve"]
	worker, ok2 := c.Services["worker"]
	if !ok1 || !ok2 {
		return []string{"compose file lacks a serve or a worker service"}
	}
	for name, s := range map[string]composeService{"serve": serve, "worker": worker} {
		d, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || d < minStopTimeout {
			p = append(p, fmt.Sprintf("%s: stop_grace_period %q: at least %v", name, s.StopGracePeriod, minStopTimeout))
		}
		if len(s.Command) == 0 || s.Command[0] != name {
			p = append(p, fmt.Sprintf("%s: command %q does not run memfs %s", name, s.Command, name))
		}
	}
	if isRoot(serve.User) {
		p = append(p, "serve runs as root; it needs no privilege")
	}
	if !isRoot(worker.User) {
		p = append(p, fmt.Sprintf("worker: user %q, but mount(2) needs the container's root", worker.User))
	}
	if !slices.ContainsFunc(worker.Devices, func(d string) bool { return strings.SplitN(d, ":", 2)[0] == "/dev/fuse" }) {
		p = append(p, "worker: no /dev/fuse in devices")
	}
	if !slices.Contains(worker.CapAdd, "SYS_ADMIN") && !slices.Contains(worker.CapAdd, "CAP_SYS_ADMIN") {
		p = append(p, "worker: cap_add lacks SYS_ADMIN")
	}
	if !slices.Contains(worker.SecurityOpt, "apparmor:unconfined") && !slices.Contains(worker.SecurityOpt, "apparmor=unconfined") {
		p = append(p, "worker: Docker's default AppArmor profile denies mount; security_opt lacks apparmor:unconfined")
	}
	root := worker.Environment["MEMFS_MEMORY_ROOT"]
	if root == "" {
		root = "/mnt/memory"
	}
	if sr := serve.Environment["MEMFS_MEMORY_ROOT"]; sr != "" && sr != root {
		p = append(p, fmt.Sprintf("serve's memory root %s is not the worker's %s", sr, root))
	}
	if !slices.ContainsFunc(worker.binds(), func(b bind) bool { return b.Target == root && b.Bind.Propagation == "rshared" }) {
		p = append(p, fmt.Sprintf("worker: no bind mount of the memory root %s with propagation rshared: its mounts would stay in its container", root))
	}
	sandboxes := 0
	for name, s := range c.Services {
		if name == "serve" || name == "worker" {
			continue
		}
		for _, b := range s.binds() {
			if b.Target == root {
				sandboxes++
				if b.Bind.Propagation != "rslave" {
					p = append(p, fmt.Sprintf("%s: the memory root bound with propagation %q, want rslave (sees the worker's later mounts, sends none back)", name, b.Bind.Propagation))
				}
			}
		}
	}
	if sandboxes == 0 {
		p = append(p, "no sandbox service shows the memory root binding")
	}
	// A plain http:// URL of a host that is not loopback is refused by
	// the worker unless MEMFS_INSECURE_HTTP says the network is trusted.
	if u := worker.Environment["MEMFS_API_URL"]; u != "" {
		insecure, _ := strconv.ParseBool(worker.Environment["MEMFS_INSECURE_HTTP"])
		if err := client.CheckBaseURL(u, insecure); err != nil {
			p = append(p, fmt.Sprintf("worker: MEMFS_API_URL %s: %v", u, err))
		}
	}
	// The environment key: a file given as a compose secret.
	keyFile := ""
	for i, a := range worker.Command {
		if a == "--environment-key-file" && i+1 < len(worker.Command) {
			keyFile = worker.Command[i+1]
		} else if v, ok := strings.CutPrefix(a, "--environment-key-file="); ok {
			keyFile = v
		}
	}
	secret, ok := strings.CutPrefix(keyFile, "/run/secrets/")
	if !ok || !slices.Contains(worker.Secrets, secret) || c.Secrets[secret].File == "" {
		p = append(p, fmt.Sprintf("worker: the environment key must come from a secret file (--environment-key-file /run/secrets/NAME), got %q", keyFile))
	}
	return p
}

func TestCompose(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("container", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCompose(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkCompose(c) {
		t.Error(p)
	}
}

func TestComposeChecksCatch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("container", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	for name, c := range map[string]struct{ old, new, want string }{
		"private propagation": {"propagation: rshared", "propagation: private", "rshared"},
		"sandbox shared":      {"propagation: rslave", "propagation: rshared", "rslave"},
		"short grace":         {"stop_grace_period: 45s", "stop_grace_period: 10s", "stop_grace_period"},
		"no fuse":             {"- /dev/fuse:/dev/fuse", "- /dev/null:/dev/null", "/dev/fuse"},
		"no SYS_ADMIN":        {"cap_add: [SYS_ADMIN, ", "cap_add: [", "SYS_ADMIN"},
		"apparmor":            {"- apparmor:unconfined", "- label:disable", "apparmor"},
		"worker not root":     {`user: "0:0"`, `user: "1000:1000"`, "root"},
		"plain http refused":  {`MEMFS_INSECURE_HTTP: "true"`, `MEMFS_INSECURE_HTTP: "false"`, "plain http://"},
		"key on the command":  {`"--environment-key-file", "/run/secrets/environment_key"`, `"--environment-key-file", "/etc/k"`, "secret"},
	} {
		if !strings.Contains(good, c.old) {
			t.Fatalf("%s: compose.yaml no longer holds %q; update this test", name, c.old)
		}
		cf, err := parseCompose(strings.Replace(good, c.old, c.new, 1))
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(checkCompose(cf), "\n"); !strings.Contains(p, c.want) {
			t.Errorf("%s: no problem naming %q; got:\n%s", name, c.want, p)
		}
	}
}

// dockerfileStage is one FROM of a Dockerfile with its instructions.
type dockerfileStage struct {
	from  string
	lines []string // instructions, continuations joined
}

func parseDockerfile(text string) []dockerfileStage {
	var stages []dockerfileStage
	var cur string
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if cur == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		cur += t
		if strings.HasPrefix(strings.ToUpper(cur), "FROM ") {
			stages = append(stages, dockerfileStage{from: strings.TrimSpace(cur[5:])})
		} else if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, cur)
		}
		cur = ""
	}
	return stages
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("container", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(string(b))
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stages", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build.from, "golang:1.26-bookworm") {
		t.Errorf("build stage FROM %s, want golang:1.26-bookworm", build.from)
	}
	if !slices.ContainsFunc(build.lines, func(l string) bool {
		return strings.Contains(l, "CGO_ENABLED=0") && strings.Contains(l, "go build") && strings.Contains(l, "./cmd/memfs")
	}) {
		t.Error("no CGO_ENABLED=0 go build of ./cmd/memfs: the binary would need libc the runtime image lacks")
	}
	user := ""
	var entry string
	for _, l := range final.lines {
		if v, ok := strings.CutPrefix(l, "USER "); ok {
			user = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "ENTRYPOINT "); ok {
			entry = v
		}
	}
	if user == "" || isRoot(user) {
		t.Errorf("the runtime image runs as %q; memfs serve must not run as root", user)
	}
	if !strings.Contains(entry, `"memfs"`) && !strings.Contains(entry, "/memfs\"") {
		t.Errorf("ENTRYPOINT %s does not run memfs", entry)
	}
	// The build context is the repository root: Dockerfile.dockerignore
	// beside the Dockerfile keeps .git out (a worktree's .git is a file
	// that points outside the context).
	ig, err := os.ReadFile(filepath.Join("container", "Dockerfile.dockerignore"))
	if err != nil || !slices.Contains(strings.Fields(string(ig)), ".git") {
		t.Errorf("Dockerfile.dockerignore must exclude .git (err %v)", err)
	}
}
