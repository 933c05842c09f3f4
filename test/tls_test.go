package test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/test/harness"
)

// These tests run memfs serve with --tls-cert-file/--tls-key-file and its
// clients (the worker, an admin command) against it over real sockets,
// with a CA and server certificates made here for 127.0.0.1 and
// localhost; and they check the refusal to send a key over plain http://
// to a host that is not this one.

// tlsCA is a test certificate authority.
type tlsCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	file   string // its certificate, PEM
	serial int64  // the last serial number issued
}

// newTLSCA makes a CA and writes its certificate to dir/ca.pem.
func newTLSCA(t *testing.T, dir string) *tlsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "memfs test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &tlsCA{cert: cert, key: key, file: filepath.Join(dir, "ca.pem"), serial: 1}
	tlsWritePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a server certificate for 127.0.0.1, ::1 and localhost,
// signed by ca, and its key to certFile and keyFile, and returns its
// serial number.
func (ca *tlsCA) issue(t *testing.T, certFile, keyFile string) *big.Int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: "memfs serve"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	tlsWritePEM(t, certFile, "CERTIFICATE", der)
	tlsWritePEM(t, keyFile, "PRIVATE KEY", kder)
	return tmpl.SerialNumber
}

// tlsWritePEM replaces file with one PEM block, by rename: serve, reading
// it on SIGHUP, sees the old file or the new one, never half of one.
func tlsWritePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// tlsServe starts memfs serve with a certificate of a new CA (and extra
// args) and returns it and the CA.
func tlsServe(t *testing.T, dir string, args ...string) (*harness.Serve, *tlsCA, string, string) {
	t.Helper()
	ca := newTLSCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, certFile, keyFile)
	s := harness.StartServe(t, harness.ServeOptions{Args: append([]string{"--tls-cert-file", certFile, "--tls-key-file", keyFile}, args...)})
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("memfs serve with TLS listens on %s, want https://", s.URL)
	}
	return s, ca, certFile, keyFile
}

