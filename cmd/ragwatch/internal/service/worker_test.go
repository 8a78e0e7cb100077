package service_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// workerConfig is the defaults for `ragwatch worker` against the external nats-server at url,
// listening on a free loopback port.
func workerConfig(url string) *config.Config {
	cfg := config.Default()
	cfg.NATS.URL = config.SecretURL(url)
	cfg.HTTP.Endpoint, cfg.HTTP.APIEndpoint = "127.0.0.1:0", ""
	cfg.Scoring.Workers = 1
	return cfg
}

// startPod starts a `ragwatch worker` of cfg (workerConfig) and stops it when the test ends.
func startPod(t *testing.T, cfg *config.Config) *service.App {
	t.Helper()
	pod, err := service.NewWorker(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pod.Shutdown(context.Background()) })
	return pod
}

// podSidecarConfig is testConfig for a sidecar on the cluster at url that samples every record
// and leaves scoring to worker pods.
func podSidecarConfig(t *testing.T, url string) *config.Config {
	cfg := testConfig(t)
	cfg.NATS.URL = config.SecretURL(url)
	cfg.Sampling.Rate = 1
	cfg.Scoring.Workers = 0 // the pods score
	return cfg
}

// TestWorkerHTTPLikeRun: `ragwatch worker` serves the HTTP server of `ragwatch run`, built from
// the same list, so http.tls and http.auth apply to it exactly as to run's: only HTTPS answers,
// the profiler wants the bearer token (401 without it, counted), and /metrics and the probes
// stay open. The same table runs against both.
func TestWorkerHTTPLikeRun(t *testing.T) {
	certFile, keyFile, pool := testCA(t)
	t.Setenv("WORKER_API_TOKEN", "api-token-7")
	secure := func(cfg *config.Config) *config.Config {
		cfg.HTTP.TLS.CertFile, cfg.HTTP.TLS.KeyFile = certFile, keyFile
		cfg.HTTP.Auth.TokenEnv = "WORKER_API_TOKEN"
		return cfg
	}
	type check struct {
		path, token string
		want        int
	}
	common := []check{
		{"/debug/pprof/", "", http.StatusUnauthorized},
		{"/debug/pprof/", "wrong", http.StatusUnauthorized},
		{"/debug/pprof/", "api-token-7", http.StatusOK},
		{"/metrics", "", http.StatusOK}, // scrapers and probes stay open
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
	}
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) (*service.App, error)
		extra []check
	}{
		{
			name:  "run",
			build: func(t *testing.T) (*service.App, error) { return service.New(secure(testConfig(t)), nil) },
			extra: []check{{"/api/v1/alerts", "", http.StatusUnauthorized}, {"/api/v1/alerts", "api-token-7", http.StatusOK}},
		},
		{
			name: "worker",
			build: func(t *testing.T) (*service.App, error) {
				ns := testutil.RunJetStream(t)
				return service.NewWorker(secure(workerConfig(ns.ClientURL())), nil)
			},
			// The worker serves no API: the path is unknown, whatever the token.
			extra: []check{{"/api/v1/alerts", "api-token-7", http.StatusNotFound}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.build(t)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
			addr := a.Addrs().HTTP

			// Plain HTTP fails the TLS handshake; net/http answers it with a bare 400 and no
			// metrics leave.
			plain := &http.Client{Timeout: 5 * time.Second}
			resp, err := plain.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || string(body) != "Client sent an HTTP request to an HTTPS server.\n" {
				t.Fatalf("plain HTTP /metrics = %s %.200q, want the 400 of an HTTPS server", resp.Status, body)
			}

			client := &http.Client{Timeout: 5 * time.Second,
				Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
			t.Cleanup(client.CloseIdleConnections)
			unauthorized := 0
			for _, c := range append(common, tc.extra...) {
				if c.want == http.StatusUnauthorized {
					unauthorized++
				}
				req, _ := http.NewRequest(http.MethodGet, "https://"+addr+c.path, nil)
				if c.token != "" {
					req.Header.Set("Authorization", "Bearer "+c.token)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.want {
					t.Errorf("GET %s with %q = %d, want %d", c.path, c.token, resp.StatusCode, c.want)
				}
				if c.path == "/metrics" && !strings.Contains(string(body), "ragwatch_nats_") {
					t.Errorf("/metrics lacks the NATS connection's metrics:\n%.2000s", body)
				}
			}
			if got := testutil.Sum(t, a.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": "unauthenticated"}); got != float64(unauthorized) {
				t.Errorf("unauthenticated API rejections = %v, want %d", got, unauthorized)
			}
		})
	}
}

// TestWorkerLifecycle: the worker's list is run's subset in run's order; shutdown is safe without
// start and idempotent; a start that fails on a taken port undoes itself, NATS included; a
// worker needs nats.url.
func TestWorkerLifecycle(t *testing.T) {
	ns := testutil.RunJetStream(t)

	if _, err := service.NewWorker(workerConfig(""), nil); err == nil || err.Error() != "`nats.url` is required: workers pull from the cluster the sidecars queue to" {
		t.Fatalf("NewWorker without nats.url: %v", err)
	}

	run, err := service.New(testConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantRun := []string{"nats", "memory guard", "signals", "notifiers", "alert engine", "label calibration", "judge agreement", "evaluation export", "scores subscription",
		"sampler", "golden", "join", "assembler", "http", "otlp receivers", "nats subscribers"}
	if got := service.ComponentNames(run); !slices.Equal(got, wantRun) {
		t.Fatalf("run's components = %q, want %q", got, wantRun)
	}

	w, err := service.NewWorker(workerConfig(ns.ClientURL()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := service.ComponentNames(w), []string{"nats", "label calibration", "evaluation export", "scoring workers", "http"}; !slices.Equal(got, want) {
		t.Fatalf("worker's components = %q, want %q", got, want)
	}
	for range 2 {
		if err := w.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown without start: %v", err)
		}
	}
	if !w.NATS.NC.IsClosed() {
		t.Fatal("shutdown without start left the NATS connection open")
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := workerConfig(ns.ClientURL())
	cfg.HTTP.Endpoint = busy.Addr().String()
	b, err := service.NewWorker(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start http: start HTTP server on "+cfg.HTTP.Endpoint) {
		t.Fatalf("start on a taken port: %v", err)
	}
	if !b.NATS.NC.IsClosed() {
		t.Fatal("a failed start left the NATS connection open")
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown after a failed start: %v", err)
	}

	// Start, then Shutdown frees the port and ends the workers (goleak checks the goroutines).
	c, err := service.NewWorker(workerConfig(ns.ClientURL()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := c.Addrs().HTTP
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts after Shutdown", addr)
	}
}
