package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func f64(v float64) *float64 { return &v }

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// md is a model.Duration literal.
func md(d time.Duration) model.Duration { return model.Duration(d) }

func TestAlertsDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The default SLOs (docs/alerts.md#default-slos) are on with no file; no notifier is.
	if len(c.Notifiers) != 0 {
		t.Fatalf("no notifiers by default, got %d", len(c.Notifiers))
	}
	var slos []string
	for _, s := range c.SLOs {
		slos = append(slos, fmt.Sprintf("%s %s %s<%v>%v n%d", s.Name, s.Kind, s.Metric, deref(s.AlertBelow), deref(s.AlertAbove), s.MinSamples))
	}
	wantSLOs := []string{
		"citation-precision change citation_precision<-1>-1 n30",
		"citation-precision-floor threshold citation_precision<0.7>-1 n30",
		"faithfulness change faithfulness<-1>-1 n30",
		"answer-relevancy change answer_relevancy<-1>-1 n30",
		"empty-retrieval-rate threshold empty_retrieval_rate<-1>0.1 n100",
		"negative-feedback-rate threshold negative_feedback_rate<-1>0.3 n50",
	}
	if !reflect.DeepEqual(slos, wantSLOs) || c.SLOs[0].Objective != 0.85 {
		t.Fatalf("default SLOs:\n got %q\nwant %q", slos, wantSLOs)
	}
	if !reflect.DeepEqual(Default().SLOs, c.SLOs) {
		t.Fatal("Parse(nil) and Default() disagree on the SLOs")
	}
	// The quality SLOs detect changes: a drop of 0.10, one false alarm per 30 days.
	if f := c.SLOs[2]; f.Direction != DirectionDown || f.MinShift != 0.1 || f.FalseAlarms.Every != 30*24*time.Hour ||
		f.FalseAlarms.String() != "1/30d" || f.Reference != model.Duration(3*time.Hour) || f.Window != 0 || f.For != 0 {
		t.Fatalf("default faithfulness SLO: %+v", f)
	}
	want := Alerting{EvaluationInterval: 15 * time.Second, ResolvedRetention: md(24 * time.Hour),
		StateBucket: "ragwatch_alerts", SaveInterval: 30 * time.Second, StateMaxBytes: 8 << 20,
		Agreement: Agreement{Window: md(7 * 24 * time.Hour), MaxPairs: 1000, MinSamples: 30, MaxRecords: 10000, MaxSeries: 64},
		Diagnosis: defaultDiagnosis()}
	if !reflect.DeepEqual(c.Alerting, want) {
		t.Fatalf("alerting defaults:\n got %+v\nwant %+v", c.Alerting, want)
	}
	if c.Drift.Window != md(time.Hour) || c.Drift.ReferenceWindow != md(24*time.Hour) || len(c.Drift.Detectors) != 3 {
		t.Fatalf("drift defaults: %+v", c.Drift)
	}
	wantDet := DriftDetector{Name: "retrieval-score-psi", Signal: "retrieval_score_top", Method: "psi", Threshold: 0.2,
		MinSamples: 100, MinReferenceSamples: 200, For: md(5 * time.Minute), KeepFiringFor: md(5 * time.Minute), Severity: "ticket"}
	if !reflect.DeepEqual(c.Drift.Detectors[0], wantDet) {
		t.Fatalf("detector default:\n got %+v\nwant %+v", c.Drift.Detectors[0], wantDet)
	}
	var sigs []string
	for _, d := range c.Drift.Detectors {
		sigs = append(sigs, d.Signal)
	}
	if !reflect.DeepEqual(sigs, []string{"retrieval_score_top", "retrieved_documents", "answer_tokens"}) {
		t.Fatalf("default drift signals = %v", sigs)
	}
}

