package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
)

// Options configure a Server.
type Options struct {
	// Backend is the store (required).
	Backend store.Backend
	// Log receives request errors (default: logrus's standard logger).
	Log logrus.FieldLogger
	// MaxBodyBytes caps a request body (default 1 MiB; memory content is
	// capped at 100 KiB separately, JSON escaping may need more).
	MaxBodyBytes int64
	// MaxWait caps a change-feed long poll (default 30 s).
	MaxWait time.Duration
	// KeyCacheTTL is how long a verified key is trusted without a database
	// look-up (default 30 s). Session tokens are never cached.
	KeyCacheTTL time.Duration
	// MemoryRoot is the parent of the mount paths given to sessions
	// (default /mnt/memory).
	MemoryRoot string
	// AuthFailureThreshold and AuthFailureWindow: the
	// AuthFailureThreshold-th 401 within AuthFailureWindow from one
	// remote address logs a warning, then at most one a window per
	// address (default 5 within 1 minute; see authstorm.go).
	AuthFailureThreshold int
	AuthFailureWindow    time.Duration
	// Metrics, when set, receives the request metrics (metrics.go).
	Metrics prometheus.Registerer
	// StreamKeepAlive is how often a session event stream with nothing
	// to send sends a ping frame (default 15 s; events_stream.go).
	StreamKeepAlive time.Duration
	// StreamWriteTimeout bounds one write to an event stream (default
	// 10 s): a client that stops reading loses its stream rather than
	// holding the handler, and a graceful shutdown, for ever.
	StreamWriteTimeout time.Duration
	// BodyReadTimeout bounds reading a request's body, from the end of
	// its headers (default 10 s): a client that sends a body slowly, or
	// not at all, can't hold a connection and its handler. Requests that
	// wait long (work polls, the change feed, event streams) send no body,
	// and the bound ends with the body.
	BodyReadTimeout time.Duration
	// NoChangeFeed turns the change feed (the memfs extension) off: its
	// route then answers 404 as the hosted API does for a route it does not
	// have, and mounts follow their stores through the memory versions.
	NoChangeFeed bool
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if o.Backend == nil {
		return errors.New("server: Backend is required")
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	if o.KeyCacheTTL <= 0 {
		o.KeyCacheTTL = 30 * time.Second
	}
	if o.MemoryRoot == "" {
		o.MemoryRoot = "/mnt/memory"
	}
	if o.AuthFailureThreshold <= 0 {
		o.AuthFailureThreshold = 5
	}
	if o.AuthFailureWindow <= 0 {
		o.AuthFailureWindow = time.Minute
	}
	if o.StreamKeepAlive <= 0 {
		o.StreamKeepAlive = 15 * time.Second
	}
	if o.StreamWriteTimeout <= 0 {
		o.StreamWriteTimeout = 10 * time.Second
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = 10 * time.Second
	}
	return nil
}

// Server serves the API.
type Server struct {
	opts Options
	b    store.Backend
	log  logrus.FieldLogger
	mux  *http.ServeMux
	keys keyCache
	// storms warns about repeated 401s from one address.
	storms *authStorms
	// metrics counts requests (nil: no metrics).
	metrics *requestMetrics

	shutdownOnce sync.Once
	shutdown     chan struct{} // closed by BeginShutdown
}

// New builds a Server.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, b: opts.Backend, log: opts.Log, mux: http.NewServeMux(), shutdown: make(chan struct{})}
	s.keys.ttl = opts.KeyCacheTTL
	var err error
	if s.metrics, err = newRequestMetrics(opts.Metrics); err != nil {
		return nil, fmt.Errorf("server: register the request metrics: %w", err)
	}
	s.storms = &authStorms{threshold: opts.AuthFailureThreshold, window: opts.AuthFailureWindow,
		maxAddrs: defaultMaxStormAddrs, log: opts.Log}
	s.routes()
	return s, nil
}

// BeginShutdown makes every change-feed long poll answer now and ends
// every session event stream, so that http.Server.Shutdown finds no
// request waiting for commits.
func (s *Server) BeginShutdown() {
	s.shutdownOnce.Do(func() { close(s.shutdown) })
}

// handlerFunc is an API handler: it returns the status and value to encode,
// or an error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error)

func (s *Server) handle(pattern string, h handlerFunc) {
	s.handleRoute(pattern, false, h)
}

// handleLongPoll registers a long poll: its access line is debug when it
// answers with nothing new (accesslog.go).
func (s *Server) handleLongPoll(pattern string, h handlerFunc) {
	s.handleRoute(pattern, true, h)
}

func (s *Server) handleRoute(pattern string, longPoll bool, h handlerFunc) {
	route := routeOf(pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := accessOf(r)
		rec.route, rec.longPoll = route, longPoll
		if err := checkProtocol(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		rec.p = p
		r.Body = s.boundBody(w, r)
		status, v, err := h(w, r, p)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		rec.empty = longPoll && emptyAnswer(v)
		writeJSON(w, status, v)
	})
}

