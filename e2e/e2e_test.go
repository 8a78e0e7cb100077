//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/ragwatch/ragwatch/internal/synth"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// stack is ragwatch with a real Prometheus and Alertmanager on free loopback ports.
type stack struct {
	dir                    string
	ragwatch, prom, am     string // base URLs
	otlpGRPC               string
	configPath, rulesPath  string
	ragwatchProc, promProc *process
	alertmanagerProc       *process
}

const ragwatchConfig = `
receivers:
  otlp:
    grpc: { endpoint: %q }
    http: { endpoint: %q }
http:
  endpoint: %q
  api_endpoint: ""
nats:
  store_dir: %q
  embedded: { endpoint: %q }
assembly:
  wait: 200ms
  timeout: 10s
sampling:
  rate: 0.5
scoring:
  workers: 2
  backend: builtin
slos:
  - name: citation-precision
    metric: citation_precision
    objective: 0.9
    alert_below: 0.7
    window: 20s
    min_samples: 10
    for: 3s
    keep_firing_for: 3s
    severity: page
    labels: { team: search }
    runbook_url: https://runbooks.example.internal/rag/citation-precision
    notifiers: [oncall]
  - name: faithfulness-budget
    kind: burn_rate
    metric: faithfulness
    good_when: ">= 0.5"
    objective: 0.95
    severity: ticket
    notifiers: [oncall]
comparisons:
  - name: canary
    metrics: [faithfulness]
    baseline: stable
    candidate: canary
    min_samples: 10
    notifiers: [oncall]
drift:
  window: 20s
  reference_window: 60s
  detectors:
    - name: retrieval-score-psi
      signal: retrieval_score_top
      method: psi
      threshold: 0.2
      min_samples: 40
      min_reference_samples: 80
      for: 3s
      keep_firing_for: 3s
      severity: ticket
notifiers:
  - name: oncall
    type: alertmanager
    url: %q
    repeat_interval: 5s
alerting:
  evaluation_interval: 1s
  trace_url_template: "http://tempo.example.internal/trace/{trace_id}"
  diagnosis: { window: 1m, min_samples: 10 }
  agreement: { min_samples: 5 }
`

const prometheusConfig = `
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: ragwatch
    static_configs:
      - targets: [%q]
`

const alertmanagerConfig = `
route:
  receiver: "null"
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: "null"
`

func startStack(t *testing.T) *stack {
	bins := need(t, "prometheus", "promtool", "prometheus-alertmanager")
	s := &stack{dir: t.TempDir()}
	bin := buildRagwatch(t)

	amAddr := testutil.FreeAddr(t)
	s.am = "http://" + amAddr
	amCfg := writeFile(t, s.dir, "alertmanager.yml", alertmanagerConfig)
	s.alertmanagerProc = start(t, bins["prometheus-alertmanager"], "--config.file="+amCfg,
		"--storage.path="+filepath.Join(s.dir, "am"), "--web.listen-address="+amAddr, "--cluster.listen-address=")
	waitHTTP(t, s.am+"/-/ready")

	rwAddr := testutil.FreeAddr(t)
	s.ragwatch = "http://" + rwAddr
	s.otlpGRPC = testutil.FreeAddr(t)
	s.configPath = writeFile(t, s.dir, "ragwatch.yaml", fmt.Sprintf(ragwatchConfig,
		s.otlpGRPC, testutil.FreeAddr(t), rwAddr, filepath.Join(s.dir, "data"), testutil.FreeAddr(t), s.am))
	if out, err := exec.Command(bin, "validate", "-c", s.configPath).CombinedOutput(); err != nil {
		t.Fatalf("ragwatch validate: %v\n%s", err, out)
	}
	rules, err := exec.Command(bin, "rules", "-c", s.configPath).Output()
	if err != nil {
		t.Fatalf("ragwatch rules: %v", err)
	}
	s.rulesPath = writeFile(t, s.dir, "rules.yml", string(rules))
	if out, err := exec.Command(bins["promtool"], "check", "rules", s.rulesPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	s.ragwatchProc = start(t, bin, "run", "-c", s.configPath, "--log-format", "json")
	waitHTTP(t, s.ragwatch+"/readyz")

	promAddr := testutil.FreeAddr(t)
	s.prom = "http://" + promAddr
	promCfg := writeFile(t, s.dir, "prometheus.yml", fmt.Sprintf(prometheusConfig, s.rulesPath, amAddr, rwAddr))
	s.promProc = start(t, bins["prometheus"], "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(s.dir, "prom"),
		"--web.listen-address="+promAddr, "--enable-feature=exemplar-storage")
	waitHTTP(t, s.prom+"/-/ready")
	return s
}

// traffic sends synthetic OpenInference traces through the OpenTelemetry SDK at rate per
// second until ctx ends.
func traffic(ctx context.Context, t *testing.T, endpoint string, gen *synth.Generator, rate float64) <-chan int {
	done := make(chan int, 1)
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("support-bot"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)),
		sdktrace.WithIDGenerator(synth.IDGenerator{}), sdktrace.WithResource(res))
	tracer := tp.Tracer("e2e")
	go func() {
		n := 0
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = tp.Shutdown(sctx)
				cancel()
				done <- n
				return
			case <-tick.C:
				turn := gen.Next(time.Now())
				turn.Start = time.Now().Add(-turn.Total)
				// Every fourth request is served by a canary, reported as a feature flag.
				turn.Variant = map[bool]string{true: "canary", false: "stable"}[n%4 == 0]
				synth.Emit(ctx, tracer, &turn)
				n++
			}
		}
	}()
	return done
}