func TestAlertsFull(t *testing.T) {
	c, err := Parse([]byte(`
slos:
  - name: citation-precision
    metric: citation_precision
    objective: 0.85
    alert_below: 0.70
    window: 15m
    min_samples: 30
    for: 2m
    severity: page
    labels: { team: search }
    runbook_url: https://runbooks.example/citations
    notifiers: [oncall]
  - name: faithful-requests
    kind: burn_rate
    metric: faithfulness
    good_when: ">= 0.5"
    objective: 0.95
    period: 28d
  - name: latency
    metric: latency_seconds
    alert_above: 2.5
    hysteresis: 0.1
    burn_rates: []
drift:
  window: 30m
  reference_window: 7d
  detectors:
    - name: scores-ks
      signal: retrieval_score
      method: ks
      buckets: [0, 0.5, 1]
notifiers:
  - name: oncall
    type: alertmanager
    url: http://alertmanager:9093
  - name: audit
    type: webhook
    url: https://hooks.example.internal/ragwatch
    secret_env: RAGWATCH_WEBHOOK_SECRET
  - name: pd
    type: pagerduty
    routing_key_env: PD_KEY
    repeat_interval: 1d
  - name: chat
    type: slack
    url_env: SLACK_URL
alerting:
  trace_url_template: "http://tempo/explore?trace={trace_id}&svc={service}"
`))
	if err != nil {
		t.Fatal(err)
	}
	want0 := SLO{Name: "citation-precision", Kind: "threshold", Metric: "citation_precision", Objective: 0.85,
		AlertBelow: f64(0.70), Window: md(15 * time.Minute), MinSamples: 30, For: md(2 * time.Minute),
		KeepFiringFor: md(2 * time.Minute), Severity: "page", Labels: map[string]string{"team": "search"},
		RunbookURL: "https://runbooks.example/citations", Notifiers: []string{"oncall"}}
	if !reflect.DeepEqual(c.SLOs[0], want0) {
		t.Fatalf("slo 0:\n got %+v\nwant %+v", c.SLOs[0], want0)
	}
	want1 := SLO{Name: "faithful-requests", Kind: "burn_rate", Metric: "faithfulness", GoodWhen: GoodWhen{Op: ">=", Value: 0.5},
		Objective: 0.95, Period: md(28 * 24 * time.Hour), BurnRates: DefaultBurnRates(), MinSamples: 30,
		KeepFiringFor: md(time.Minute), Severity: "page"}
	if !reflect.DeepEqual(c.SLOs[1], want1) {
		t.Fatalf("slo 1:\n got %+v\nwant %+v", c.SLOs[1], want1)
	}
	if c.SLOs[2].Window != md(15*time.Minute) || *c.SLOs[2].AlertAbove != 2.5 || c.SLOs[2].Hysteresis != 0.1 {
		t.Fatalf("slo 2: %+v", c.SLOs[2])
	}
	if c.Drift.ReferenceWindow != md(7*24*time.Hour) || len(c.Drift.Detectors) != 1 {
		t.Fatalf("drift: %+v", c.Drift)
	}
	d := c.Drift.Detectors[0]
	if d.Method != "ks" || d.Threshold != 0.1 || !reflect.DeepEqual(d.Buckets, []float64{0, 0.5, 1}) || d.MinSamples != 100 {
		t.Fatalf("detector: %+v", d)
	}
	wantN := []Notifier{
		{Name: "oncall", Type: "alertmanager", URL: "http://alertmanager:9093", Timeout: 10 * time.Second,
			RepeatInterval: md(time.Minute), RatePerMinute: 60, MaxRetries: 5, RetryBackoff: time.Second},
		{Name: "audit", Type: "webhook", URL: "https://hooks.example.internal/ragwatch", SecretEnv: "RAGWATCH_WEBHOOK_SECRET",
			Timeout: 10 * time.Second, RepeatInterval: md(4 * time.Hour), RatePerMinute: 60, MaxRetries: 5, RetryBackoff: time.Second},
		{Name: "pd", Type: "pagerduty", URL: "https://events.pagerduty.com/v2/enqueue", RoutingKeyEnv: "PD_KEY",
			Timeout: 10 * time.Second, RepeatInterval: md(24 * time.Hour), RatePerMinute: 60, MaxRetries: 5, RetryBackoff: time.Second},
		{Name: "chat", Type: "slack", URLEnv: "SLACK_URL", Timeout: 10 * time.Second, RepeatInterval: md(4 * time.Hour),
			RatePerMinute: 60, MaxRetries: 5, RetryBackoff: time.Second},
	}
	if !reflect.DeepEqual(c.Notifiers, wantN) {
		t.Fatalf("notifiers:\n got %+v\nwant %+v", c.Notifiers, wantN)
	}
	if err := CheckAlertRefs(c); err != nil {
		t.Fatal(err)
	}
}

