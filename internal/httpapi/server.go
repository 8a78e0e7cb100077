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
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
)

// Settings configures the server.
type Settings struct {
	// Endpoint is the listen address, host:port, of /metrics, /healthz and /readyz.
	Endpoint string
	// APIEndpoint is the listen address of the API (/api/ and /debug/ routes); "" serves them
	// on Endpoint. Kept apart so a listener open to Prometheus and the kubelet on 0.0.0.0 does
	// not carry the API: on 127.0.0.1 a mesh that delivers to the pod IP cannot reach it.
	APIEndpoint string
	// Gatherer is served on /metrics (OpenMetrics when the scraper asks, so exemplars show).
	Gatherer prometheus.Gatherer
	// Metrics counts requests the API's guards refuse, with receiver "api".
	Metrics *ingest.Metrics
	// TLS serves HTTPS when set.
	TLS *tls.Config
	// Tokens, when set, guard every /api/ and /debug/ route. Without them those routes answer
	// only loopback requests: peer 127.0.0.1 or ::1 (not the rest of 127/8, where service-mesh
	// proxies deliver from) addressed to a loopback host name (no DNS rebinding).
	Tokens *tlsauth.Tokens
	// Refuse, when set, is asked before a POST to an /api/ route is read (the memory limit):
	// true answers 503 with Retry-After (RefuseRetryAfter, default 5s), counted as reason
	// "overloaded".
	Refuse           func() bool
	RefuseRetryAfter time.Duration
	// Listen bounds both listeners (header size, timeouts, connection cap); zero fields take
	// listen's defaults. ListenMetrics counts their connections as listener "http" and "api";
	// nil counts nothing.
	Listen        listen.Limits
	ListenMetrics *listen.Metrics
	Logger        *slog.Logger
}

// Server serves ragwatch's HTTP endpoints.
type Server struct {
	set Settings
	mux *http.ServeMux // the Endpoint listener's routes
	api *http.ServeMux // the API routes: mux itself when APIEndpoint is ""
	log *slog.Logger

	checksMu sync.RWMutex // guards checks and status
	checks   map[string]func() error
	status   map[string]func() error

	mu      sync.Mutex // guards the fields below
	srvs    []*http.Server
	addr    net.Addr
	apiAddr net.Addr
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
	if set.RefuseRetryAfter <= 0 {
		set.RefuseRetryAfter = 5 * time.Second
	}
	s := &Server{set: set, mux: http.NewServeMux(), log: set.Logger, checks: map[string]func() error{}, status: map[string]func() error{}}
	s.api = s.mux
	if set.APIEndpoint != "" {
		s.api = http.NewServeMux()
		// A client that still calls the API on the metrics port learns where it went, and
		// gets nothing else.
		moved := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			WriteError(w, http.StatusNotFound, "the API is served on http.api_endpoint, not on this listener")
		})
		s.mux.Handle("/api/", moved)
		s.mux.Handle("/debug/", moved)
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(set.Gatherer, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorLog:          slog.NewLogLogger(set.Logger.Handler(), slog.LevelWarn),
	}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.serveReady)
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
// "GET /api/v1/scores"). Routes under /api/ and /debug/ go to the API listener, behind the
// token or loopback check; a write there (any method but GET and HEAD) must be JSON. Safe to
// call before or after Start. It panics on a pattern that is already taken, as ServeMux does:
// that is a wiring mistake.
func (s *Server) Mount(pattern string, h http.Handler) {
	if isAPI(pattern) {
		s.api.Handle(pattern, s.guard(h))
		return
	}
	s.mux.Handle(pattern, h)
}

// isAPI reports whether a pattern ("GET /api/v1/x" or "/api/v1/x") is an API route.
func isAPI(pattern string) bool {
	path := pattern
	if i := strings.IndexByte(path, ' '); i >= 0 {
		path = path[i+1:]
	}
	return strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/debug/")
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

// Handler is the Endpoint listener's routes (with the API when APIEndpoint is ""), for tests
// and for embedding.
func (s *Server) Handler() http.Handler { return s.mux }

// Start listens and serves in the background; it returns once the listeners are bound.
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
	var apiLn net.Listener
	if s.set.APIEndpoint != "" {
		if apiLn, err = lc.Listen(ctx, "tcp", s.set.APIEndpoint); err != nil {
			_ = ln.Close()
			return fmt.Errorf("start HTTP API server on %s: %w", s.set.APIEndpoint, err)
		}
	}
	s.addr, s.apiAddr, s.started = ln.Addr(), ln.Addr(), true
	s.serve(ln, "http", s.mux, "/metrics /healthz /readyz")
	if apiLn != nil {
		s.apiAddr = apiLn.Addr()
		s.serve(apiLn, "api", s.api, "/api/v1/ /debug/pprof/")
	}
	return nil
}