// TestTLSWorkerSession: a worker given serve's CA with --ca-file runs a
// session over HTTPS: its store mounts and a file written in the mount
// reaches the store. The same worker without --ca-file ends at its first
// poll, exit 1, saying that the certificate is not trusted and what to do.
func TestTLSWorkerSession(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	base := t.TempDir()
	e := &wkEnv{t: t, base: base, root: filepath.Join(base, "mnt"), stateDir: filepath.Join(base, "state")}
	serve, ca, _, _ := tlsServe(t, base, "--memory-root", e.root)
	e.serve = serve
	admin, err := client.New(client.Options{BaseURL: serve.URL, APIKey: serve.AdminKey, CAFile: ca.file})
	if err != nil {
		t.Fatal(err)
	}
	e.admin = admin
	env, err := admin.CreateEnvironment(context.Background(), client.CreateEnvironmentInput{Name: "tls " + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	e.envID, e.envKey = env.ID, env.EnvironmentKey

	untrusting := harness.StartProc(t, harness.ProcOptions{}, "worker", "--api-url", serve.URL, "--environment-id", e.envID,
		"--environment-key", e.envKey, "--memory-root", e.root, "--state-dir", filepath.Join(base, "state-untrusting"))
	if code := untrusting.Wait(wkExitTimeout); code != 1 {
		t.Fatalf("the worker without --ca-file exited %d, want 1:\n%s", code, untrusting.Output())
	}
	if out := untrusting.Output(); !strings.Contains(out, "certificate signed by unknown authority") || !strings.Contains(out, "--ca-file") {
		t.Errorf("the worker without --ca-file does not say that the certificate is not trusted and what to do:\n%s", out)
	}

	st := e.newStore("Secure Notes", map[string]string{"/a.md": "a\n"})
	// The session's tools run too: their sandbox reaches the API through
	// the worker's proxy, which trusts what the worker trusts.
	w := e.startToolsWorker(nil, "--ca-file", ca.file, "--memory-sync-interval", "5s")
	sess := e.newSession(wkRW(st))
	e.waitRunning(w, sess)
	dir := sess.Resources[0].MountPath
	mtMustSh(t, dir, `echo over-tls > b.md`)
	pctx, cancel := context.WithTimeout(context.Background(), tlResultTimeout)
	defer cancel()
	post := exec.CommandContext(pctx, harness.Binary(t), "sessions", "events", "post", sess.ID, "--ca-file", ca.file, "--tool", "write", "--wait-result",
		"--input", `{"file_path":"`+dir+`/c.md","content":"by a tool, over tls\n"}`)
	post.Env = append(os.Environ(), "MEMFS_API_URL="+serve.URL, "MEMFS_API_KEY="+serve.AdminKey)
	if out, err := post.CombinedOutput(); err != nil {
		t.Fatalf("a write tool call over TLS: %v\n%s", err, out)
	}
	e.waitStore(st, map[string]string{"/a.md": "a\n", "/b.md": "over-tls\n", "/c.md": "by a tool, over tls\n"}, wkSyncTimeout)
	wkStopWorker(t, w, syscall.SIGTERM)
}

// tlsPeerSerial makes a new TLS connection to addr trusting ca and
// returns the serial number of the certificate the server presents.
func tlsPeerSerial(t *testing.T, addr string, ca *tlsCA) *big.Int {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestTLSReloadOnSIGHUP: after the pair's files are replaced and serve
// gets SIGHUP, a new connection sees the new certificate; a bad pair on
// SIGHUP (a key that is not the certificate's) is logged as an error and
// the previous certificate goes on serving, and serve keeps running.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serve, ca, certFile, keyFile := tlsServe(t, dir)
	first := tlsPeerSerial(t, serve.Addr, ca)

	second := ca.issue(t, certFile, keyFile)
	serve.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(wkQuickTimeout)
	for tlsPeerSerial(t, serve.Addr, ca).Cmp(second) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("serve still presents serial %v %s after SIGHUP with a new pair (want %v):\n%s", first, wkQuickTimeout, second, serve.Output())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}

	// A bad pair: the key of another certificate.
	otherCert, otherKey := filepath.Join(dir, "other.pem"), filepath.Join(dir, "other-key.pem")
	ca.issue(t, otherCert, otherKey)
	b, err := os.ReadFile(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	serve.Signal(syscall.SIGHUP)
	deadline = time.Now().Add(wkQuickTimeout)
	for !strings.Contains(serve.Output(), "private key does not match public key") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged within %s of SIGHUP with a mismatched pair:\n%s", wkQuickTimeout, serve.Output())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if out := serve.Output(); !strings.Contains(out, "level=error") || !strings.Contains(out, "still serving the previous certificate") {
		t.Errorf("the bad pair is not logged as an error that says the old certificate stays:\n%s", out)
	}
	if got := tlsPeerSerial(t, serve.Addr, ca); got.Cmp(second) != 0 {
		t.Errorf("after a bad pair, serve presents serial %v, want the previous %v", got, second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if code, err := serve.Wait(ctx); err == nil {
		t.Fatalf("serve exited %d on SIGHUP:\n%s", code, serve.Output())
	}
	serve.Stop()
}

// TestTLSServeBadPair: one TLS file without the other, and a pair that
// does not match, are usage errors at start (exit 2) that say why.
func TestTLSServeBadPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTLSCA(t, dir)
	c1, k1 := filepath.Join(dir, "c1.pem"), filepath.Join(dir, "k1.pem")
	c2, k2 := filepath.Join(dir, "c2.pem"), filepath.Join(dir, "k2.pem")
	ca.issue(t, c1, k1)
	ca.issue(t, c2, k2)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file", c1}, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--tls-key-file", k1}, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--tls-cert-file", c1, "--tls-key-file", k2}, "private key does not match public key"},
		{[]string{"--tls-cert-file", filepath.Join(dir, "missing.pem"), "--tls-key-file", k1}, "no such file"},
	} {
		data := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), wkExitTimeout)
		out, err := exec.CommandContext(ctx, harness.Binary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", data}, tc.args...)...).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve %v: %v, %s; want exit 2 saying %q", tc.args, err, out, tc.want)
		}
		if ents, _ := os.ReadDir(data); len(ents) > 0 {
			t.Errorf("serve %v left files in its data dir: %v", tc.args, ents)
		}
	}
}

// tlsHostIP is an address of this host that is not a loopback one, with
// a listener on it that counts the connections it accepts (and closes
// them at once). It skips the test on a host without one.
func tlsHostIP(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var ip net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("this host has no IPv4 address but loopback")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), accepted
}

