// Package harness runs real memfs processes for integration tests: it
// builds the memfs binary once per test binary and starts `memfs serve`
// on a free loopback port with its own data dir, over SQLite or a fresh
// PostgreSQL database.
//
// It also makes the world around those processes fail: a FaultProxy
// between clients and memfs serve cuts, blackholes or drops answers on
// the network, and SmallTmpfs with FillDisk give a state dir a disk that
// fills up. Like the processes, every fault is undone when the test ends.
package harness

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of a memfs binary built from this checkout.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "memfs-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "memfs")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/memfs")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Main runs a package's tests and then removes the binary Binary built,
// so test runs do not pile copies of memfs up in the temporary directory.
// Call it from TestMain.
func Main(m *testing.M) {
	// The memfs processes these tests start drive their passes with
	// SIGUSR1 (and a long interval), and check what each pass did: a quiet
	// pass (--memory-sync-quiet, default 1s) at a moment set by the
	// machine's speed would race them. A test of the quiet trigger turns
	// it on with the flag, which wins over the environment.
	os.Setenv("MEMFS_MEMORY_SYNC_QUIET", "off")
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// ServeOptions configure a memfs serve process.
type ServeOptions struct {
	// DB is the --db value ("" = SQLite in DataDir).
	DB string
	// DataDir is reused across restarts; "" = a new t.TempDir().
	DataDir string
	// AdminKey is passed as --admin-key; "" = a fixed test key.
	AdminKey string
	// Listen is the address ("" = 127.0.0.1:0, a free port).
	Listen string
	// Args are extra flags.
	Args []string
	// NoFile, when set, is the open-file limit (RLIMIT_NOFILE, soft and
	// hard) serve runs with, set by prlimit(1) before it starts.
	NoFile uint64
}

// TestAdminKey is the admin key test servers accept by default.
const TestAdminKey = "sk-memfs-test-admin-key-0123456789"

// Serve is a running memfs serve process.
type Serve struct {
	// URL is http://ADDR, or https://ADDR when Args hold serve's TLS
	// flags.
	URL      string
	Addr     string
	AdminKey string
	DataDir  string
	Opts     ServeOptions

	t      testing.TB
	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	output strings.Builder
}

// StartServe starts memfs serve and waits until it listens. It is
// stopped (SIGKILL if still running) when the test ends.
func StartServe(t testing.TB, opts ServeOptions) *Serve {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.AdminKey == "" {
		opts.AdminKey = TestAdminKey
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	s := &Serve{AdminKey: opts.AdminKey, DataDir: opts.DataDir, Opts: opts, t: t}
	s.start()
	t.Cleanup(func() { s.Kill() })
	return s
}

func (s *Serve) start() {
	s.t.Helper()
	args := []string{"serve", "--listen", s.Opts.Listen, "--data-dir", s.Opts.DataDir, "--admin-key", s.Opts.AdminKey, "--log-level", "warn"}
	if s.Opts.DB != "" {
		args = append(args, "--db", s.Opts.DB)
	}
	args = append(args, s.Opts.Args...)
	cmd := exec.Command(Binary(s.t), args...)
	if n := s.Opts.NoFile; n > 0 {
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			s.t.Fatalf("ServeOptions.NoFile needs prlimit(1) (util-linux): %v", err)
		}
		cmd = exec.Command(prlimit, append([]string{fmt.Sprintf("--nofile=%d:%d", n, n), "--", Binary(s.t)}, args...)...)
	}
	cmd.SysProcAttr = childAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{s}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			s.write(line + "\n")
			// http://ADDR, or https://ADDR with --tls-cert-file.
			if u, ok := strings.CutPrefix(line, "memfs serve: listening on "); ok {
				addrc <- u
			}
		}
	}()
	go func() { cmd.Wait(); close(s.done) }()
	select {
	case u := <-addrc:
		_, a, _ := strings.Cut(u, "://")
		s.Addr, s.URL = a, u
		// Restarts keep the same port, so clients keep working.
		s.Opts.Listen = a
	case <-s.done:
		s.t.Fatalf("memfs serve exited before listening:\n%s", s.Output())
	case <-time.After(60 * time.Second):
		s.t.Fatalf("memfs serve did not listen within 60s:\n%s", s.Output())
	}
}

type lockedWriter struct{ s *Serve }

func (w *lockedWriter) Write(p []byte) (int, error) { w.s.write(string(p)); return len(p), nil }

func (s *Serve) write(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.output.WriteString(p)
}

// Output is everything the process printed so far.
func (s *Serve) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Serve) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Stop sends SIGTERM and waits (bounded) for a clean exit; it fails the
// test if the process doesn't exit 0.
func (s *Serve) Stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(45 * time.Second):
		s.Kill()
		s.t.Fatalf("memfs serve did not exit within 45s of SIGTERM:\n%s", s.Output())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("memfs serve exited %d after SIGTERM:\n%s", code, s.Output())
	}
}

// Restart starts the process again with the same options, data dir and
// address (after Kill or Stop).
func (s *Serve) Restart() {
	s.t.Helper()
	s.start()
}

// Pid is the serve process's id.
func (s *Serve) Pid() int { return s.cmd.Process.Pid }

// Signal sends sig to the process.
func (s *Serve) Signal(sig os.Signal) { s.cmd.Process.Signal(sig) }

// Wait waits for the process to exit (bounded by ctx) and returns its exit code.
func (s *Serve) Wait(ctx context.Context) (int, error) {
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode(), nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// childAttr makes a child process end with the test binary: a test run
// killed by a timeout or by hand otherwise leaves servers and workers
// behind, holding ports and mounts. SIGTERM, not SIGKILL, so a worker
// still unmounts cleanly.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// APIHeaders are the headers memfs serve requires of a request to path
// (/v1/...) made with key, as the official SDK sends them: anthropic-version,
// the route family's anthropic-beta and the key as Authorization: Bearer
// (store/client sends the same). For tests that talk raw HTTP.
func APIHeaders(path, key string) http.Header {
	h := http.Header{}
	store.SetProtocol(h, path, key)
	return h
}

// RawAPIHeaders is APIHeaders as header lines, each ending in CRLF, for
// tests that write requests on a raw connection.
func RawAPIHeaders(path, key string) string {
	var b strings.Builder
	APIHeaders(path, key).Write(&b) // a strings.Builder does not fail
	return b.String()
}
