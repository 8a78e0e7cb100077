package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// reloadConfig is a config file for the reload tests; %s are the SLO's alert_above and extra
// top-level YAML.
const reloadConfig = `
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
log: {level: info}
sampling: {rate: %s}
scoring: {workers: 0}
slos:
  - {name: empty, metric: empty_retrieval_rate, alert_above: %s, min_samples: 5, window: 5m}
drift: {detectors: []}
%s`

type reloadEnv struct {
	app   *service.App
	path  string
	level *slog.LevelVar
	logs  *testutil.Buffer
	base  string
	clock atomic.Int64 // unix nanoseconds
}

func (e *reloadEnv) now() time.Time { return time.Unix(0, e.clock.Load()).UTC() }

// startReloadEnv runs an App whose config source is a file in a temporary directory, with the
// NATS store and port of a test.
func startReloadEnv(t *testing.T, yaml string) *reloadEnv {
	t.Helper()
	dir := t.TempDir()
	e := &reloadEnv{path: filepath.Join(dir, "ragwatch.yaml"), level: &slog.LevelVar{}, logs: &testutil.Buffer{}}
	e.clock.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	store := t.TempDir()
	load := func() (*config.Config, error) {
		c, err := config.Load(e.path)
		if err != nil {
			return nil, err
		}
		c.NATS.StoreDir = store
		c.NATS.Embedded.Endpoint = "127.0.0.1:-1"
		return c, nil
	}
	e.write(t, yaml)
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: e.level}))
	a, err := service.New(cfg, logger, service.WithClock(e.now),
		service.WithConfigSource(load), service.WithLogLevel(e.level))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	e.app, e.base = a, "http://"+a.Addrs().HTTP
	return e
}

