package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
)

// DefaultMaxBodyBytes bounds a POST body when Settings.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 8 << 20

// RecordsPath is where apps without OpenTelemetry post records.
const RecordsPath = "/api/v1/records"

// Settings configures the server.
type Settings struct {
	// Endpoint is the listen address, host:port.
	Endpoint string
	// Gatherer is served on /metrics (OpenMetrics when the scraper asks, so exemplars show).
	Gatherer prometheus.Gatherer
	// Records receives records posted to /api/v1/records; nil disables the endpoint.
	Records record.Consumer
	// Metrics counts rejected posts with receiver "api".
	Metrics *ingest.Metrics
	// MaxBodyBytes bounds a POST body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxJSONDepth and MaxRecordsPerBatch bound a POST /api/v1/records body before it is
	// decoded; 0 takes record.DefaultMaxJSONDepth and record.DefaultMaxBatch.
	MaxJSONDepth, MaxRecordsPerBatch int
	// TLS serves HTTPS when set.
	TLS *tls.Config
	// Tokens, when set, guard every /api/v1/ route.
	Tokens *tlsauth.Tokens
	// Refuse, when set, is asked before a POST to an /api/ route is read (the memory limit):
	// true answers 503 with Retry-After (RefuseRetryAfter, default 5s), counted as reason
	// "overloaded".
	Refuse           func() bool
	RefuseRetryAfter time.Duration
	Logger           *slog.Logger
	Now              func() time.Time
}

// Server serves ragwatch's HTTP endpoints.
type Server struct {
	set Settings
	mux *http.ServeMux
	log *slog.Logger

	checksMu sync.RWMutex // guards checks and status
	checks   map[string]func() error
	status   map[string]func() error

	mu      sync.Mutex // guards the fields below
	srv     *http.Server
	addr    net.Addr
	started bool
	wg      sync.WaitGroup
}

// New builds the server and its fixed routes without listening.
func New(set Settings) (*Server, error) {
	if set.Gatherer == nil {
		return nil, errors.New("httpapi: Gatherer is required")
	}
	if set.Metrics == nil {
		return nil, errors.New("httpapi: Metrics is required")
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if set.Now == nil {
		set.Now = time.Now
	}
	if set.MaxBodyBytes <= 0 {
		set.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if set.RefuseRetryAfter <= 0 {
		set.RefuseRetryAfter = 5 * time.Second
	}
	s := &Server{set: set, mux: http.NewServeMux(), log: set.Logger, checks: map[string]func() error{}, status: map[string]func() error{}}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(set.Gatherer, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorLog:          slog.NewLogLogger(set.Logger.Handler(), slog.LevelWarn),
	}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.serveReady)
	if set.Records != nil {
		s.mux.Handle(RecordsPath, s.guard(RecordsPath, http.HandlerFunc(s.serveRecords)))
	}
	// Go's profiler, for the memory and CPU figures of docs/performance.md and for users sizing
	// a deployment. Guarded like the API: a heap profile shows content.
	s.Mount("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	s.Mount("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	s.Mount("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	s.Mount("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	s.Mount("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	return s, nil
}

// Mount adds a handler for pattern (net/http ServeMux syntax, e.g. "/api/v1/feedback" or
// "GET /api/v1/scores"). Safe to call before or after Start. It panics on a pattern that is
// already taken, as ServeMux does: that is a wiring mistake.
func (s *Server) Mount(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.guard(pattern, h))
}

// AddReadinessCheck makes /readyz fail while check returns an error. name appears in the
// /readyz answer.
func (s *Server) AddReadinessCheck(name string, check func() error) {
	s.checksMu.Lock()
	defer s.checksMu.Unlock()
	s.checks[name] = check
}

// AddStatusCheck reports a condition in the /readyz answer without failing readiness: a
// dependency whose outage the process rides out (an external NATS cluster, a full JetStream
// store) must not take the pod out of its Service, the app's pod with it for a sidecar.
func (s *Server) AddStatusCheck(name string, check func() error) {
	s.checksMu.Lock()
	defer s.checksMu.Unlock()
	s.status[name] = check
}

// Handler is the server's routes, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.mux }

// Start listens and serves in the background; it returns once the listener is bound.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("httpapi: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.set.Endpoint)
	if err != nil {
		return fmt.Errorf("start HTTP server on %s: %w", s.set.Endpoint, err)
	}
	if s.set.TLS != nil {
		ln = tls.NewListener(ln, s.set.TLS)
	}
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.srv, s.addr, s.started = srv, ln.Addr(), true
	s.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP server stopped", "err", err)
		}
	})
	s.log.Info("HTTP server listening", "endpoint", ln.Addr().String(), "paths", "/metrics /healthz /readyz /api/v1/")
	return nil
}

// Shutdown stops accepting and waits for in-flight requests until ctx ends. Idempotent and
// safe without Start.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.srv, s.started = nil, false
	s.mu.Unlock()
	var err error
	if srv != nil {
		if err = srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			err = fmt.Errorf("stop HTTP server: %w", err)
		}
	}
	s.wg.Wait()
	return err
}