type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
	EndsAt time.Time `json:"endsAt"`
}

func alertmanagerAlerts(s *stack) ([]amAlert, error) {
	b, _, err := httpGet(s.am + "/api/v2/alerts?active=true")
	if err != nil {
		return nil, err
	}
	var out []amAlert
	err = json.Unmarshal(b, &out)
	return out, err
}

func firingInAlertmanager(s *stack, slo string) (*amAlert, error) {
	list, err := alertmanagerAlerts(s)
	if err != nil {
		return nil, err
	}
	for i, a := range list {
		// ragwatch's own alerts carry the window's facts (n, evidence); the Prometheus-side
		// rule for the same SLO reaches Alertmanager too, without them.
		if _, inProcess := a.Annotations["n"]; !inProcess {
			continue
		}
		if a.Labels["slo"] == slo && a.Status.State == "active" && (a.EndsAt.IsZero() || a.EndsAt.After(time.Now())) {
			return &list[i], nil
		}
	}
	return nil, fmt.Errorf("no active alert for slo %s among %d", slo, len(list))
}

func firingInPrometheus(s *stack, alertname string) (bool, error) {
	v, err := promQuery(s.prom, `ALERTS{alertstate="firing",alertname="`+alertname+`"}`)
	if err != nil {
		return false, err
	}
	return len(v) > 0, nil
}

