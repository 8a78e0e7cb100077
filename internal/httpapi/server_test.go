package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writesPath is a write endpoint the tests mount, as the HTTP intake mounts
// POST /api/v1/records: it reads the body with ReadJSONBody and keeps it.
const writesPath = "/api/v1/writes"

type sink struct {
	m      *ingest.Metrics
	mu     sync.Mutex
	bodies []string
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := ReadJSONBody(w, r, 4096, s.m, ingest.ReceiverAPI)
	if !ok {
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
	WriteJSON(w, http.StatusAccepted, map[string]int{"accepted": 1})
}

func (s *sink) writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

type harness struct {
	s    *Server
	sink *sink
	reg  *prometheus.Registry
	base string
}

func start(t *testing.T) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	sk := &sink{m: ingest.NewMetrics(reg)}
	s, err := New(Settings{
		Endpoint: "127.0.0.1:0",
		Gatherer: reg,
		Metrics:  sk.m,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Mount(writesPath, sk)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &harness{s: s, sink: sk, reg: reg, base: "http://" + s.Addr().String()}
}

func rejected(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": reason})
}

func TestHealthReadyAndMount(t *testing.T) {
	h := start(t)
	if code, _, body := testutil.Do(t, "GET", h.base+"/healthz", "", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _, body := testutil.Do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\n" {
		t.Errorf("/readyz with no checks = %d %q", code, body)
	}
	var mu sync.Mutex
	listening := false
	h.s.AddReadinessCheck("otlp", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !listening {
			return fmt.Errorf("receivers not listening")
		}
		return nil
	})
	h.s.AddReadinessCheck("nats", func() error { return nil })
	if code, _, body := testutil.Do(t, "GET", h.base+"/readyz", "", ""); code != 503 || body != "not ready\notlp: receivers not listening\n" {
		t.Errorf("/readyz failing = %d %q", code, body)
	}
	mu.Lock()
	listening = true
	mu.Unlock()
	if code, _, body := testutil.Do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}

	// A status check (an external NATS cluster down) shows in the answer but keeps it ready.
	var natsDown error
	h.s.AddStatusCheck("nats", func() error { mu.Lock(); defer mu.Unlock(); return natsDown })
	mu.Lock()
	natsDown = fmt.Errorf("NATS is not connected")
	mu.Unlock()
	if code, _, body := testutil.Do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\ndegraded: nats: NATS is not connected\n" {
		t.Errorf("/readyz with NATS down = %d %q, want 200 and the degraded line", code, body)
	}
	mu.Lock()
	listening = false
	mu.Unlock()
	if code, _, body := testutil.Do(t, "GET", h.base+"/readyz", "", ""); code != 503 ||
		body != "not ready\notlp: receivers not listening\ndegraded: nats: NATS is not connected\n" {
		t.Errorf("/readyz failing and degraded = %d %q", code, body)
	}
	mu.Lock()
	listening, natsDown = true, nil
	mu.Unlock()
	if code, _, body := testutil.Do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\n" {
		t.Errorf("/readyz recovered = %d %q", code, body)
	}

	// Others mount their endpoints after the server runs.
	h.s.Mount("GET /api/v1/scores", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, 200, map[string]int{"scores": 0})
	}))
	if code, hdr, body := testutil.Do(t, "GET", h.base+"/api/v1/scores", "", ""); code != 200 || body != "{\"scores\":0}\n" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("mounted = %d %q %q", code, body, hdr.Get("Content-Type"))
	}
	if code, _, _ := testutil.Do(t, "GET", h.base+"/nope", "", ""); code != 404 {
		t.Errorf("unknown path = %d", code)
	}
}

func TestMetricsOpenMetricsWithExemplars(t *testing.T) {
	h := start(t)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "ragwatch_requests_total", Help: "Requests."})
	h.reg.MustRegister(c)
	c.(prometheus.ExemplarAdder).AddWithExemplar(1, prometheus.Labels{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})

	code, hdr, body := testutil.Do(t, "GET", h.base+"/metrics", "", "", "Accept", "application/openmetrics-text; version=1.0.0")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("/metrics = %d %q", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(body, `ragwatch_requests_total 1.0 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1.0`) {
		t.Errorf("no exemplar in:\n%s", body)
	}
	// A plain scrape gets the text format.
	code, hdr, body = testutil.Do(t, "GET", h.base+"/metrics", "", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || !strings.Contains(body, "ragwatch_requests_total 1\n") {
		t.Errorf("/metrics text = %d %q\n%s", code, hdr.Get("Content-Type"), body)
	}
}

func TestLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Endpoint: "127.0.0.1:0", Gatherer: reg, Metrics: ingest.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err == nil {
			t.Error("second Start succeeded")
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing mounted: the server has no API endpoints of its own.
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if code, _, _ := testutil.Do(t, "POST", "http://"+s.Addr().String()+"/api/v1/records", "application/json", "{}"); code != 404 {
		t.Errorf("an API path nobody mounted = %d", code)
	}
	if _, err := New(Settings{Gatherer: reg}); err == nil {
		t.Error("New without Metrics succeeded")
	}
}
