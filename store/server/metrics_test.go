package server_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
	"github.com/memfs/memfs/store/sqlstore/sqltest"
)

// requestCount is memfs_http_requests_total for these labels (0 if absent).
func requestCount(t *testing.T, reg *prometheus.Registry, method, route, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "memfs_http_requests_total" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range mm.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["method"] == method && l["route"] == route && l["code"] == code {
				return mm.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestRequestMetrics: requests are counted and timed by method, route
// pattern and status code; no id from a path becomes a label, and a
// method a client made up is "other".
func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s, _ := startLoggedServer(t, server.Options{Metrics: reg})

	var st store.Store
	s.request(t, "POST", "/v1/memory_stores", map[string]any{"name": "counted"}).decode(t, &st)
	const route = "/v1/memory_stores/{store_id}/memories/{memory_id}"
	m := s.createMemory(t, st.ID, "/a.md", "a")
	for i := 0; i < 3; i++ {
		s.request(t, "GET", "/v1/memory_stores/"+st.ID+"/memories/"+m.ID, nil)
	}
	s.request(t, "GET", "/v1/memory_stores/"+st.ID+"/memories/mem_nothere", nil)
	s.requestWith(t, "GET", "/v1/memory_stores", nil, nil) // no key
	s.request(t, "GET", "/v2/nothing", nil)
	s.srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/v2/nothing", nil))

	for _, c := range []struct {
		method, route, code string
		want                float64
	}{
		{"POST", "/v1/memory_stores", "200", 1},
		{"POST", "/v1/memory_stores/{store_id}/memories", "200", 1},
		{"GET", route, "200", 3},
		{"GET", route, "404", 1},
		{"GET", "/v1/memory_stores", "401", 1},
		{"GET", "/", "404", 1},
		{"other", "/", "404", 1},
	} {
		if got := requestCount(t, reg, c.method, c.route, c.code); got != c.want {
			t.Errorf("memfs_http_requests_total{method=%s,route=%s,code=%s} = %v, want %v", c.method, c.route, c.code, got, c.want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	timed := 0
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if v := lp.GetValue(); v == st.ID || v == m.ID || v == "mem_nothere" || v == "BREW" {
					t.Errorf("%s has a label %s=%q", mf.GetName(), lp.GetName(), v)
				}
			}
			if mf.GetName() == "memfs_http_request_duration_seconds" {
				timed += int(mm.GetHistogram().GetSampleCount())
			}
		}
	}
	if timed != 9 {
		t.Errorf("the duration histograms hold %d requests, want 9", timed)
	}
}

// A registry that already holds the request metrics is refused at New.
func TestRequestMetricsRegisteredTwice(t *testing.T) {
	db, err := sqlstore.Open(context.Background(), sqltest.SQLite(t), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg := prometheus.NewRegistry()
	if _, err := server.New(server.Options{Backend: db, Metrics: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(server.Options{Backend: db, Metrics: reg}); err == nil {
		t.Fatal("a second server registered the same metrics on one registry")
	}
}
