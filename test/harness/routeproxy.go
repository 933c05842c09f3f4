package harness

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"
)

// RouteProxy is an HTTP reverse proxy in front of a memfs serve process
// that answers the routes a test picks itself, with a status in the API's
// error envelope, as a server without them (or one stricter than memfs
// serve) would; everything else passes. It records every request with the
// credential it carried, so a test can check which routes a client used
// with which key. Long polls and event streams pass unbuffered.
//
// Rules and records are safe for concurrent use; the proxy is closed in
// t.Cleanup.
type RouteProxy struct {
	// URL is the proxy's base URL, for a client's --api-url.
	URL string

	srv *httptest.Server

	mu    sync.Mutex
	rules []routeRule     // GUARDED_BY(mu)
	log   []RoutedRequest // GUARDED_BY(mu)
}

// RoutedRequest is one request the proxy saw.
type RoutedRequest struct {
	Method, Path string
	// Credential is the x-api-key header, or the token of an
	// Authorization: Bearer header.
	Credential string
	// Status is what the proxy answered itself (0: passed to the server).
	Status int
}

type routeRule struct {
	method string
	path   *regexp.Regexp
	status int
	typ    string
	msg    string
}

// NewRouteProxy starts a proxy to target, the server's base URL.
func NewRouteProxy(t testing.TB, target string) *RouteProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("NewRouteProxy: %v", err)
	}
	p := &RouteProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := RoutedRequest{Method: r.Method, Path: r.URL.Path, Credential: credential(r)}
		rule := p.match(r)
		if rule != nil {
			rec.Status = rule.status
		}
		p.mu.Lock()
		p.log = append(p.log, rec)
		p.mu.Unlock()
		if rule == nil {
			rp.ServeHTTP(w, r)
			return
		}
		w.Header().Set("content-type", "application/json")
		w.Header().Set("request-id", "req_routeproxy")
		w.WriteHeader(rule.status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_routeproxy"}`, rule.typ, rule.msg)
	}))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

func credential(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	const bearer = "Bearer "
	if a := r.Header.Get("authorization"); len(a) > len(bearer) && a[:len(bearer)] == bearer {
		return a[len(bearer):]
	}
	return ""
}

// Refuse makes the proxy answer requests of method ("" for any) whose path
// matches pathRe with status, the error type typ and msg, from now on.
func (p *RouteProxy) Refuse(method, pathRe string, status int, typ, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, routeRule{method: method, path: regexp.MustCompile(pathRe), status: status, typ: typ, msg: msg})
}

func (p *RouteProxy) match(r *http.Request) *routeRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.rules {
		rl := &p.rules[i]
		if (rl.method == "" || rl.method == r.Method) && rl.path.MatchString(r.URL.Path) {
			return rl
		}
	}
	return nil
}

// Requests is every request seen so far, in order.
func (p *RouteProxy) Requests() []RoutedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]RoutedRequest(nil), p.log...)
}