// TestPlainHTTPRefused: an admin command and a worker given a plain
// http:// URL of a host that is not a loopback one exit 2 with the fix,
// and nothing connects to the address; with --insecure-http
// (MEMFS_INSECURE_HTTP=true for the worker) they connect, and fail
// otherwise. Plain http:// to 127.0.0.1 and localhost keeps working.
func TestPlainHTTPRefused(t *testing.T) {
	t.Parallel()
	addr, accepted := tlsHostIP(t)
	url := "http://" + addr
	const fix = "use https:// with memfs serve --tls-cert-file"
	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wkExitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.Binary(t), args...)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("memfs %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	}
	key := []string{"MEMFS_API_KEY=sk-memfs-test-not-a-real-key"}
	worker := func(extra ...string) []string {
		return append([]string{"worker", "--api-url", url, "--environment-id", "env_x", "--environment-key", "sk-env-x",
			"--memory-root", filepath.Join(t.TempDir(), "mnt"), "--state-dir", t.TempDir()}, extra...)
	}

	for _, args := range [][]string{{"stores", "ls", "--api-url", url}, worker()} {
		code, out := run(key, args...)
		if code != 2 || !strings.Contains(out, "refusing to send an API key over plain http://") || !strings.Contains(out, fix) || !strings.Contains(out, "--insecure-http") {
			t.Errorf("memfs %s with %s: exit %d, want 2 with the fix:\n%s", args[0], url, code, out)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the refused commands connected to %s %d time(s)", addr, n)
	}

	// With the flag they connect; the listener hangs up, so they fail.
	code, out := run(key, "stores", "ls", "--api-url", url, "--insecure-http")
	if code != 1 || strings.Contains(out, fix) {
		t.Errorf("memfs stores ls --insecure-http: exit %d, want 1 (no answer):\n%s", code, out)
	}
	before := accepted.Load()
	if before == 0 {
		t.Errorf("memfs stores ls --insecure-http did not connect to %s", addr)
	}
	w := harness.StartProc(t, harness.ProcOptions{Env: []string{"MEMFS_INSECURE_HTTP=true"}}, worker()...)
	w.WaitOutput(1, wkQuickTimeout, "worker polling for work")
	deadline := time.Now().Add(wkQuickTimeout)
	for accepted.Load() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the worker with MEMFS_INSECURE_HTTP=true did not connect to %s within %s:\n%s", addr, wkQuickTimeout, w.Output())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	w.Signal(syscall.SIGTERM)
	if code := w.Wait(wkExitTimeout); code != 0 || strings.Contains(w.Output(), fix) {
		t.Errorf("the worker with MEMFS_INSECURE_HTTP=true exited %d, want 0 after SIGTERM:\n%s", code, w.Output())
	}

	// Loopback stays plain http://, without the flag.
	serve := harness.StartServe(t, harness.ServeOptions{})
	for _, u := range []string{serve.URL, "http://localhost:" + serve.Addr[strings.LastIndex(serve.Addr, ":")+1:]} {
		code, out := run([]string{"MEMFS_API_KEY=" + serve.AdminKey}, "stores", "ls", "--api-url", u)
		if code != 0 {
			t.Errorf("memfs stores ls --api-url %s: exit %d, want 0:\n%s", u, code, out)
		}
	}
}

// TestTLSAdminCAFile: an admin command trusts serve's certificate with
// --ca-file or MEMFS_CA_FILE, says the certificate is not trusted (exit
// 1) without, and refuses a CA file without a certificate (exit 2).
func TestTLSAdminCAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serve, ca, _, keyFile := tlsServe(t, dir)
	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wkExitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.Binary(t), append([]string{"stores", "create", "tls-notes", "--api-url", serve.URL}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"MEMFS_API_KEY=" + serve.AdminKey}, env...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run(nil, "--ca-file", ca.file); code != 0 {
		t.Errorf("with --ca-file: exit %d:\n%s", code, out)
	}
	if code, out := run([]string{"MEMFS_CA_FILE=" + ca.file}); code != 0 {
		t.Errorf("with MEMFS_CA_FILE: exit %d:\n%s", code, out)
	}
	if code, out := run(nil); code != 1 || !strings.Contains(out, "is not trusted") || !strings.Contains(out, "--ca-file") || strings.Contains(out, "is memfs serve running") {
		t.Errorf("without a CA file: exit %d, want 1 saying the certificate is not trusted and what to do:\n%s", code, out)
	}
	for _, f := range []string{keyFile, filepath.Join(dir, "missing.pem")} {
		if code, out := run(nil, "--ca-file", f); code != 2 || !strings.Contains(out, "--ca-file") {
			t.Errorf("--ca-file %s: exit %d, want 2:\n%s", f, code, out)
		}
	}
}

// TestTLSHTTP1Only: serve over TLS speaks HTTP/1.1 only, as over plain
// HTTP, so that its connection limits see one request per connection at
// a time; a client offering h2 gets HTTP/1.1.
func TestTLSHTTP1Only(t *testing.T) {
	t.Parallel()
	serve, ca, _, _ := tlsServe(t, t.TempDir())
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c, err := tls.Dial("tcp", serve.Addr, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("serve negotiated %q, want HTTP/1.1", p)
	}
}