// boundBody is r's body capped at MaxBodyBytes and, when there is one,
// bounded in time by BodyReadTimeout: the connection's read deadline is
// set now and cleared when the body ends.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) io.ReadCloser {
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	if r.ContentLength == 0 {
		return body
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout)) != nil {
		return body // not net/http's server (a test's recorder): no deadline to set
	}
	return &deadlineBody{ReadCloser: body, clear: func() { rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody clears the read deadline set for a body when the body has
// all arrived. After an error (the deadline passed, the body is too
// large) it stays: net/http reads what is left of a body before it
// answers, which must fail at once, not wait for a client that stopped.
type deadlineBody struct {
	io.ReadCloser
	clear func()
	once  sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.clear)
	}
	return n, err
}

type ctxKey int

const requestIDKey ctxKey = 0

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// ServeHTTP assigns the request id, dispatches, and writes the access
// line once the answer is done.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// A connection serving a request is never closed to make room (conns.go).
	gc := connOf(r.Context())
	gc.update((*connTable).begin)
	defer gc.update((*connTable).end)
	var b [12]byte
	rand.Read(b[:])
	id := "req_" + hex.EncodeToString(b[:])
	w.Header().Set("request-id", id)
	rec := &accessRecord{}
	r = r.WithContext(withAccessRecord(context.WithValue(r.Context(), requestIDKey, id), rec))
	aw := &answerWriter{ResponseWriter: w}
	s.mux.ServeHTTP(aw, r)
	s.logAccess(r, rec, aw, time.Since(start))
}

// Handler returns the server as an http.Handler.
func (s *Server) Handler() http.Handler { return s }

func (s *Server) routes() {
	// Memory stores.
	s.handle("POST /v1/memory_stores", s.createStore)
	s.handle("GET /v1/memory_stores", s.listStores)
	s.handle("GET /v1/memory_stores/{store_id}", s.getStore)
	s.handle("POST /v1/memory_stores/{store_id}", s.updateStore)
	s.handle("POST /v1/memory_stores/{store_id}/archive", s.archiveStore)
	s.handle("DELETE /v1/memory_stores/{store_id}", s.deleteStore)
	// Memories.
	s.handle("POST /v1/memory_stores/{store_id}/memories", s.createMemory)
	s.handle("GET /v1/memory_stores/{store_id}/memories", s.listMemories)
	s.handle("GET /v1/memory_stores/{store_id}/memories/{memory_id}", s.getMemory)
	s.handle("POST /v1/memory_stores/{store_id}/memories/{memory_id}", s.updateMemory)
	s.handle("DELETE /v1/memory_stores/{store_id}/memories/{memory_id}", s.deleteMemory)
	// Versions.
	s.handle("GET /v1/memory_stores/{store_id}/memory_versions", s.listVersions)
	s.handle("GET /v1/memory_stores/{store_id}/memory_versions/{version_id}", s.getVersion)
	s.handle("POST /v1/memory_stores/{store_id}/memory_versions/{version_id}/redact", s.redactVersion)
	// The change feed (memfs extension), unless turned off: then the
	// route is unknown (404 below), as on the hosted API.
	if !s.opts.NoChangeFeed {
		s.handleLongPoll("GET /v1/memory_stores/{store_id}/changes", s.changes)
	}
	// Environments, sessions and the work queue.
	s.handle("POST /v1/environments", s.createEnvironment)
	s.handle("GET /v1/environments", s.listEnvironments)
	s.handle("GET /v1/environments/{env_id}", s.getEnvironment)
	s.handle("POST /v1/environments/{env_id}/archive", s.archiveEnvironment)
	s.handle("POST /v1/environments/{env_id}/healthcheck", s.enqueueHealthcheck)
	s.handle("POST /v1/agents", s.createAgent)
	s.handle("GET /v1/agents", s.listAgents)
	s.handle("GET /v1/agents/{agent_id}", s.getAgent)
	s.handle("POST /v1/agents/{agent_id}", s.updateAgent)
	s.handle("POST /v1/agents/{agent_id}/archive", s.archiveAgent)
	s.handle("POST /v1/sessions", s.createSession)
	s.handle("GET /v1/sessions", s.listSessions)
	s.handle("GET /v1/sessions/{session_id}", s.getSession)
	s.handle("POST /v1/sessions/{session_id}/archive", s.archiveSession)
	s.handle("GET /v1/sessions/{session_id}/events", s.listEvents)
	s.handle("POST /v1/sessions/{session_id}/events", s.sendEvents)
	s.handleStream("GET /v1/sessions/{session_id}/events/stream", s.streamEvents)
	s.handleLongPoll("GET /v1/environments/{env_id}/work/poll", s.pollWork)
	s.handle("GET /v1/environments/{env_id}/work/stats", s.workStats)
	s.handle("GET /v1/environments/{env_id}/work", s.listWork)
	s.handle("GET /v1/environments/{env_id}/work/{work_id}", s.getWork)
	s.handle("POST /v1/environments/{env_id}/work/{work_id}", s.updateWork)
	s.handle("POST /v1/environments/{env_id}/work/{work_id}/ack", s.ackWork)
	s.handle("POST /v1/environments/{env_id}/work/{work_id}/heartbeat", s.heartbeatWork)
	s.handle("POST /v1/environments/{env_id}/work/{work_id}/stop", s.stopWork)
	// Everything else: a 404 in the error envelope.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		accessOf(r).route = "/"
		s.writeError(w, r, store.Errorf(store.ErrNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
}
