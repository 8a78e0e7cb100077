package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// collector is an httptest server keeping every request body.
type collector struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, r.URL.Path+" "+string(b))
		c.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.bodies, "\n")
}

func (c *collector) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bodies)
}

// TestSecretsNeverLeak sets every kind of secret through environment variables, files and
// config values, runs traffic, an alert to three notifiers and scoring, and checks that no
// secret reaches the logs (debug level), client-facing errors, /metrics or /api/v1/config,
// and that personal data in the records reaches neither the notifiers nor the score messages.
func TestSecretsNeverLeak(t *testing.T) {
	secrets := map[string]string{
		"api key":       "skS1secretAPIKEY0001",
		"routing key":   "pdS1secretROUTING0002",
		"webhook HMAC":  "whS1secretHMAC0003",
		"slack URL":     "slS1secretSLACK0004",
		"OTLP header":   "hdS1secretHEADER0005",
		"bearer token":  "brS1secretBEARER0006",
		"NATS token":    "ntS1secretNATS0007",
		"URL password":  "upS1secretPASS0008",
		"wrong NATS tk": "ntS1wrongTOKEN0009",
	}
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bearerFile := write("bearer", secrets["bearer token"])
	natsTokenFile := write("nats-token", secrets["NATS token"])
	t.Setenv("S1_OPENAI_KEY", secrets["api key"])
	t.Setenv("S1_PD_KEY", secrets["routing key"])
	t.Setenv("S1_WH_SECRET", secrets["webhook HMAC"])

	ns := testutil.RunJetStream(t, testutil.Token(secrets["NATS token"]))
	webhook, pagerduty, slack := newCollector(t), newCollector(t), newCollector(t)
	metricsSrv := newMetricsServer(t)

	cfgText := fmt.Sprintf(`
receivers: {otlp: {grpc: {endpoint: "127.0.0.1:0", auth: {token_file: %q}}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: "", auth: {token_file: %q}}
exporters:
  otlp: {endpoint: %q, protocol: grpc, insecure: true, interval: 50ms, headers: {x-api-key: %q}}
nats: {url: %q, token_file: %q}
sampling: {rate: 1}
scoring:
  openai: {model: judge-1, api_key_env: S1_OPENAI_KEY, base_url: "https://judge:%s@judge.example.com/v1"}
slos:
  - {name: empty-retrievals, metric: empty_retrieval_rate, alert_above: 0.5, min_samples: 5, window: 5m}
drift: {detectors: []}
notifiers:
  - {name: hook, type: webhook, url: %q, secret_env: S1_WH_SECRET}
  - {name: pd, type: pagerduty, url: %q, routing_key_env: S1_PD_KEY}
  - {name: chat, type: slack, url: %q}
log: {level: debug}
`, bearerFile, bearerFile, metricsSrv.addr, secrets["OTLP header"], ns.ClientURL(), natsTokenFile,
		secrets["URL password"], webhook.URL+"/hook", pagerduty.URL+"/v2/enqueue", slack.URL+"/services/T0/B0/"+secrets["slack URL"])
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := service.New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	base := "http://" + a.Addrs().HTTP

	var clientErrors []string
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			clientErrors = append(clientErrors, string(b))
		}
		return resp.StatusCode, string(b)
	}

	// Scores published by the in-process workers, as worker pods or other sidecars see them.
	nc, err := nats.Connect(ns.ClientURL(), nats.Token(secrets["NATS token"]))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var scoreMu sync.Mutex
	var scoreMsgs []string
	if _, err := nc.Subscribe("ragwatch.scores.>", func(m *nats.Msg) {
		scoreMu.Lock()
		scoreMsgs = append(scoreMsgs, string(m.Data))
		scoreMu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	// Traffic: records full of personal data, no documents (so the SLO fires).
	const pii = "I am jane.doe@example.com, card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00"
	var batch []string
	for i := range 10 {
		batch = append(batch, fmt.Sprintf(`{"trace_id":"cccc00000000000000000000000000%02d","service":"svc","query":%q,"answer":%q}`,
			i, "Why was I charged twice? "+pii, "You were charged twice because "+pii))
	}
	if code, body := do("POST", "/api/v1/records", secrets["bearer token"], "["+strings.Join(batch, ",")+"]"); code != http.StatusAccepted {
		t.Fatalf("POST records = %d %s", code, body)
	}
	if code, _ := do("POST", "/api/v1/records", "wrong-token", batch[0]); code != http.StatusUnauthorized {
		t.Fatalf("wrong token = %d", code)
	}
	if code, _ := do("GET", "/api/v1/config", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/config without a token = %d", code)
	}
	if code, _ := do("POST", "/api/v1/records", secrets["bearer token"], `{"trace_id":"x"}`); code != http.StatusBadRequest {
		t.Fatalf("bad record = %d", code)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the SLO to fire", func() bool { return len(a.Alerts.Evaluate(ctx)) > 0 || webhook.n() > 0 })
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "every notifier", func() bool { return webhook.n() > 0 && pagerduty.n() > 0 && slack.n() > 0 })
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "score messages", func() bool {
		scoreMu.Lock()
		defer scoreMu.Unlock()
		return len(scoreMsgs) >= 10
	})

	code, cfgBody := do("GET", "/api/v1/config", secrets["bearer token"], "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/config = %d %s", code, cfgBody)
	}
	var shown struct {
		HTTP struct {
			Auth struct {
				TokenFile string `json:"token_file"`
			} `json:"auth"`
		} `json:"http"`
		Exporters struct {
			OTLP struct {
				Headers map[string]string `json:"headers"`
			} `json:"otlp"`
		} `json:"exporters"`
		Scoring struct {
			OpenAI struct {
				BaseURL   string `json:"base_url"`
				APIKeyEnv string `json:"api_key_env"`
			} `json:"openai"`
		} `json:"scoring"`
		Notifiers []struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"notifiers"`
		MemoryLimitMiB *int `json:"memory_limit_mib"`
	}
	if err := json.Unmarshal([]byte(cfgBody), &shown); err != nil {
		t.Fatal(err)
	}
	slackHost := strings.TrimPrefix(slack.URL, "http://")
	if shown.HTTP.Auth.TokenFile != bearerFile || shown.Exporters.OTLP.Headers["x-api-key"] != "<redacted>" ||
		shown.Scoring.OpenAI.BaseURL != "https://<redacted>@judge.example.com/<redacted>" || shown.Scoring.OpenAI.APIKeyEnv != "S1_OPENAI_KEY" ||
		len(shown.Notifiers) != 3 || shown.Notifiers[2].URL != "http://"+slackHost+"/<redacted>" || shown.MemoryLimitMiB == nil {
		t.Fatalf("GET /api/v1/config shows %+v", shown)
	}

	// A wrong NATS token and a URL password must not appear in the startup error either.
	bad := *cfg
	bad.NATS.URL = config.SecretURL(strings.Replace(ns.ClientURL(), "nats://", "nats://s1user:"+secrets["URL password"]+"@", 1))
	bad.NATS.TokenFile = write("wrong-token", secrets["wrong NATS tk"])
	bad.NATS.ConnectTimeout = 2 * time.Second
	bad.HTTP.Endpoint, bad.Receivers.OTLP.GRPC.Endpoint = "127.0.0.1:0", "127.0.0.1:0"
	_, startErr := service.New(&bad, logger)
	if startErr == nil {
		t.Fatal("a wrong NATS token was accepted")
	}

	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	metricsText := scrapeText(t, a)
	scoreMu.Lock()
	scores := strings.Join(scoreMsgs, "\n")
	scoreMu.Unlock()
	places := map[string]string{
		"logs":           logs.String(),
		"client errors":  strings.Join(clientErrors, "\n"),
		"startup error":  startErr.Error(),
		"/metrics":       metricsText,
		"/api/v1/config": cfgBody,
	}
	for place, text := range places {
		for what, v := range secrets {
			if strings.Contains(text, v) {
				t.Errorf("the %s (%s) leaked into %s", what, v, place)
			}
		}
	}
	if !strings.Contains(logs.String(), `"level":"DEBUG"`) {
		t.Fatal("debug logs were not captured")
	}
	// Personal data from the records reaches no notifier and no score message.
	for place, text := range map[string]string{"webhook": webhook.all(), "pagerduty": pagerduty.all(), "slack": slack.all(), "score messages": scores} {
		for _, p := range []string{"jane.doe@example.com", "4111 1111 1111 1111", "DE89 3704", "charged twice"} {
			if strings.Contains(text, p) {
				t.Errorf("%q from a record reached the %s", p, place)
			}
		}
	}
	if !strings.Contains(webhook.all(), "RagwatchSLOViolated") {
		t.Fatalf("webhook body: %s", webhook.all())
	}
}

// scrapeText renders the App's registry as the /metrics text.
func scrapeText(t *testing.T, a *service.App) string {
	t.Helper()
	mfs, err := a.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		b.WriteString(mf.String())
		b.WriteByte('\n')
	}
	return b.String()
}
