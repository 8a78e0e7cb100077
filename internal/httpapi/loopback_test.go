package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/ingest"
)

func TestAPIWithoutAuthAnswersLoopbackClientsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := ingest.NewMetrics(reg)
	s := &Server{set: Settings{Metrics: m}}
	h := s.guard("GET /api/v1/scores", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("[]")) }))
	for _, tc := range []struct {
		remote string
		code   int
	}{
		{"127.0.0.1:5555", 200}, {"[::1]:5555", 200}, {"10.1.2.3:5555", 403}, {"[2001:db8::1]:80", 403}, {"garbage", 403},
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/scores", nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("client %s: code %d, want %d", tc.remote, rec.Code, tc.code)
		}
		if tc.code == 403 && !strings.Contains(rec.Body.String(), "http.auth") {
			t.Errorf("403 does not say how to open the API: %q", rec.Body.String())
		}
	}
	want := `
# HELP ragwatch_ingest_rejected_total Requests, messages or records rejected at intake, by receiver and reason.
# TYPE ragwatch_ingest_rejected_total counter
ragwatch_ingest_rejected_total{reason="unauthenticated",receiver="api"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ragwatch_ingest_rejected_total"); err != nil {
		t.Error(err)
	}
	// /metrics and probes are not guarded.
	open := s.guard("GET /metrics", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "10.1.2.3:5555"
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("/metrics from another host: %d", rec.Code)
	}
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
		{"/debug/pprof/cmdline", "10.1.2.3:5555", 403, "http.auth"},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("GET %s from %s: %d %.80q, want %d with %q", tc.path, tc.remote, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}
