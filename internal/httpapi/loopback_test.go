package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
)

func TestAPIWithoutAuthAnswersLoopbackClientsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := ingest.NewMetrics(reg)
	s := &Server{set: Settings{Metrics: m}}
	h := s.guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("[]")) }))
	for _, tc := range []struct {
		remote, host string
		code         int
		local        string // the listener's address the request arrived at; "" = 127.0.0.1:9465
	}{
		{"127.0.0.1:5555", "127.0.0.1:9465", 200, ""},
		{"[::1]:5555", "localhost", 200, "[::1]:9465"},
		// A proxy that forwards to the pod IP, from 127.0.0.1, naming localhost: it arrived
		// at the pod IP (a listener on 0.0.0.0), not at loopback.
		{"127.0.0.1:5555", "localhost", 403, "10.0.0.7:9465"},
		{"127.0.0.1:5555", "localhost:9465", 200, ""},
		{"127.0.0.1:5555", "LOCALHOST.", 200, ""},
		{"[::1]:5555", "[::1]:9465", 200, "[::1]:9465"},
		{"[::ffff:127.0.0.1]:5555", "localhost", 200, ""},
		// Istio's inbound passthrough source, and the rest of 127/8: a mesh, not the app.
		{"127.0.0.6:5555", "localhost:9465", 403, ""},
		{"127.0.0.2:5555", "127.0.0.1:9465", 403, ""},
		// DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1.
		{"127.0.0.1:5555", "evil.example:9465", 403, ""},
		{"127.0.0.1:5555", "", 403, ""},
		{"10.1.2.3:5555", "localhost", 403, ""}, {"[2001:db8::1]:80", "localhost", 403, ""}, {"garbage", "localhost", 403, ""},
	} {
		req := withLocal(httptest.NewRequest(http.MethodGet, "/api/v1/scores", nil), tc.local)
		req.RemoteAddr, req.Host = tc.remote, tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("client %s, Host %q: code %d, want %d", tc.remote, tc.host, rec.Code, tc.code)
		}
		if tc.code == 403 && (!strings.Contains(rec.Body.String(), "http.auth") || strings.Contains(rec.Body.String(), "[]")) {
			t.Errorf("403 must say how to open the API and carry no content: %q", rec.Body.String())
		}
	}
	want := `
# HELP ragwatch_ingest_rejected_total Requests, messages or records rejected at intake, by receiver and reason.
# TYPE ragwatch_ingest_rejected_total counter
ragwatch_ingest_rejected_total{reason="unauthenticated",receiver="api"} 8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ragwatch_ingest_rejected_total"); err != nil {
		t.Error(err)
	}
}

// withLocal sets the address the request arrived at, as http.Server does; "" is
// 127.0.0.1:9465.
func withLocal(r *http.Request, local string) *http.Request {
	if local == "" {
		local = "127.0.0.1:9465"
	}
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(local))))
}

// The profiler is served, and guarded like the API: a heap profile holds content.
func TestPprofIsGuardedLikeTheAPI(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Gatherer: reg, Metrics: ingest.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, remote string
		code         int
		body         string
	}{
		{"/debug/pprof/", "127.0.0.1:5555", 200, "heap"},
		{"/debug/pprof/heap?debug=1", "127.0.0.1:5555", 200, "heap profile:"},
		{"/debug/pprof/goroutine?debug=1", "[::1]:5555", 200, "goroutine profile:"},
		{"/debug/pprof/heap?debug=1", "10.1.2.3:5555", 403, "http.auth"},
		{"/debug/pprof/heap?debug=1", "127.0.0.6:5555", 403, "http.auth"},
		{"/debug/pprof/cmdline", "10.1.2.3:5555", 403, "http.auth"},
	} {
		req := withLocal(httptest.NewRequest(http.MethodGet, tc.path, nil), "")
		req.RemoteAddr, req.Host = tc.remote, "localhost:9465"
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("GET %s from %s: %d %.80q, want %d with %q", tc.path, tc.remote, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}

// meshClient sends from 127.0.0.6, where Istio's sidecar delivers every inbound request from
// (Linux routes all of 127/8 to lo, so the test can bind it).
func meshClient(t *testing.T) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.6")}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type apiHarness struct {
	*harness
	api     string // http://host:port of the API listener
	reloads atomic.Int64
}

func startSplit(t *testing.T, tokens *tlsauth.Tokens) *apiHarness {
	t.Helper()
	reg := prometheus.NewRegistry()
	sk := &sink{m: ingest.NewMetrics(reg)}
	s, err := New(Settings{
		Endpoint: "127.0.0.1:0", APIEndpoint: "127.0.0.1:0",
		Gatherer: reg, Metrics: sk.m, Tokens: tokens,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Mount(writesPath, sk)
	h := &apiHarness{}
	s.Mount("GET /api/v1/config", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, 200, map[string]string{"secret_file": "/etc/ragwatch/key"})
	}))
	s.Mount("POST /api/v1/reload", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.reloads.Add(1)
		WriteJSON(w, 200, map[string]string{"status": "success"})
	}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	h.harness = &harness{s: s, sink: sk, reg: reg, base: "http://" + s.Addr().String()}
	h.api = "http://" + s.APIAddr().String()
	return h
}

func send(t *testing.T, c *http.Client, method, url, host, contentType, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

const oneRecord = `{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","query":"q","answer":"a"}`

// Under Istio every inbound request comes from 127.0.0.6: the API must neither answer it nor
// act on it, whatever Host it names, unless the operator configured a token and the request
// carries it.
func TestMeshRequestFrom127_0_0_6GetsNothing(t *testing.T) {
	h := startSplit(t, nil)
	mesh := meshClient(t)
	for _, host := range []string{"evil.example", "localhost"} {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/v1/config", ""},
			{"GET", "/debug/pprof/heap?debug=1", ""},
			{"POST", writesPath, oneRecord},
			{"POST", "/api/v1/reload", "{}"},
		} {
			code, body := send(t, mesh, c.method, h.api+c.path, host, "application/json", c.body)
			if code != http.StatusForbidden || strings.Contains(body, "secret_file") || strings.Contains(body, "heap profile") {
				t.Errorf("%s %s from 127.0.0.6, Host %s = %d %.100q, want 403 without content", c.method, c.path, host, code, body)
			}
		}
	}
	if h.sink.writes() != 0 || h.reloads.Load() != 0 {
		t.Errorf("a refused request changed something: %d records, %d reloads", h.sink.writes(), h.reloads.Load())
	}
	if got := rejected(t, h.reg, ingest.ReasonUnauthenticated); got != 8 {
		t.Errorf("rejected{reason=unauthenticated} = %v, want 8", got)
	}
	// The app in the pod, from 127.0.0.1 to localhost, is served.
	if code, body := send(t, http.DefaultClient, "POST", h.api+writesPath, "", "application/json", oneRecord); code != 202 {
		t.Errorf("app's POST = %d %q", code, body)
	}
	// A DNS-rebound page reaches 127.0.0.1 but names its own host: refused.
	if code, _ := send(t, http.DefaultClient, "GET", h.api+"/api/v1/config", "evil.example:9465", "", ""); code != http.StatusForbidden {
		t.Errorf("rebound request = %d, want 403", code)
	}
	// The metrics listener carries no API at all.
	if code, body := send(t, mesh, "GET", h.base+"/api/v1/config", "", "", ""); code != 404 || strings.Contains(body, "secret_file") {
		t.Errorf("API on the metrics listener = %d %q", code, body)
	}
	if code, _ := send(t, mesh, "GET", h.base+"/metrics", "", "", ""); code != 200 {
		t.Errorf("/metrics from the mesh = %d", code)
	}
}

