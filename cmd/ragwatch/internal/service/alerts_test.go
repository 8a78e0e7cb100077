package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestAlertsWired checks the alert engine sees the record fan-out, its alerts reach a
// configured notifier, and GET /api/v1/alerts is served.
func TestAlertsWired(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer am.Close()
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
slos:
  - {name: empty-retrievals, metric: empty_retrieval_rate, alert_above: 0.5, min_samples: 5, window: 5m}
drift: {detectors: []}
notifiers:
  - {name: am, type: alertmanager, url: "` + am.URL + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1" // a free port
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, err := service.New(cfg, nil, service.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = a.Shutdown(ctx)
		}
	}()
	for i := 0; i < 10; i++ {
		if err := a.Records.ConsumeRecord(ctx, &record.Record{TraceID: strings.Repeat("a", 31) + string(rune('0'+i)), Service: "svc", Query: "q", Time: now}); err != nil {
			t.Fatal(err)
		}
	}
	if out := a.Alerts.Evaluate(ctx); len(out) != 1 || out[0].Rule != "empty-retrievals" || out[0].Value != 1 {
		t.Fatalf("evaluate: %+v", out)
	}
	resp, err := http.Get("http://" + a.Addrs().HTTP + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Alerts []struct {
			Rule     string `json:"rule"`
			Status   string `json:"status"`
			Evidence []any  `json:"evidence"`
		} `json:"alerts"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || len(body.Alerts) != 1 || body.Alerts[0].Status != "firing" || len(body.Alerts[0].Evidence) != 5 {
		t.Fatalf("GET /api/v1/alerts: %v %+v", err, body)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the alert at the Alertmanager", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) > 0
	})
	mu.Lock()
	if !strings.HasPrefix(bodies[0], "/api/v2/alerts [{\"labels\":{\"alertname\":\"RagwatchSLOViolated\"") {
		t.Fatalf("alertmanager got %s", bodies[0])
	}
	mu.Unlock()

	// Restart on the same NATS store: the window state comes back from the KV bucket, so the
	// alert is still firing from the same start without any new record.
	stopped = true
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	b, err := service.New(cfg, nil, service.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	out := b.Alerts.Evaluate(ctx)
	if len(out) != 1 || !out[0].Firing() || !out[0].StartsAt.Equal(now.Add(-time.Minute)) || out[0].N != 10 {
		t.Fatalf("after restart: %+v", out)
	}
}

// TestDriftBaselineFileReadAtWiring: drift.baseline_file is read when the alert engine is
// wired; a file that cannot be read stops New with the key's file named, and nothing starts.
func TestDriftBaselineFileReadAtWiring(t *testing.T) {
	cfg := testConfig(t)
	missing := filepath.Join(t.TempDir(), "baseline.json")
	cfg.Drift.BaselineFile = missing
	a, err := service.New(cfg, nil)
	if err == nil {
		_ = a.Shutdown(context.Background())
		t.Fatal("New accepted a drift.baseline_file that does not exist")
	}
	if !strings.Contains(err.Error(), "build alert engine: read drift baseline: open "+missing) {
		t.Fatalf("error = %v", err)
	}
	if err := os.WriteFile(missing, []byte(`{"version": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := service.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "unsupported version 2") {
		t.Fatalf("New with a baseline of another version: %v", err)
	}
}