// serve serves h on ln in the background, bounded as every listener is (listen.HTTP) and
// labelled name in the listener metrics; s.mu is held.
func (s *Server) serve(ln net.Listener, name string, h http.Handler, paths string) {
	if s.api == s.mux {
		paths += " /api/v1/ /debug/pprof/"
	}
	srv, limited, serveLn := listen.HTTP(ln, name, h, s.set.TLS, s.set.Listen, s.set.ListenMetrics, s.log)
	s.srvs = append(s.srvs, srv)
	s.wg.Go(func() {
		if err := srv.Serve(serveLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP server stopped", "err", err)
		}
	})
	s.log.Info("HTTP server listening", "endpoint", ln.Addr().String(), "paths", paths, "max_connections", limited.Cap())
}

// Shutdown stops accepting and waits for in-flight requests until ctx ends. Idempotent and
// safe without Start.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srvs := s.srvs
	s.srvs, s.started = nil, false
	s.mu.Unlock()
	var errs []error
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			errs = append(errs, fmt.Errorf("stop HTTP server: %w", err))
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// Addr is the bound address of Endpoint, nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// APIAddr is the bound address of the API: APIEndpoint's, or Addr when that is "".
func (s *Server) APIAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiAddr
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

// ReadJSONBody reads a POST body of at most limit bytes that must be JSON. On a
// problem it has already answered (405, 413, 415 or 400) and counted the rejection under
// receiver, and returns ok=false.
func ReadJSONBody(w http.ResponseWriter, r *http.Request, limit int64, m *ingest.Metrics, receiver string) (body []byte, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed, use POST", r.Method))
		return nil, false
	}
	if !jsonContent(w, r, m, receiver) {
		return nil, false
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

// jsonContent answers 415 (counted under receiver) unless the request says it is JSON. A
// browser sends a cross-site POST without a CORS preflight only as text/plain, form data or
// multipart; requiring application/json keeps a web page from writing through a `no-cors`
// request.
func jsonContent(w http.ResponseWriter, r *http.Request, m *ingest.Metrics, receiver string) bool {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return true
	}
	if m != nil {
		m.Rejected(receiver, ingest.ReasonContentType)
	}
	WriteError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Type %q: use application/json", ct))
	return false
}

// guard puts the access check in front of an API route (the bearer token, or without one the
// loopback rule), then, for writes, the JSON Content-Type rule and the memory check.
func (s *Server) guard(h http.Handler) http.Handler {
	if s.set.Refuse != nil {
		h = s.refuse(h)
	}
	h = s.jsonWrites(h)
	if s.set.Tokens == nil {
		return s.loopbackOnly(h)
	}
	return s.set.Tokens.HTTP(h, func() {
		if s.set.Metrics != nil {
			s.set.Metrics.Rejected(ingest.ReceiverAPI, ingest.ReasonUnauthenticated)
		}
	})
}

// jsonWrites requires a JSON Content-Type on every request that may change something: all
// methods but GET and HEAD, whether or not the handler reads a body (POST /api/v1/reload
// has none).
func (s *Server) jsonWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !jsonContent(w, r, s.set.Metrics, ingest.ReceiverAPI) {
			return
		}
		h.ServeHTTP(w, r)
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

// loopbackOnly serves the API without a token only to the app on the same host, since its
// answers carry content and its writes feed the pipeline. "Same host" is strict, because a
// loopback peer alone proves nothing next to a service mesh: Istio's sidecar delivers every
// inbound request from 127.0.0.6 and other proxies from elsewhere in 127/8, so only 127.0.0.1
// and ::1 count, at both ends of the connection (a proxy that forwards to the pod IP arrives
// there, not at loopback, even on a listener bound to 0.0.0.0). The Host header must name
// loopback too: a web page whose DNS name was rebound to 127.0.0.1 still sends its own name.
func (s *Server) loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local == nil || !loopbackPeer(local.String()) || !loopbackPeer(r.RemoteAddr) || !loopbackHost(r.Host) {
			if s.set.Metrics != nil {
				s.set.Metrics.Rejected(ingest.ReceiverAPI, ingest.ReasonUnauthenticated)
			}
			WriteError(w, http.StatusForbidden, "without http.auth the API answers only requests from 127.0.0.1 or ::1 to localhost: "+
				"set http.auth to open it to other clients")
			return
		}
		h.ServeHTTP(w, r)
	})
}

var (
	loopback4 = netip.MustParseAddr("127.0.0.1")
	loopback6 = netip.IPv6Loopback()
)

// loopbackPeer reports whether a RemoteAddr is 127.0.0.1 or ::1 (also as ::ffff:127.0.0.1).
func loopbackPeer(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	return ip == loopback4 || ip == loopback6
}

// loopbackHost reports whether a Host header (with or without a port) names loopback:
// localhost, 127.0.0.1 or [::1].
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}