func (e *reloadEnv) write(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(e.path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload posts to /api/v1/reload and decodes the answer.
func (e *reloadEnv) reload(t *testing.T) (int, map[string][]string) {
	t.Helper()
	resp, err := http.Post(e.base+"/api/v1/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status          string   `json:"status"`
		Errors          []string `json:"errors"`
		RestartRequired []string `json:"restart_required"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, map[string][]string{"status": {body.Status}, "errors": body.Errors, "restart_required": body.RestartRequired}
}

// alerts returns "rule status" for each alert GET /api/v1/alerts lists.
func (e *reloadEnv) alerts(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get(e.base + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Alerts []struct {
			Rule   string `json:"rule"`
			Status string `json:"status"`
		} `json:"alerts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, a := range body.Alerts {
		out = append(out, a.Rule+" "+a.Status)
	}
	return out
}

// feed sends n records, every second one with no documents (empty_retrieval_rate 0.5).
func (e *reloadEnv) feed(t *testing.T, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "svc", Query: "q", Time: e.now()}
		if i%2 == 0 {
			r.Documents = []record.Document{{ID: "d"}}
		}
		if err := e.app.Records.ConsumeRecord(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReloadAppliesAValidConfig(t *testing.T) {
	e := startReloadEnv(t, fmt.Sprintf(reloadConfig, "0", "0.7", ""))
	ctx := context.Background()
	e.feed(t, 0, 20)
	e.app.Alerts.Evaluate(ctx)
	if got := e.alerts(t); len(got) != 0 {
		t.Fatalf("mean 0.5 is below 0.7: %v", got)
	}
	m := scrape(t, e.base)
	if m["ragwatch_config_last_reload_successful"] != 1 || m["ragwatch_config_last_reload_success_timestamp_seconds"] != float64(e.now().Unix()) {
		t.Fatalf("reload metrics at start: %v %v", m["ragwatch_config_last_reload_successful"], m["ragwatch_config_last_reload_success_timestamp_seconds"])
	}

	// Lower the threshold, sample everything, log at debug; also change keys that need a
	// restart (the HTTP address, the evaluation interval).
	e.clock.Add(int64(time.Minute))
	next := fmt.Sprintf(reloadConfig, "1", "0.1", "alerting: {evaluation_interval: 1m}\n")
	next = strings.Replace(next, "log: {level: info}", "log: {level: debug}", 1)
	e.write(t, strings.Replace(next, `http: {endpoint: "127.0.0.1:0", api_endpoint: ""}`, `http: {endpoint: "127.0.0.1:1"}`, 1))
	code, body := e.reload(t)
	want := map[string][]string{"status": {"success"}, "errors": nil, "restart_required": {"http", "alerting.evaluation_interval"}}
	if code != http.StatusOK || !reflect.DeepEqual(body, want) {
		t.Fatalf("reload: %d %v, want 200 %v", code, body, want)
	}
	// The window kept its ten records: the new threshold fires on them at once.
	e.app.Alerts.Evaluate(ctx)
	if got := e.alerts(t); !reflect.DeepEqual(got, []string{"empty firing"}) {
		t.Fatalf("alerts after reload: %v", got)
	}
	if e.level.Level() != slog.LevelDebug {
		t.Fatalf("log level %v after reload", e.level.Level())
	}
	e.feed(t, 20, 4)
	m = scrape(t, e.base)
	if got := m[`ragwatch_sampled_total{reason="rate",service="svc"}`]; got != 4 {
		t.Fatalf("sampled after rate 0 → 1: %v", got)
	}
	if m["ragwatch_config_last_reload_successful"] != 1 || m["ragwatch_config_last_reload_success_timestamp_seconds"] != float64(e.now().Unix()) ||
		m[`ragwatch_config_reloads_total{outcome="success"}`] != 1 {
		t.Fatalf("reload metrics: %v", m)
	}
	// Keys that need a restart keep their running values in the config in force.
	cfg := e.app.Config()
	if cfg.HTTP.Endpoint != "127.0.0.1:0" || cfg.Alerting.EvaluationInterval != config.Default().Alerting.EvaluationInterval ||
		*cfg.SLOs[0].AlertAbove != 0.1 || cfg.Sampling.Rate != 1 {
		t.Fatalf("config in force: http %s, evaluation_interval %v, alert_above %v, rate %v",
			cfg.HTTP.Endpoint, cfg.Alerting.EvaluationInterval, *cfg.SLOs[0].AlertAbove, cfg.Sampling.Rate)
	}
	// GET /api/v1/config shows the config in force.
	resp, err := http.Get(e.base + "/api/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		HTTP struct {
			Endpoint string `json:"endpoint"`
		} `json:"http"`
		SLOs []struct {
			AlertAbove float64 `json:"alert_above"`
		} `json:"slos"`
	}
	err = json.NewDecoder(resp.Body).Decode(&shown)
	resp.Body.Close()
	if err != nil || shown.HTTP.Endpoint != "127.0.0.1:0" || len(shown.SLOs) != 1 || shown.SLOs[0].AlertAbove != 0.1 {
		t.Fatalf("GET /api/v1/config after reload: %v %+v", err, shown)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `level=WARN msg="config reloaded; changed keys that need a restart keep their running values" component=reload restart_required="http, alerting.evaluation_interval"`) {
		t.Fatalf("no restart warning in the log:\n%s", logs)
	}
}

func TestReloadRejectsABadConfig(t *testing.T) {
	good := fmt.Sprintf(reloadConfig, "0", "0.1", "")
	e := startReloadEnv(t, good)
	ctx := context.Background()
	e.feed(t, 0, 20)
	e.app.Alerts.Evaluate(ctx)

	// Two mistakes: both are reported, with their lines; nothing changes.
	e.write(t, strings.Replace(strings.Replace(good, "rate: 0}", "rate: 2}", 1), "min_samples: 5", "min_samples: -1", 1))
	code, body := e.reload(t)
	want := map[string][]string{"status": {"error"}, "restart_required": nil, "errors": {
		e.path + ": line 5: `sampling.rate` must be between 0 and 1, got 2",
		"line 8: `slos[0].min_samples` must be at least 1",
	}}
	if code != http.StatusBadRequest || !reflect.DeepEqual(body, want) {
		t.Fatalf("reload: %d %q\nwant 400 %q", code, body, want)
	}
	m := scrape(t, e.base)
	if m["ragwatch_config_last_reload_successful"] != 0 || m[`ragwatch_config_reloads_total{outcome="failure"}`] != 1 {
		t.Fatalf("metrics after a rejected reload: successful %v failures %v", m["ragwatch_config_last_reload_successful"], m[`ragwatch_config_reloads_total{outcome="failure"}`])
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=ERROR msg=\"config reload rejected; the running config stays in force\" component=reload problems=") ||
		!strings.Contains(logs, "slos[0].min_samples") {
		t.Fatalf("no error log line:\n%s", logs)
	}
	// The old config is still in force: still firing, nothing sampled.
	e.app.Alerts.Evaluate(ctx)
	e.feed(t, 20, 4)
	if got := e.alerts(t); !reflect.DeepEqual(got, []string{"empty firing"}) {
		t.Fatalf("alerts after a rejected reload: %v", got)
	}
	if got := scrape(t, e.base)[`ragwatch_sampled_total{reason="rate",service="svc"}`]; got != 0 {
		t.Fatalf("sampled %v with rate 0 in force", got)
	}

	// A notifier whose secret variable is unset cannot be built: rejected as a whole, the SLO
	// change in the same file is not applied either.
	e.write(t, fmt.Sprintf(reloadConfig, "0", "0.9", `notifiers:
  - {name: pd, type: pagerduty, routing_key_env: RAGWATCH_RELOAD_TEST_UNSET}
`))
	code, body = e.reload(t)
	if code != http.StatusBadRequest || len(body["errors"]) != 1 || !strings.Contains(body["errors"][0], "RAGWATCH_RELOAD_TEST_UNSET") {
		t.Fatalf("reload with an unbuildable notifier: %d %q", code, body)
	}
	e.app.Alerts.Evaluate(ctx)
	if got := e.alerts(t); !reflect.DeepEqual(got, []string{"empty firing"}) || *e.app.Config().SLOs[0].AlertAbove != 0.1 {
		t.Fatalf("alerts after a rejected notifier: %v", got)
	}

	// An SLO naming a notifier the file does not configure: rejected when the config loads
	// (the engine trusts a loaded config and does not check it again); nothing changes.
	e.write(t, strings.Replace(fmt.Sprintf(reloadConfig, "0", "0.9", ""), "window: 5m}", "window: 5m, notifiers: [nope]}", 1))
	code, body = e.reload(t)
	if code != http.StatusBadRequest || len(body["errors"]) != 1 || !strings.Contains(body["errors"][0], "`slos[0].notifiers[0]` names no configured notifier: \"nope\"") {
		t.Fatalf("reload with an unknown notifier: %d %q", code, body)
	}
	e.app.Alerts.Evaluate(ctx)
	if got := e.alerts(t); !reflect.DeepEqual(got, []string{"empty firing"}) || *e.app.Config().SLOs[0].AlertAbove != 0.1 {
		t.Fatalf("alerts after an unknown notifier: %v", got)
	}

	// Fixed: accepted, the metric goes back to 1.
	e.write(t, good)
	if code, body := e.reload(t); code != http.StatusOK {
		t.Fatalf("reload of the good file: %d %v", code, body)
	}
	if got := scrape(t, e.base)["ragwatch_config_last_reload_successful"]; got != 1 {
		t.Fatalf("successful after a good reload: %v", got)
	}
}

func TestReloadIsBehindTheAPIToken(t *testing.T) {
	t.Setenv("RAGWATCH_RELOAD_TEST_TOKEN", "s3cret-token")
	e := startReloadEnv(t, strings.Replace(fmt.Sprintf(reloadConfig, "0", "0.3", ""), `http: {endpoint: "127.0.0.1:0", api_endpoint: ""}`,
		`http: {endpoint: "127.0.0.1:0", api_endpoint: "", auth: {token_env: RAGWATCH_RELOAD_TEST_TOKEN}}`, 1))
	for _, tc := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized}, {"Bearer s3cret-token", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/api/v1/reload", nil)
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("%q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
}

func TestReloadWithoutSource(t *testing.T) {
	cfg := testConfig(t)
	a, err := service.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	var re *service.ReloadError
	if _, err := a.Reload(); err == nil || !errors.As(err, &re) || !reflect.DeepEqual(re.Problems, []string{"no config source to reload from"}) {
		t.Fatalf("reload without a source: %v", err)
	}
}

// TestReloadUnderTraffic reloads back and forth while records flow and the engine evaluates,
// for the race detector: every swap is safe against the record path.
func TestReloadUnderTraffic(t *testing.T) {
	a := fmt.Sprintf(reloadConfig, "0", "0.1", "")
	b := fmt.Sprintf(reloadConfig, "1", "0.9", `notifiers:
  - {name: hook, type: webhook, url: "http://127.0.0.1:1/hook", max_retries: 0, timeout: 1s}
`)
	e := startReloadEnv(t, a)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "svc", Query: "q", Time: e.now()}
			if err := e.app.Records.ConsumeRecord(context.Background(), r); err != nil {
				t.Error(err)
				return
			}
			e.app.Alerts.Evaluate(context.Background())
		}
	}()
	for i := 0; i < 20; i++ {
		if i%2 == 0 {
			e.write(t, b)
		} else {
			e.write(t, a)
		}
		if _, err := e.app.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if got := *e.app.Config().SLOs[0].AlertAbove; got != 0.1 {
		t.Fatalf("alert_above %v after the last reload", got)
	}
}
