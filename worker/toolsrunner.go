package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The tool runner inside the sandbox (memfs __tools-runner; sandbox.go).
//
// The worker starts it through bwrap and setpriv, writes one line of JSON
// (runnerConfig) to its stdin and keeps stdin open: its end (EOF) asks the
// runner to stop. The runner writes its log lines, JSON, to stdout; the
// worker logs them as its own, and reads the last one, which carries
// "tools_end", as the runner's end. It holds no key: its client reaches
// the API through the worker's proxy on sandboxSocket, which adds the
// session token.

// runnerConfig is what the worker tells the runner.
type runnerConfig struct {
	SessionID     string            `json:"session_id"`
	Session       json.RawMessage   `json:"session"` // as the worker fetched it (the agent's skills)
	Workdir       string            `json:"workdir"`
	AllowedRoots  []string          `json:"allowed_roots"`
	ReadOnlyRoots []string          `json:"read_only_roots"`
	Env           map[string]string `json:"env"`
	MaxIdle       *time.Duration    `json:"max_idle,omitempty"`
	MaxFileBytes  int64             `json:"max_file_bytes,omitempty"`
	AllowRoot     bool              `json:"allow_root,omitempty"`
	LogLevel      string            `json:"log_level,omitempty"`
}

// How a runner ended, on the wire (the "tools_end" field of its last line).
const (
	runnerEndClean    = "clean"    // the session terminated, or stayed idle past MaxIdle
	runnerEndError    = "error"    // the runner failed ("error" says why)
	runnerEndShutdown = "shutdown" // asked to stop
	runnerEndField    = "tools_end"
)

// maxRunnerConfig bounds the config line (the session JSON is in it).
const maxRunnerConfig = 8 << 20

// RunToolsRunner is memfs __tools-runner: it runs the session's tools as
// told on in, logging to out, until the session ends or in closes. It
// returns the process's exit status.
func RunToolsRunner(in io.Reader, out io.Writer) int {
	// First: nothing of this process (its memory, /proc/self/fd, environ)
	// is readable by the agent's shell, which runs as the same user.
	dumpErr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	log := logrus.New()
	log.SetOutput(out)
	log.SetFormatter(&logrus.JSONFormatter{DisableTimestamp: true})
	end := func(kind string, err error) int {
		e := log.WithField(runnerEndField, kind)
		if err != nil {
			e.WithError(err).Error("the session tool runner failed")
			return 1
		}
		e.Info("the tool runner stopped")
		return 0
	}
	if dumpErr != nil {
		return end(runnerEndError, fmt.Errorf("make the runner non-dumpable: %w", dumpErr))
	}
	br := bufio.NewReaderSize(in, 64<<10)
	line, err := readLine(br, maxRunnerConfig)
	if err != nil {
		return end(runnerEndError, fmt.Errorf("read the runner's configuration: %w", err))
	}
	var cfg runnerConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		return end(runnerEndError, fmt.Errorf("the runner's configuration: %w", err))
	}
	if lvl, err := logrus.ParseLevel(cfg.LogLevel); err == nil {
		log.SetLevel(lvl)
	}
	if os.Geteuid() == 0 && !cfg.AllowRoot {
		return end(runnerEndError, errors.New("the tool runner runs as root, and --tools-user root was not given"))
	}
	if err := os.Chdir(cfg.Workdir); err != nil {
		return end(runnerEndError, fmt.Errorf("enter the work directory: %w", err))
	}
	// The runner's own environment is the shell's: the grep tool starts rg
	// with it.
	os.Clearenv()
	for k, v := range cfg.Env {
		os.Setenv(k, v) // names were checked by the worker
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.Copy(io.Discard, br) // EOF or an error: stop either way
		cancel()
	}()
	res := runSessionTools(ctx, cfg, log)
	switch {
	case res.ending == EndClean:
		return end(runnerEndClean, nil)
	case res.ending == EndError:
		return end(runnerEndError, res.err)
	default:
		return end(runnerEndShutdown, nil)
	}
}

// readLine reads one line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > max {
			return nil, fmt.Errorf("a line over %d bytes", max)
		}
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(out) > 0:
			return out, nil
		default:
			return nil, err
		}
	}
}

// sandboxClient is the runner's HTTP client: every request goes to the
// worker's proxy socket, whatever its URL says.
func sandboxClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sandboxSocket)
		},
		MaxIdleConns: 8, IdleConnTimeout: 90 * time.Second,
	}}
}

// runSessionTools sets up the agent's skills, runs the SDK's session tool
// runner until it ends, and closes it, the tools and the skills.
func runSessionTools(ctx context.Context, cfg runnerConfig, log logrus.FieldLogger) toolResult {
	log = log.WithField("session", cfg.SessionID)
	// The proxy adds the session token; the runner holds none. The header
	// the SDK insists on carries a placeholder the proxy replaces.
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL("http://memfs-tools-proxy"),
		option.WithAuthToken("memfs-sandbox"), option.WithHTTPClient(sandboxClient()))
	tc := &agenttoolset.AgentToolContext{Workdir: cfg.Workdir, Env: cfg.Env, MaxFileBytes: cfg.MaxFileBytes,
		AllowedRoots: cfg.AllowedRoots, ReadOnlyRoots: cfg.ReadOnlyRoots}
	var ss anthropic.BetaManagedAgentsSession
	if err := json.Unmarshal(cfg.Session, &ss); err != nil {
		log.WithError(err).Warn("the session's agent could not be read: its skills are not set up")
	} else if err := tc.SetupSkillsFromSession(ctx, client, &ss); err != nil {
		log.WithError(err).Warn("setting up the agent's skills failed")
	}
	// Deferred in this order, run in reverse: the shell is killed, then the
	// skills one session downloaded are removed, as the SDK's worker does.
	defer func() {
		if err := tc.Cleanup(); err != nil {
			log.WithError(err).Warn("removing the agent's skills failed")
		}
	}()
	tools := agenttoolset.BetaAgentToolset20260401(tc)
	defer agenttoolset.CloseAll(tools)

	runner := client.Beta.Sessions.Events.NewToolRunner(ctx, cfg.SessionID, anthropic.SessionToolRunnerOptions{
		Tools: tools, MaxIdle: cfg.MaxIdle, Logger: newSlog(log),
	})
	for runner.Next() {
		call := runner.Current()
		log.WithFields(logrus.Fields{"tool": call.Name, "tool_use_id": call.ToolUseID, "is_error": call.IsError, "posted": call.Posted}).
			Info("dispatched tool")
	}
	err := runner.Err()
	runner.Close() // documented to return nil
	switch {
	case errors.Is(err, anthropic.ErrSessionTerminated):
		log.Info("the session terminated: its tool runner stopped")
		return toolResult{ending: EndClean}
	case errors.Is(err, anthropic.ErrIdleTimeout):
		log.WithField("max_idle", cfg.MaxIdle).Info("the session stayed idle after its turn ended: its tool runner stopped")
		return toolResult{ending: EndClean}
	case ctx.Err() != nil:
		return toolResult{ending: EndShutdown}
	case err == nil:
		err = errors.New("the session tool runner stopped without a reason")
	}
	return toolResult{ending: EndError, err: err}
}
