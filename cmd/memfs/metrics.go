package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/worker"
	"github.com/memfs/memfs/worker/metrics"
)

// addMetricsFlag adds --metrics-listen (env MEMFS_METRICS_LISTEN) to the
// commands that run for long: serve, mount, worker, session and up.
func addMetricsFlag(fs *flag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-listen", envOr("", "MEMFS_METRICS_LISTEN"),
		"serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (env MEMFS_METRICS_LISTEN; empty: off; port 0 picks a free one)")
}

// metricsEndpoint serves one process's metrics: a registry of its own
// (never the library's global one, which any imported package may fill),
// with the Go runtime's and the process's collectors, at GET /metrics in
// the Prometheus text format. Lifecycle: listenMetrics, then Close.
type metricsEndpoint struct {
	reg  *prometheus.Registry
	srv  *http.Server
	done chan struct{}
}

// listenMetrics listens on addr ("" = no metrics: nil, nil) and serves
// the registry there; it prints the bound address ("memfs CMD: metrics on
// http://ADDR/metrics"), as serve prints its own. It is called before
// the command starts anything, so an address that is malformed (a usage
// error) or taken (exit 1) fails the command before it opens a database
// or mounts.
func listenMetrics(cmd, addr string, log logrus.FieldLogger) (*metricsEndpoint, error) {
	if addr == "" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, usagef("--metrics-listen must be HOST:PORT, like 127.0.0.1:9464, not %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w (is another memfs using it? pick another --metrics-listen)", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// A collector that fails drops its own series, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      log,
	}))
	e := &metricsEndpoint{reg: reg, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Warn("the metrics endpoint stopped")
		}
	}()
	fmt.Printf("memfs %s: metrics on http://%s/metrics\n", cmd, ln.Addr())
	return e, nil
}

// registerer is where the command's metrics go; nil without an endpoint.
func (e *metricsEndpoint) registerer() prometheus.Registerer {
	if e == nil {
		return nil // an untyped nil: "no metrics" to whoever checks
	}
	return e.reg
}

// workerMetrics are the metrics of the mounts of this process, and with
// workItems those of its work items (memfs_worker_*: worker, session and
// up, not mount); nil without an endpoint.
func (e *metricsEndpoint) workerMetrics(workItems bool) (worker.Metrics, error) {
	if e == nil {
		return nil, nil
	}
	m, err := metrics.New(e.reg, metrics.Options{WorkItems: workItems})
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// Close stops serving (a scrape in flight gets a second to finish).
func (e *metricsEndpoint) Close() error {
	if e == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	<-e.done
	return err
}