// An operator who sets http.auth has configured the API for the network: a mesh request with
// the token is served, one without is not.
func TestMeshRequestWithConfiguredToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := tlsauth.NewTokens(tlsauth.BearerAuth{TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	h := startSplit(t, tok)
	mesh := meshClient(t)
	if code, _ := send(t, mesh, "POST", h.api+"/api/v1/reload", "evil.example", "application/json", "{}"); code != 401 || h.reloads.Load() != 0 {
		t.Errorf("without the token = %d, %d reloads", code, h.reloads.Load())
	}
	if code, body := send(t, mesh, "POST", h.api+"/api/v1/reload", "ragwatch.app.svc", "application/json", "{}", "Authorization", "Bearer s3cret"); code != 200 || h.reloads.Load() != 1 {
		t.Errorf("with the token = %d %q, %d reloads", code, body, h.reloads.Load())
	}
}

// A web page can POST cross-site without a preflight only as text/plain, a form or multipart
// (`fetch(url, {mode: "no-cors"})`): every write requires application/json.
func TestWritesRequireJSONContentType(t *testing.T) {
	h := startSplit(t, nil)
	for _, c := range []struct{ path, contentType, body string }{
		{writesPath, "text/plain;charset=UTF-8", oneRecord},
		{writesPath, "", oneRecord},
		{writesPath, "application/x-www-form-urlencoded", "a=b"},
		{"/api/v1/reload", "text/plain", ""},
		{"/api/v1/reload", "", ""},
	} {
		before := rejected(t, h.reg, ingest.ReasonContentType)
		code, body := send(t, http.DefaultClient, "POST", h.api+c.path, "", c.contentType, c.body)
		if code != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") {
			t.Errorf("POST %s as %q = %d %q, want 415", c.path, c.contentType, code, body)
		}
		if got := rejected(t, h.reg, ingest.ReasonContentType); got != before+1 {
			t.Errorf("POST %s as %q: rejected{reason=content_type} = %v, want %v", c.path, c.contentType, got, before+1)
		}
	}
	if h.sink.writes() != 0 || h.reloads.Load() != 0 {
		t.Errorf("a refused write changed something: %d records, %d reloads", h.sink.writes(), h.reloads.Load())
	}
	if code, _ := send(t, http.DefaultClient, "POST", h.api+"/api/v1/reload", "", "application/json; charset=utf-8", ""); code != 200 || h.reloads.Load() != 1 {
		t.Errorf("JSON reload = %d", code)
	}
}

// An API listener that cannot bind fails Start and releases the metrics listener.
func TestSplitStartFailureReleasesListener(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	_ = free.Close()
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Endpoint: addr, APIEndpoint: busy.Addr().String(), Gatherer: reg, Metrics: ingest.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "start HTTP API server on "+busy.Addr().String()) {
		t.Fatalf("Start = %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the metrics listener was not released: %v", err)
	}
	_ = ln.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
