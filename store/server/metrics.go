package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics counts the API's requests for Prometheus, by the same
// route the access log names (the mux pattern, never the raw path, so no
// id becomes a label), the method, and the status code. They are
// observed where the access line is written (accesslog.go), once the
// answer is done.
//
// Labels are bounded: routes are the registered patterns plus "/" (no
// route) and "-" (answered by net/http itself); a method outside the
// standard ones is "other", since a client can send any token.
type requestMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

// requestBuckets are in seconds, up to the change feed's 30 s long poll.
var requestBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// newRequestMetrics registers the request metrics on reg; nil reg: none.
func newRequestMetrics(reg prometheus.Registerer) (*requestMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := []string{"method", "route", "code"}
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memfs_http_requests_total",
			Help: "API requests answered, by method, route pattern and status code."}, labels),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "memfs_http_request_duration_seconds",
			Help: "Time from a request's arrival to the end of its answer (long polls included).", Buckets: requestBuckets}, labels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *requestMetrics) observe(method, route string, status int, took time.Duration) {
	if m == nil {
		return
	}
	code := strconv.Itoa(status)
	method = methodLabel(method)
	m.requests.WithLabelValues(method, route, code).Inc()
	m.seconds.WithLabelValues(method, route, code).Observe(took.Seconds())
}

// methodLabel is method if it is a standard one, else "other".
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}