func TestAlertsErrors(t *testing.T) {
	_, err := Parse([]byte(`
slos:
  - name: "bad name"
    metric: faithfulness
    alert_below: 1
    alert_above: 2
    severity: urgent
    labels: {slo: x}
  - name: br
    kind: burn_rate
    metric: citation_precison
    good_when: "about 0.5"
    objective: 1.5
    burn_rates:
      - {severity: page, long_window: 5m, short_window: 1h, factor: 0}
  - name: z
    metric: rubric_accuracy
    windw: 1m
notifiers:
  - name: a
    type: email
  - name: b
    type: pagerduty
`))
	if err == nil {
		t.Fatal("want errors")
	}
	want := "line 3: `slos[0].name` must be 1-64 letters, digits, '_', '.' or '-', got \"bad name\"\n" +
		"line 5: `slos[0].alert_below` set exactly one of alert_below or alert_above\n" +
		"line 7: `slos[0].severity` must be page, ticket or info, got \"urgent\"\n" +
		"line 8: `slos[0].labels.slo` is set by ragwatch and cannot be overridden\n" +
		"line 11: `slos[1].metric` \"citation_precison\" is not a metric the configured scorers or signals produce (did you mean citation_precision?)\n" +
		"line 12: `slos[1].good_when` must be an operator (>=, >, <=, <) and a number, got \"about 0.5\"\n" +
		"line 13: `slos[1].objective` must be between 0 and 1 (exclusive) for a burn_rate SLO, got 1.5\n" +
		"line 15: `slos[1].burn_rates[0].short_window` must be shorter than long_window (5m)\n" +
		"line 15: `slos[1].burn_rates[0].factor` must be positive\n" +
		"line 16: `slos[2].alert_below` set exactly one of alert_below or alert_above\n" +
		"line 17: `slos[2].metric` \"rubric_accuracy\" is not computed by the configured scoring (backend builtin, metrics [], retrieval_k [1 3 5 10])\n" +
		"line 21: `notifiers[0].type` must be alertmanager, pagerduty, slack or webhook, got \"email\"\n" +
		"line 22: `notifiers[1].routing_key_env` is required for type pagerduty"
	msg := err.Error()
	// Unknown keys are reported before validation runs, so the first parse stops at `windw`.
	if !strings.Contains(msg, "`slos[2].windw` is not a known key") {
		t.Fatalf("unknown key not reported: %v", msg)
	}
	_, err = Parse([]byte(strings.Replace(string(mustRead(t)), "windw", "window", 1)))
	if err == nil {
		t.Fatal("want errors")
	}
	if err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func mustRead(t *testing.T) []byte {
	return []byte(`
slos:
  - name: "bad name"
    metric: faithfulness
    alert_below: 1
    alert_above: 2
    severity: urgent
    labels: {slo: x}
  - name: br
    kind: burn_rate
    metric: citation_precison
    good_when: "about 0.5"
    objective: 1.5
    burn_rates:
      - {severity: page, long_window: 5m, short_window: 1h, factor: 0}
  - name: z
    metric: rubric_accuracy
    windw: 1m
notifiers:
  - name: a
    type: email
  - name: b
    type: pagerduty
`)
}

func TestCheckAlertRefs(t *testing.T) {
	_, err := Parse([]byte(`
slos:
  - {name: a, metric: faithfulness, alert_below: 1, notifiers: [nope]}
  - {name: a, metric: faithfulness, alert_below: 1}
notifiers:
  - {name: n, type: alertmanager, url: "http://am:9093"}
  - {name: n, type: alertmanager, url: "http://am:9093"}
`))
	want := "line 3: `slos[0].notifiers[0]` names no configured notifier: \"nope\"\n" +
		"line 4: `slos[1].name` \"a\" is used twice\n" +
		"line 7: `notifiers[1].name` \"n\" is used twice"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestGoodWhen(t *testing.T) {
	for in, want := range map[string]GoodWhen{">= 0.5": {Op: ">=", Value: 0.5}, "<2.5": {Op: "<", Value: 2.5},
		" > 1": {Op: ">", Value: 1}, "<= 0": {Op: "<=", Value: 0}} {
		g, err := ParseGoodWhen(in)
		if err != nil || g != want {
			t.Errorf("%q: got %+v %v", in, g, err)
		}
	}
	if _, err := ParseGoodWhen("== 1"); err == nil {
		t.Error("== must be rejected")
	}
}

// TestGoodWhenParsedAtLoad: the loaded config holds the parsed condition, and prints it back in
// a form that loads to the same value.
func TestGoodWhenParsedAtLoad(t *testing.T) {
	c, err := Parse([]byte(`
slos:
  - {name: b, kind: burn_rate, metric: faithfulness, good_when: " <2.5", objective: 0.9}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got GoodWhen
	for _, s := range c.SLOs {
		if s.Name == "b" {
			got = s.GoodWhen
		}
	}
	if want := (GoodWhen{Op: "<", Value: 2.5}); got != want {
		t.Fatalf("good_when = %+v, want %+v", got, want)
	}
	if !strings.Contains(c.String(), "good_when: < 2.5") {
		t.Fatalf("config text does not carry good_when:\n%s", c.String())
	}
	again, err := Parse([]byte(c.String()))
	if err != nil {
		t.Fatalf("config text does not load back: %v", err)
	}
	for _, s := range again.SLOs {
		if s.Name == "b" && s.GoodWhen != got {
			t.Fatalf("reloaded good_when = %+v, want %+v", s.GoodWhen, got)
		}
	}
}

// TestAlertDurations covers the keys that take Prometheus durations: day and week units, the
// Go spellings files used before ("1.5h", "720h0m0s"), and errors that name the key and line.
func TestAlertDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30d", 30 * 24 * time.Hour},
		{"1w", 7 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"2w3d", 17 * 24 * time.Hour},
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"720h0m0s", 30 * 24 * time.Hour},
		{"1.5h", 90 * time.Minute},
		{"2.5s", 2500 * time.Millisecond},
	} {
		t.Run(tc.in, func(t *testing.T) {
			c, err := Parse([]byte(`
slos:
  - {name: s, metric: faithfulness, alert_below: 1, window: 1h, for: "` + tc.in + `", keep_firing_for: "` + tc.in + `"}
  - {name: b, kind: burn_rate, metric: faithfulness, good_when: ">= 0.5", objective: 0.9, period: 400d,
     burn_rates: [{severity: page, long_window: 300d, short_window: "` + tc.in + `", factor: 2}]}
drift: {window: 1h, reference_window: 300d, detectors: [{name: d, signal: latency_seconds, for: "` + tc.in + `"}]}
notifiers: [{name: n, type: alertmanager, url: "http://am:9093", repeat_interval: "` + tc.in + `"}]
alerting: {resolved_retention: "` + tc.in + `"}
`))
			if err != nil {
				t.Fatal(err)
			}
			want := md(tc.want)
			got := []model.Duration{c.SLOs[0].For, c.SLOs[0].KeepFiringFor, c.SLOs[1].BurnRates[0].ShortWindow,
				c.Drift.Detectors[0].For, c.Notifiers[0].RepeatInterval, c.Alerting.ResolvedRetention}
			for i, g := range got {
				if g != want {
					t.Errorf("value %d = %v, want %v", i, g, want)
				}
			}
			if c.SLOs[1].Period != md(400*24*time.Hour) || c.Drift.ReferenceWindow != md(300*24*time.Hour) {
				t.Errorf("period %v, reference_window %v", c.SLOs[1].Period, c.Drift.ReferenceWindow)
			}
		})
	}

	for _, zero := range []string{"0", "0s", "0m"} {
		c, err := Parse([]byte(`{slos: [{name: s, metric: faithfulness, alert_below: 1, for: ` + zero + `, keep_firing_for: ` + zero + `}]}`))
		if err != nil || c.SLOs[0].For != 0 || c.SLOs[0].KeepFiringFor != 0 {
			t.Fatalf("for: %s: %v %+v", zero, err, c)
		}
	}

	_, err := Parse([]byte(`
slos:
  - name: s
    metric: faithfulness
    alert_below: 1
    window: 15x
    for: -5m
    keep_firing_for: 100us
drift:
  reference_window: 1m1d
notifiers:
  - {name: n, type: alertmanager, url: "http://am:9093", repeat_interval: soon}
`))
	want := "line 6: `slos[0].window` must be a duration such as 90s, 15m, 1h30m, 7d or 1w, got \"15x\"\n" +
		"line 7: `slos[0].for` must not be negative, got \"-5m\"\n" +
		"line 8: `slos[0].keep_firing_for` must be a duration such as 90s, 15m, 1h30m, 7d or 1w, got \"100us\"\n" +
		"line 10: `drift.reference_window` must be a duration such as 90s, 15m, 1h30m, 7d or 1w, got \"1m1d\"\n" +
		"line 12: `notifiers[0].repeat_interval` must be a duration such as 90s, 15m, 1h30m, 7d or 1w, got \"soon\""
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func TestChangeSLO(t *testing.T) {
	c, err := Parse([]byte(`slos:
  - name: faith
    kind: change
    metric: faithfulness
    false_alarms: 2/7d
    min_shift: 0.05
    direction: up
    reference: 30m
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.SLOs[0]
	if s.Kind != SLOChange || s.FalseAlarms.Every != 84*time.Hour || s.MinShift != 0.05 || s.Direction != DirectionUp ||
		s.Reference != model.Duration(30*time.Minute) || s.MinSamples != 30 || s.Window != 0 || s.Severity != "page" {
		t.Fatalf("change SLO: %+v", s)
	}
	_, err = Parse([]byte(`slos:
  - name: a
    kind: change
    metric: faithfulness
    false_alarms: often
    min_shift: 1.5
    direction: sideways
    window: 5m
  - name: b
    kind: change
    metric: faithfulness
    false_alarms: 1/10m
    alert_below: 0.7
    reference: 0s
`))
	want := "line 5: `slos[0].false_alarms` must be a count per duration such as 1/30d, got \"often\"\n" +
		"line 6: `slos[0].min_shift` must be between 0 and 1 (exclusive): the smallest change of the metric worth paging for, got 1.5\n" +
		"line 7: `slos[0].direction` must be down or up, got \"sideways\"\n" +
		"line 8: `slos[0].window` is not for kind change (it sets direction, min_shift and false_alarms)\n" +
		"line 12: `slos[1].false_alarms` must be at most one per hour, got \"1/10m\"\n" +
		"line 13: `slos[1].alert_below` is not for kind change (it sets direction, min_shift and false_alarms)\n" +
		"line 14: `slos[1].reference` must be positive"
	if err == nil || err.Error() != want {
		t.Fatalf("errors:\n%v\nwant:\n%s", err, want)
	}
}
