package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/test/harness"
)

// --metrics-listen: a real memfs serve and a real memfs mount serve
// /metrics; a scrape over HTTP, parsed with expfmt, shows what the test
// did.

// metricsURLRe matches the line a command prints with its metrics address.
var metricsURLRe = regexp.MustCompile(`memfs \w+: metrics on (http://\S+/metrics)`)

// metricsURL is the metrics address a process printed.
func metricsURL(t *testing.T, output string) string {
	t.Helper()
	m := metricsURLRe.FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("no metrics address in the output:\n%s", output)
	}
	return m[1]
}

// scraped is one scrape: metric families by name.
type scraped map[string]*dto.MetricFamily

// scrape GETs url and parses the Prometheus text format.
func scrape(t *testing.T, url string) scraped {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s, %v\n%s", url, resp.Status, err, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("scrape %s: content type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse the scrape of %s: %v\n%s", url, err, body)
	}
	return mfs
}

// series is the sample of name whose labels include labels (nil if none).
func (s scraped) series(name string, labels map[string]string) *dto.Metric {
	mf := s[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, 0 when the series is absent.
func (s scraped) value(name string, labels map[string]string) float64 {
	m := s.series(name, labels)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// TestMetricsServeAndMount: requests to memfs serve and file operations on
// a memfs mount show in their /metrics, with the values the test caused:
// request counts by route and status, FUSE operations by kind, pending
// changes with their reasons, a sync pass, a conflict, remote changes.
func TestMetricsServeAndMount(t *testing.T) {
	t.Parallel()
	start := time.Now()
	e := newMtEnvWith(t, map[string]string{"/a.md": "a\n", "/b.md": "b\n"},
		harness.ServeOptions{Args: []string{"--metrics-listen", "127.0.0.1:0"}})
	serveURL := metricsURL(t, e.serve.Output())
	ctx := context.Background()

	// The store service: three reads of a memory, one of a missing one.
	const memRoute = "/v1/memory_stores/{store_id}/memories/{memory_id}"
	ok := map[string]string{"method": "GET", "route": memRoute, "code": "200"}
	missing := map[string]string{"method": "GET", "route": memRoute, "code": "404"}
	before := scrape(t, serveURL)
	a := e.memories()["/a.md"]
	for range 3 {
		if _, err := e.cl.GetMemory(ctx, e.storeID, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cl.GetMemory(ctx, e.storeID, "mem_doesnotexist"); err == nil {
		t.Fatal("GetMemory of a missing memory succeeded")
	}
	after := scrape(t, serveURL)
	if d := after.value("memfs_http_requests_total", ok) - before.value("memfs_http_requests_total", ok); d != 3 {
		t.Errorf("memfs_http_requests_total%v went up by %v, want 3", ok, d)
	}
	if d := after.value("memfs_http_requests_total", missing) - before.value("memfs_http_requests_total", missing); d != 1 {
		t.Errorf("memfs_http_requests_total%v went up by %v, want 1", missing, d)
	}
	if d := after.value("memfs_http_request_duration_seconds", ok) - before.value("memfs_http_request_duration_seconds", ok); d != 3 {
		t.Errorf("memfs_http_request_duration_seconds%v counted %v more, want 3", ok, d)
	}
	for name, mf := range after {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), e.storeID) || strings.Contains(lp.GetValue(), a.ID) {
					t.Errorf("%s has an id in a label: %s=%q", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
	if after["go_goroutines"] == nil || after["process_start_time_seconds"] == nil {
		t.Error("memfs serve's scrape lacks the Go and process collectors")
	}

	// The mount.
	m := e.mount("--metrics-listen", "127.0.0.1:0")
	mountURL := metricsURL(t, m.Output())
	if mountURL == serveURL {
		t.Fatalf("memfs mount printed serve's metrics address %s", mountURL)
	}
	st := map[string]string{"store_id": e.storeID}
	op := func(name string) map[string]string { return map[string]string{"store_id": e.storeID, "op": name} }
	reason := func(r string) map[string]string { return map[string]string{"store_id": e.storeID, "reason": r} }
	base := scrape(t, mountURL)

	// A new file that goes up, one that is not UTF-8 (close fails with
	// EILSEQ; it stays pending), a folder, a move, a delete that waits
	// its 30 s, a read.
	mtMustSh(t, m.Dir, `printf 'new\n' > new.md && mkdir d && mv new.md d/new.md && rm b.md && cat a.md >/dev/null`)
	f, err := os.Create(filepath.Join(m.Dir, "bin.dat"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0xff, 0xfe}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EILSEQ) {
		t.Errorf("closing content that is not UTF-8: %v, want EILSEQ", err)
	}
	mtCheckPass(t, m.SyncNow(mtPassTimeout), map[string]int{"uploaded": 1})

	// A conflict: changed here, then in the store; the store wins.
	mtMustSh(t, m.Dir, `printf 'mine\n' > a.md`)
	theirs := "theirs\n"
	if _, err := e.cl.UpdateMemory(ctx, e.storeID, a.ID, store.UpdateMemoryInput{Content: &theirs}); err != nil {
		t.Fatal(err)
	}
	// A memory made elsewhere.
	if _, err := e.cl.CreateMemory(ctx, e.storeID, "/remote.md", "from elsewhere\n"); err != nil {
		t.Fatal(err)
	}
	var s scraped
	mtPoll(t, "the conflict and the remote memory on the mount and in the metrics", func() (bool, string) {
		_, errR := os.Stat(filepath.Join(m.Dir, "remote.md"))
		content, _ := os.ReadFile(filepath.Join(m.Dir, "a.md"))
		// Scraped after the files show: each is counted right after it
		// is shown.
		s = scrape(t, mountURL)
		conflicts, remote := s.value("memfs_sync_conflicts_total", st), s.value("memfs_sync_remote_changes_applied_total", st)
		return errR == nil && string(content) == theirs && conflicts >= 1 && remote >= 2,
			fmt.Sprintf("remote.md: %v, a.md %q; conflicts %v, remote changes %v", errR, content, conflicts, remote)
	})

	// FUSE operations, by kind: exactly one request for each of these calls.
	for name, want := range map[string]float64{"create": 2, "mkdir": 1, "rename": 1, "unlink": 1} {
		key := "memfs_fuse_operation_duration_seconds"
		if d := s.value(key, op(name)) - base.value(key, op(name)); d != want {
			t.Errorf("%s{op=%q} counted %v requests, want %v", key, name, d, want)
		}
	}
	for _, name := range []string{"lookup", "write", "flush", "read", "release"} {
		if n := s.value("memfs_fuse_operation_duration_seconds", op(name)); n == 0 {
			t.Errorf("no %s request counted", name)
		}
	}
	if n := s.value("memfs_fuse_operation_errors_total", op("flush")); n < 1 {
		t.Errorf("the failed close of bin.dat (EILSEQ) is not a flush error: %v", n)
	}
	if n := s.value("memfs_fuse_operation_errors_total", op("mkdir")); n != 0 {
		t.Errorf("mkdir errors: %v, want 0", n)
	}

	// The engine: one pass (SIGUSR1), its upload, what it left and why.
	for name, want := range map[string]float64{
		"memfs_sync_pending_uploads":              1, // bin.dat
		"memfs_sync_pending_deletes":              1, // b.md, within its 30 s
		"memfs_sync_pass_duration_seconds":        1,
		"memfs_sync_uploads_total":                1,
		"memfs_sync_deletes_total":                0,
		"memfs_sync_conflicts_total":              1,
		"memfs_sync_store_unreachable":            0,
		"memfs_sync_remote_changes_applied_total": 2, // remote.md, and a.md's winner
	} {
		if got := s.value(name, st); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for r, want := range map[string]float64{"not_utf8": 1, "delete_delay": 1, "unreachable": 0, "path_conflict": 0} {
		if got := s.value("memfs_sync_pending_changes", reason(r)); got != want {
			t.Errorf("memfs_sync_pending_changes{reason=%q} = %v, want %v", r, got, want)
		}
	}
	if got := s.value("memfs_sync_upload_failures_total", reason("not_utf8")); got != 1 {
		t.Errorf("memfs_sync_upload_failures_total{reason=not_utf8} = %v, want 1 (one pass left bin.dat)", got)
	}
	if got := s.value("memfs_sync_passes_total", map[string]string{"store_id": e.storeID, "outcome": "synced"}); got != 1 {
		t.Errorf("passes synced = %v, want 1", got)
	}
	if got := s.value("memfs_journal_bytes", st); got <= 0 {
		t.Errorf("memfs_journal_bytes = %v, want > 0 (changes are pending)", got)
	}
	last := s.value("memfs_sync_last_success_timestamp_seconds", st)
	if lt := time.Unix(0, int64(last*1e9)); lt.Before(start.Add(-time.Second)) || lt.After(time.Now()) {
		t.Errorf("memfs_sync_last_success_timestamp_seconds = %v (%s), want between the test's start %s and now", last, lt, start)
	}
	if s["go_goroutines"] == nil || s["process_resident_memory_bytes"] == nil {
		t.Error("memfs mount's scrape lacks the Go and process collectors")
	}
	// memfs mount is not the store service, nor a worker.
	if s["memfs_http_requests_total"] != nil {
		t.Error("memfs mount exports the store service's request metrics")
	}
	for name := range s {
		if strings.HasPrefix(name, "memfs_worker_") {
			t.Errorf("memfs mount exports the worker's %s", name)
		}
	}

	// The file that is not UTF-8 stays in the journal: exit 3.
	mtStopExit(t, m, syscall.SIGINT, sgExitLeft)
	if _, err := http.Get(mountURL); err == nil {
		t.Errorf("the metrics endpoint %s still answers after memfs mount exited", mountURL)
	}
}

// takenPort listens on a free loopback port for the test's length.
func takenPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestMetricsListenBadAddress: a taken --metrics-listen port fails memfs
// mount, serve and worker at start with a clear error and exit 1, before
// anything is mounted, created or opened; a malformed address is a usage
// error (exit 2).
func TestMetricsListenBadAddress(t *testing.T) {
	t.Parallel()
	e := newMtEnv(t, nil)
	taken := takenPort(t)
	wantTaken := "metrics: listen on " + taken

	t.Run("mount", func(t *testing.T) {
		o := e.opts("--metrics-listen", taken)
		o.StateDir = filepath.Join(t.TempDir(), "state")
		o.Dir = filepath.Join(t.TempDir(), "mnt")
		code, stdout, stderr := harness.RunMount(t, o, mtExitTimeout)
		if code != 1 || !strings.Contains(stderr, wantTaken) || !strings.Contains(stderr, "address already in use") {
			t.Errorf("memfs mount with a taken metrics port: exit %d, want 1 and %q:\n%s%s", code, wantTaken, stdout, stderr)
		}
		if strings.Contains(stdout, "mounted at") || harness.IsMounted(o.Dir) {
			t.Error("memfs mount mounted although its metrics port was taken")
		}
		for _, p := range []string{o.Dir, o.StateDir} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("memfs mount created %s before failing", p)
			}
		}
	})
	t.Run("serve", func(t *testing.T) {
		dataDir := filepath.Join(t.TempDir(), "data")
		p := harness.StartProc(t, harness.ProcOptions{}, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--metrics-listen", taken)
		if code := p.Wait(mtExitTimeout); code != 1 || !strings.Contains(p.Output(), wantTaken) {
			t.Errorf("memfs serve with a taken metrics port: exit %d, want 1 and %q:\n%s", code, wantTaken, p.Output())
		}
		if _, err := os.Stat(dataDir); err == nil {
			t.Errorf("memfs serve created its data dir before failing")
		}
	})
	t.Run("worker", func(t *testing.T) {
		stateDir := filepath.Join(t.TempDir(), "state")
		root := filepath.Join(t.TempDir(), "memory")
		p := harness.StartProc(t, harness.ProcOptions{Env: []string{"MEMFS_ENVIRONMENT_KEY=sk-memfs-env-unused", "MEMFS_METRICS_LISTEN=" + taken}},
			"worker", "--api-url", e.serve.URL, "--environment-id", "env_unused", "--state-dir", stateDir, "--memory-root", root)
		if code := p.Wait(mtExitTimeout); code != 1 || !strings.Contains(p.Output(), wantTaken) {
			t.Errorf("memfs worker with a taken metrics port (from MEMFS_METRICS_LISTEN): exit %d, want 1 and %q:\n%s", code, wantTaken, p.Output())
		}
		for _, d := range []string{stateDir, root} {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("memfs worker created %s before failing", d)
			}
		}
	})
	t.Run("malformed", func(t *testing.T) {
		o := e.opts("--metrics-listen", "9464")
		o.Dir = filepath.Join(t.TempDir(), "mnt")
		code, stdout, stderr := harness.RunMount(t, o, mtExitTimeout)
		if code != 2 || !strings.Contains(stderr, "--metrics-listen must be HOST:PORT") {
			t.Errorf("memfs mount --metrics-listen 9464: exit %d, want 2 and a usage error:\n%s%s", code, stdout, stderr)
		}
	})
}

// hasStore reports whether any series of the scrape is labelled storeID.
func (s scraped) hasStore(storeID string) bool {
	for _, mf := range s {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "store_id" && lp.GetValue() == storeID {
					return true
				}
			}
		}
	}
	return false
}

// TestMetricsWorker: memfs worker's /metrics counts the work item it
// claimed, shows each mounted store of the session while it runs, and
// once the archived session ended cleanly counts that ending and drops
// the stores' series.
func TestMetricsWorker(t *testing.T) {
	t.Parallel()
	e := newWkEnv(t)
	rw := e.newStore("Metered", map[string]string{"/a.md": "a\n"})
	ro := e.newStore("Docs", map[string]string{"/d.md": "d\n"})
	w := e.startWorker("--memory-sync-interval", "60s", "--metrics-listen", "127.0.0.1:0")
	sess := e.newSession(wkRW(rw), wkRO(ro))
	e.waitRunning(w, sess)
	url := metricsURL(t, w.Output())
	mtMustSh(t, sess.Resources[0].MountPath, `cat a.md >/dev/null && echo b > b.md`)
	mtMustSh(t, sess.Resources[1].MountPath, `cat d.md >/dev/null`)

	s := scrape(t, url)
	ending := func(e string) map[string]string { return map[string]string{"ending": e} }
	for name, want := range map[string]float64{"memfs_worker_work_items_claimed_total": 1, "memfs_worker_heartbeat_failures_total": 0} {
		if got := s.value(name, nil); got != want || s[name] == nil {
			t.Errorf("%s = %v (present: %v), want %v", name, got, s[name] != nil, want)
		}
	}
	if got := s.value("memfs_worker_work_items_ended_total", ending("clean")); got != 0 || s.series("memfs_worker_work_items_ended_total", ending("clean")) == nil {
		t.Errorf("ended{clean} = %v before the session ended, want a 0 series", got)
	}
	for id, want := range map[string]float64{rw: 1, ro: 0} {
		l := map[string]string{"store_id": id}
		if s.series("memfs_sync_pending_uploads", l) == nil {
			t.Fatalf("no pending gauge for mounted store %s", id)
		}
		if got := s.value("memfs_sync_pending_uploads", l); got != want {
			t.Errorf("pending uploads of %s = %v, want %v", id, got, want)
		}
		if got := s.value("memfs_fuse_operation_duration_seconds", map[string]string{"store_id": id, "op": "read"}); got == 0 {
			t.Errorf("no read counted on %s", id)
		}
	}
	if got := s.value("memfs_fuse_operation_duration_seconds", map[string]string{"store_id": rw, "op": "create"}); got != 1 {
		t.Errorf("creates on %s = %v, want 1", rw, got)
	}

	if _, err := e.admin.ArchiveSession(context.Background(), sess.ID); err != nil {
		t.Fatal(err)
	}
	w.WaitOutput(1, wkBeatTimeout, "session ending", "ending=clean", sess.ID)
	e.waitWorkState(sess.ID, store.WorkStopped, wkExitTimeout)
	mtPoll(t, "the ended session in the worker's metrics", func() (bool, string) {
		s = scrape(t, url)
		clean := s.value("memfs_worker_work_items_ended_total", ending("clean"))
		return clean == 1 && !s.hasStore(rw) && !s.hasStore(ro), fmt.Sprintf("ended{clean} %v; series of %s: %v, of %s: %v", clean, rw, s.hasStore(rw), ro, s.hasStore(ro))
	})
	wkStopWorker(t, w, syscall.SIGTERM)
}

// TestMetricsUp: memfs up serves the store service's metrics and the
// worker's on one endpoint.
func TestMetricsUp(t *testing.T) {
	t.Parallel()
	mtRequireFUSE(t)
	up := startUp(t, "--metrics-listen", "127.0.0.1:0")
	url := metricsURL(t, up.proc.Output())
	mtMustSh(t, up.dir, `cat README.md >/dev/null`)
	s := scrape(t, url)
	poll := map[string]string{"method": "GET", "route": "/v1/environments/{env_id}/work/poll", "code": "200"}
	if got := s.value("memfs_http_requests_total", poll); got < 1 {
		t.Errorf("memfs_http_requests_total%v = %v, want the worker's polls counted", poll, got)
	}
	if got := s.value("memfs_worker_work_items_claimed_total", nil); got != 1 {
		t.Errorf("claimed = %v, want 1 (the demo session)", got)
	}
	if got := s.value("memfs_fuse_operation_duration_seconds", map[string]string{"store_id": up.storeID, "op": "read"}); got == 0 {
		t.Errorf("no read of the demo store counted")
	}
	up.proc.Signal(syscall.SIGINT)
	if code := up.proc.Wait(wkExitTimeout); code != 0 {
		t.Fatalf("memfs up exited %d after Ctrl-C:\n%s", code, up.proc.Output())
	}
}
