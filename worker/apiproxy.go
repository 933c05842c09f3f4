package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// apiProxy is how the sandboxed tool runner reaches the API: an HTTP
// server on a unix socket bound into the sandbox, run by the worker. The
// runner sends no credential; the proxy adds the session token (which so
// never enters the sandbox) and forwards only what the SDK's tool runner
// and its skills need, for this session only:
//
//	GET  /v1/sessions/{id} and below (the session, its events, the stream)
//	POST /v1/sessions/{id}/events     (tool results)
//	GET  /v1/skills/...               (the agent's skills)
//
// Anything else is a 403 naming the route. Whoever reaches the socket —
// the runner, or the agent's shell, which runs as the same user — can do
// no more than the runner does for the session anyway.
type apiProxy struct {
	dir   string // the socket's private directory
	sock  string
	ln    net.Listener
	srv   *http.Server
	done  chan struct{}
	allow func(method, path string) bool
}

// maxProxyBody bounds what the sandbox may post (a tool result).
const maxProxyBody = 16 << 20

// startAPIProxy serves sessionID's routes of target with token on a new
// socket, owned by uid:gid (who must connect), in a private directory.
// transport carries the forwarded requests (the worker's, with its CA).
func startAPIProxy(target, sessionID, token string, uid, gid uint32, transport http.RoundTripper, log logrus.FieldLogger) (*apiProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("the API URL %q: %w", target, err)
	}
	// A short path: a unix socket's is at most 107 bytes.
	dir, err := os.MkdirTemp(socketBase(), "memfs-tools-")
	if err != nil {
		return nil, fmt.Errorf("the tools' API socket: %w", err)
	}
	p := &apiProxy{dir: dir, sock: filepath.Join(dir, "api.sock"), done: make(chan struct{}), allow: sessionRoutes(sessionID)}
	if p.ln, err = net.Listen("unix", p.sock); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the tools' API socket: %w", err)
	}
	if err := errors.Join(os.Chown(p.sock, int(uid), int(gid)), os.Chmod(p.sock, 0o600)); err != nil {
		p.ln.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the tools' API socket: %w", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
			for _, h := range []string{"Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				r.Out.Header.Del(h)
			}
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		Transport:     transport,
		FlushInterval: -1, // the event stream goes through as it comes
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				log.WithError(err).WithField("route", r.Method+" "+r.URL.Path).Warn("the tools' API proxy could not reach the API")
			}
			http.Error(w, "memfs: the API could not be reached", http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !p.allow(r.Method, r.URL.Path) {
				log.WithField("route", r.Method+" "+r.URL.Path).Warn("the tools' sandbox asked for a route it is not given")
				http.Error(w, fmt.Sprintf("memfs: %s %s is not a route the agent's tools are given", r.Method, r.URL.Path), http.StatusForbidden)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxProxyBody)
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		defer close(p.done)
		p.srv.Serve(p.ln) // ends with Close
	}()
	return p, nil
}

// socketBase is where the proxies' sockets go: /run when it is there (a
// tmpfs of root's), else the temporary directory.
func socketBase() string {
	if fi, err := os.Stat("/run"); err == nil && fi.IsDir() && os.Geteuid() == 0 {
		return "/run"
	}
	return os.TempDir()
}

// close stops the proxy and removes its socket.
func (p *apiProxy) close() {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.srv.Shutdown(ctx) // then closed
	p.srv.Close()
	<-p.done
	os.RemoveAll(p.dir)
}

// sessionRoutes is the proxy's allow-list for one session.
func sessionRoutes(sessionID string) func(method, path string) bool {
	base := "/v1/sessions/" + sessionID
	return func(method, path string) bool {
		if strings.Contains(path, "/../") || strings.HasSuffix(path, "/..") || strings.Contains(path, "//") {
			return false
		}
		switch method {
		case http.MethodGet:
			return path == base || strings.HasPrefix(path, base+"/") || strings.HasPrefix(path, "/v1/skills/")
		case http.MethodPost:
			return path == base+"/events"
		}
		return false
	}
}