func TestEndToEnd(t *testing.T) {
	s := startStack(t)
	gen := synth.New(synth.Options{Seed: 42})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := traffic(ctx, t, s.otlpGRPC, gen, 30)
	posted := features(ctx, s.ragwatch)

	// Healthy traffic: every query of the shipped dashboard returns data once Prometheus has a
	// few scrapes.
	t.Run("dashboard queries return data", func(t *testing.T) {
		for _, q := range dashboardQueries(t) {
			expr := strings.NewReplacer("$__rate_interval", "1m", "$service", ".*", "$variant", ".*").Replace(q)
			testutil.CheckFor(t, 60*time.Second, 250*time.Millisecond, "dashboard query "+expr, func() error {
				v, err := promQuery(s.prom, expr)
				if err != nil {
					return err
				}
				if len(v) == 0 {
					return fmt.Errorf("empty result")
				}
				return nil
			})
		}
	})

	// The variant read from the feature-flag event labels the request and eval-score metrics:
	// a per-variant query returns each variant's own series.
	t.Run("per-variant query returns data", func(t *testing.T) {
		for _, q := range []struct{ expr, variant string }{
			{`sum by (variant) (rate(ragwatch_requests_total{service="support-bot",variant="canary"}[1m]))`, "canary"},
			{`sum by (variant) (ragwatch_eval_score_count{metric="faithfulness",variant="stable"})`, "stable"},
		} {
			testutil.CheckFor(t, 60*time.Second, 250*time.Millisecond, "per-variant query "+q.expr, func() error {
				v, err := promQuery(s.prom, q.expr)
				if err != nil {
					return err
				}
				if len(v) != 1 || v[0].Metric["variant"] != q.variant {
					return fmt.Errorf("got %+v", v)
				}
				if x, _ := v[0].Value[1].(string); x == "" || x == "0" {
					return fmt.Errorf("value %v", v[0].Value)
				}
				return nil
			})
		}
	})

	t.Run("default config ships the citation-precision SLO", func(t *testing.T) {
		out, err := exec.Command(buildRagwatch(t), "rules").Output()
		if err != nil {
			t.Fatalf("ragwatch rules: %v", err)
		}
		for _, want := range []string{`slo: citation-precision`, `max by (slo, service) (ragwatch_slo_change_detected{slo="citation-precision"}) == 1`,
			`slo: citation-precision-floor`, `ragwatch:slo_upper_bound:15m{slo="citation-precision-floor"} < 0.7`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("ragwatch rules (no config) lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("generated rules load and evaluate", func(t *testing.T) {
		testutil.CheckFor(t, 30*time.Second, 250*time.Millisecond, "rule health", func() error {
			b, _, err := httpGet(s.prom + "/api/v1/rules")
			if err != nil {
				return err
			}
			var r struct {
				Data struct {
					Groups []struct {
						Name  string `json:"name"`
						Rules []struct {
							Name   string `json:"name"`
							Health string `json:"health"`
							Error  string `json:"lastError"`
						} `json:"rules"`
					} `json:"groups"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			if len(r.Data.Groups) == 0 {
				return fmt.Errorf("no rule groups loaded")
			}
			for _, g := range r.Data.Groups {
				for _, rule := range g.Rules {
					if rule.Health != "ok" {
						return fmt.Errorf("rule %s/%s health %q: %s", g.Name, rule.Name, rule.Health, rule.Error)
					}
				}
			}
			v, err := promQuery(s.prom, `ragwatch:slo_mean:20s{slo="citation-precision"}`)
			if err != nil || len(v) == 0 {
				return fmt.Errorf("recording rule has no value yet: %v", err)
			}
			return nil
		})
	})
	if t.Failed() {
		return
	}

	// Break the index: the in-process alert reaches Alertmanager and the Prometheus rule fires.
	gen.SetDegraded(true)
	degradedAt := time.Now()
	var got *amAlert
	testutil.CheckFor(t, 90*time.Second, 250*time.Millisecond, "citation-precision alert in Alertmanager", func() error {
		var err error
		got, err = firingInAlertmanager(s, "citation-precision")
		return err
	})
	t.Logf("citation-precision reached Alertmanager %s after the degradation", time.Since(degradedAt).Round(time.Second))
	if got.Labels["severity"] != "page" || got.Labels["team"] != "search" || got.Labels["service"] != "support-bot" {
		t.Errorf("alert labels %v", got.Labels)
	}
	if got.Annotations["runbook_url"] != "https://runbooks.example.internal/rag/citation-precision" {
		t.Errorf("runbook_url annotation %q", got.Annotations["runbook_url"])
	}
	if !strings.Contains(got.Annotations["evidence"], "http://tempo.example.internal/trace/") {
		t.Errorf("evidence annotation carries no trace link: %v", got.Annotations)
	}
	// The alert says why: the broken index lowers retrieval scores and citation precision
	// together. The pattern needs the pairs' samples too, so it may follow the first delivery.
	testutil.CheckFor(t, 60*time.Second, 250*time.Millisecond, "diagnosis annotation in Alertmanager", func() error {
		a, err := firingInAlertmanager(s, "citation-precision")
		if err != nil {
			return err
		}
		if p := a.Annotations["diagnosis_pattern"]; p != "retrieval_shift" ||
			!strings.HasPrefix(a.Annotations["diagnosis"], "retrieval_shift: retrieval scores and citation precision fall together") ||
			!strings.Contains(a.Annotations["diagnosis"], "citation_precision_now=") {
			return fmt.Errorf("diagnosis annotations %q / %q", p, a.Annotations["diagnosis"])
		}
		return nil
	})
	testutil.CheckFor(t, 90*time.Second, 250*time.Millisecond, "Prometheus-side SLO rule firing", func() error {
		ok, err := firingInPrometheus(s, "RagwatchSLOViolated")
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("RagwatchSLOViolated not firing")
		}
		return nil
	})

	// Repair it: both resolve.
	gen.SetDegraded(false)
	testutil.CheckFor(t, 120*time.Second, 250*time.Millisecond, "alert resolved in Alertmanager", func() error {
		if a, err := firingInAlertmanager(s, "citation-precision"); err == nil {
			return fmt.Errorf("still active: ends %s", a.EndsAt)
		}
		return nil
	})
	testutil.CheckFor(t, 120*time.Second, 250*time.Millisecond, "Prometheus-side rule resolved", func() error {
		ok, err := firingInPrometheus(s, "RagwatchSLOViolated")
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("still firing")
		}
		return nil
	})
	cancel()
	t.Logf("sent %d traces, posted %d feature batches", <-sent, <-posted)
}

// TestDemoFiresAndResolvesBothAlerts runs `ragwatch demo --duration 90s` as a user would and
// checks its summary.
func TestDemoFiresAndResolvesBothAlerts(t *testing.T) {
	bin := buildRagwatch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "90s", "--plain",
		"--otlp-grpc", testutil.FreeAddr(t), "--otlp-http", testutil.FreeAddr(t), "--http", testutil.FreeAddr(t), "--nats", testutil.FreeAddr(t),
		"--data-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, tail(string(out), 8000))
	}
	summary := string(out)
	if i := strings.Index(summary, "=== ragwatch demo summary ==="); i >= 0 {
		summary = summary[i:]
	} else {
		t.Fatalf("no summary:\n%s", tail(string(out), 8000))
	}
	t.Log(summary)
	for _, rule := range []string{"citation-precision", "retrieval-score-psi"} {
		found := false
		for _, line := range strings.Split(summary, "\n") {
			if strings.HasPrefix(line, "alert "+rule+" ") {
				found = true
				if !strings.Contains(line, "resolved at") {
					t.Errorf("%s fired but did not resolve: %s", rule, line)
				}
				// The broken index lowers retrieval scores and citation precision together.
				if !strings.Contains(line, "; diagnosis: retrieval_shift;") {
					t.Errorf("%s was not diagnosed as retrieval_shift: %s", rule, line)
				}
			}
		}
		if !found {
			t.Errorf("%s never fired", rule)
		}
	}
	// The canary (prompt-v2 invents figures) is caught by its comparison and listed with its
	// worst traces.
	if !strings.Contains(summary, "\nalert prompt-v2-canary kind=comparison ") {
		t.Errorf("the canary comparison never fired")
	}
	if !strings.Contains(summary, "\ncomparison prompt-v2-canary prompt-v2 vs prompt-v1 metric=faithfulness state=candidate_worse ") {
		t.Errorf("the summary does not list the canary comparison as candidate_worse")
	}
	// Each alert's diagnosis is printed when it fires.
	if n := strings.Count(string(out), "  diagnosis: "); n < 2 {
		t.Errorf("%d diagnosis lines printed, want one per fired alert:\n%s", n, tail(string(out), 8000))
	}
	_ = os.Stderr
}

// dashboardQueries reads every query of the dashboard as shipped in deploy/grafana, which the
// dashboard package's test keeps identical to what `ragwatch dashboard` generates.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../deploy/grafana/ragwatch-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/ragwatch-dashboard.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			out = append(out, q.Expr)
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard has %d queries; the file or its schema changed", len(out))
	}
	return out
}