// Addr is the bound address, nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// serveReady answers 503 with the failing readiness checks, else 200; either way the status
// checks that fail follow as "degraded" lines.
func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	s.checksMu.RLock()
	failed := runChecks(s.checks, "")
	degraded := runChecks(s.status, "degraded: ")
	s.checksMu.RUnlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	lines := append(failed, degraded...)
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready\n"+strings.Join(lines, "\n")+"\n")
		return
	}
	if len(lines) > 0 {
		_, _ = io.WriteString(w, "ready\n"+strings.Join(lines, "\n")+"\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

// runChecks runs checks in name order and returns "<prefix><name>: <error>" per failure.
func runChecks(checks map[string]func() error, prefix string) []string {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	var failed []string
	for _, n := range names {
		if err := checks[n](); err != nil {
			failed = append(failed, prefix+n+": "+err.Error())
		}
	}
	return failed
}

// errorBody is the JSON answer of a failed API call: one line per problem in errors.
type errorBody struct {
	Error  string   `json:"error"`
	Errors []string `json:"errors,omitempty"`
}

// WriteError answers with a JSON error body; exported so mounted API handlers answer alike.
func WriteError(w http.ResponseWriter, status int, msg string, problems ...string) {
	WriteJSON(w, status, errorBody{Error: msg, Errors: problems})
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// ReadJSONBody reads a POST body of at most limit bytes that must be JSON (or untyped). On a
// problem it has already answered (405, 413, 415 or 400) and counted the rejection under
// receiver, and returns ok=false.
func ReadJSONBody(w http.ResponseWriter, r *http.Request, limit int64, m *ingest.Metrics, receiver string) (body []byte, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed, use POST", r.Method))
		return nil, false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			m.Rejected(receiver, ingest.ReasonContentType)
			WriteError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Type %q: use application/json", ct))
			return nil, false
		}
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		m.Rejected(receiver, ingest.ReasonContentType)
		WriteError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Encoding %q", enc))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			m.Rejected(receiver, ingest.ReasonTooLarge)
			WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit))
			return nil, false
		}
		m.Rejected(receiver, ingest.ReasonMalformed)
		WriteError(w, http.StatusBadRequest, "read body: "+err.Error())
		return nil, false
	}
	return body, true
}

// recordsAnswer is the 202 answer of POST /api/v1/records.
type recordsAnswer struct {
	Accepted int `json:"accepted"`
}

func (s *Server) serveRecords(w http.ResponseWriter, r *http.Request) {
	const rcv = ingest.ReceiverAPI
	body, ok := ReadJSONBody(w, r, s.set.MaxBodyBytes, s.set.Metrics, rcv)
	if !ok {
		return
	}
	recs, err := record.DecodeJSONLimits(body, s.set.Now(), s.set.MaxJSONDepth, s.set.MaxRecordsPerBatch)
	if err != nil {
		msg := err.Error()
		reason, summary := ingest.ReasonInvalid, "invalid record"
		switch {
		case record.IsLimit(err):
			reason, summary = ingest.ReasonLimits, "over a limit"
		case strings.HasPrefix(msg, "invalid JSON") || strings.HasPrefix(msg, "empty "):
			reason, summary = ingest.ReasonMalformed, "malformed JSON"
		}
		s.set.Metrics.Rejected(rcv, reason)
		WriteError(w, http.StatusBadRequest, summary, strings.Split(msg, "\n")...)
		return
	}
	// The request's context ends when the client goes away; the records are ours by now.
	ctx := context.WithoutCancel(r.Context())
	var errs []error
	accepted := 0
	for _, rec := range recs {
		if err := s.set.Records.ConsumeRecord(ctx, rec); err != nil {
			errs = append(errs, err)
			continue
		}
		accepted++
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("records from the API failed downstream", "failed", len(errs), "accepted", accepted, "err", err)
		if errors.Is(err, ingest.ErrOverloaded) {
			s.set.Metrics.Rejected(rcv, ingest.ReasonOverloaded)
			w.Header().Set("Retry-After", "1")
			WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("overloaded: %d of %d records accepted, retry the rest later", accepted, len(recs)))
			return
		}
		WriteError(w, http.StatusInternalServerError, fmt.Sprintf("%d of %d records accepted", accepted, len(recs)), strings.Split(err.Error(), "\n")...)
		return
	}
	WriteJSON(w, http.StatusAccepted, recordsAnswer{Accepted: accepted})
}

// guard puts the bearer-token check in front of API routes (patterns under /api/) and the
// profiler (/debug/); probes and /metrics stay open.
func (s *Server) guard(pattern string, h http.Handler) http.Handler {
	path := pattern
	if i := strings.IndexByte(path, ' '); i >= 0 {
		path = path[i+1:]
	}
	if !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/debug/") {
		return h
	}
	if s.set.Refuse != nil {
		h = s.refuse(h)
	}
	if s.set.Tokens == nil {
		return s.loopbackOnly(h)
	}
	return s.set.Tokens.HTTP(h, func() {
		if s.set.Metrics != nil {
			s.set.Metrics.Rejected(ingest.ReceiverAPI, ingest.ReasonUnauthenticated)
		}
	})
}

// refuse answers POSTs with 503 and Retry-After while Settings.Refuse says so, before the body
// is read.
func (s *Server) refuse(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && s.set.Refuse() {
			s.set.Metrics.Rejected(ingest.ReceiverAPI, ingest.ReasonOverloaded)
			secs := int((s.set.RefuseRetryAfter + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			WriteError(w, http.StatusServiceUnavailable, "ragwatch is over its memory limit, retry later")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackOnly serves the API without a token only to clients on the same host (the app in
// the pod), since its answers carry content and its writes feed the pipeline: a listener on
// 0.0.0.0 for Prometheus must not open the API to the network until http.auth is set.
func (s *Server) loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			if s.set.Metrics != nil {
				s.set.Metrics.Rejected(ingest.ReceiverAPI, ingest.ReasonUnauthenticated)
			}
			http.Error(w, "the API answers clients on other hosts only when http.auth is configured", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
