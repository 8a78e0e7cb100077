package rules

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ragwatch/ragwatch/config"
)

const cfgYAML = `
slos:
  - name: cp
    metric: citation_precision
    objective: 0.85
    alert_below: 0.70
    window: 15m
    min_samples: 30
    for: 2m
    labels: { team: search }
    runbook_url: https://runbooks.example/cp
  - name: faithful
    kind: burn_rate
    metric: faithfulness
    good_when: ">= 0.5"
    objective: 0.95
  - name: latency
    metric: latency_seconds
    alert_above: 2.5
    window: 5m
drift:
  detectors:
    - {name: docs, signal: retrieved_documents}
    - {name: scores, signal: retrieval_score, method: ks}
`

func generate(t *testing.T) (*File, []byte) {
	t.Helper()
	c, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Plain(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, b
}

func TestStructure(t *testing.T) {
	f, _ := generate(t)
	var names []string
	for _, g := range f.Groups {
		names = append(names, g.Name)
	}
	if strings.Join(names, ",") != "ragwatch-slo-cp,ragwatch-slo-faithful,ragwatch-slo-latency,ragwatch-drift,ragwatch-store" {
		t.Fatalf("groups = %v", names)
	}
	cp := f.Groups[0].Rules
	alert := cp[len(cp)-1]
	want := Rule{Alert: "RagwatchSLOViolated",
		Expr: "ragwatch:slo_upper_bound:15m{slo=\"cp\"} < 0.7\nand\nragwatch:slo_samples:increase15m{slo=\"cp\"} >= 30",
		For:  "2m", KeepFiringFor: "2m", Labels: map[string]string{"severity": "page", "slo": "cp", "team": "search"}}
	if alert.Alert != want.Alert || alert.Expr != want.Expr || alert.For != want.For || alert.KeepFiringFor != want.KeepFiringFor ||
		len(alert.Labels) != 3 || alert.Labels["team"] != "search" || alert.Annotations["runbook_url"] != "https://runbooks.example/cp" {
		t.Fatalf("cp alert:\n%+v\nwant\n%+v", alert, want)
	}
	lat := f.Groups[2].Rules
	if a := lat[len(lat)-1]; a.Expr != "ragwatch:slo_lower_bound:5m{slo=\"latency\"} > 2.5\nand\nragwatch:slo_samples:increase5m{slo=\"latency\"} >= 30" || a.For != "" {
		t.Fatalf("latency alert: %+v", a)
	}
	// Burn rate: one alert per severity, windows of the workbook, factor × budget.
	fr := f.Groups[1].Rules
	page, ticket := fr[len(fr)-2], fr[len(fr)-1]
	if page.Labels["severity"] != "page" || ticket.Labels["severity"] != "ticket" ||
		!strings.Contains(page.Expr, `ragwatch:slo_error_ratio:rate1h{slo="faithful"} > 0.72`) ||
		!strings.Contains(page.Expr, `ragwatch:slo_error_ratio:rate30m{slo="faithful"} > 0.3`) ||
		!strings.Contains(ticket.Expr, `ragwatch:slo_error_ratio:rate3d{slo="faithful"} > 0.05`) {
		t.Fatalf("burn alerts:\n%s\n%s", page.Expr, ticket.Expr)
	}
	d := f.Groups[3].Rules[1]
	if d.Expr != `max by (detector, service) (ragwatch_drift_score{detector="scores"}) > 0.1` || d.Labels["detector"] != "scores" {
		t.Fatalf("drift rule: %+v", d)
	}
}

func TestOperatorFormat(t *testing.T) {
	f, plain := generate(t)
	b, err := Operator(f, OperatorOptions{Name: "rw", Namespace: "search", Labels: map[string]string{"release": "kps"}})
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string            `yaml:"name"`
			Namespace string            `yaml:"namespace"`
			Labels    map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec File `yaml:"spec"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" || obj.Metadata.Name != "rw" ||
		obj.Metadata.Namespace != "search" || obj.Metadata.Labels["release"] != "kps" || obj.Metadata.Labels["app.kubernetes.io/name"] != "ragwatch" {
		t.Fatalf("object: %+v", obj.Metadata)
	}
	spec, _ := Plain(&obj.Spec)
	if string(spec) != string(plain) {
		t.Fatal("the operator spec must hold exactly the plain rules")
	}
}

func promtool(t *testing.T) string {
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (apt-get install -y prometheus); the e2e suite runs this check in CI")
	}
	return p
}

func TestPromtoolCheckRules(t *testing.T) {
	bin := promtool(t)
	_, b := generate(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool: %s", out)
	}
}

// TestPromtoolRuleUnitTests evaluates the generated rules in Prometheus' own engine on counter
// series shaped like two replicas' exports, and checks the alerts the in-process engine would
// raise on the same traffic.
func TestPromtoolRuleUnitTests(t *testing.T) {
	bin := promtool(t)
	_, b := generate(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each replica scores 6 requests a minute at weight 1: 20 minutes at 0.9, then 0.5.
	var series strings.Builder
	for _, inst := range []string{"a", "b"} {
		l := `{slo="cp",service="search",instance="` + inst + `"}`
		for _, s := range [][2]string{
			{"ragwatch_slo_samples_total", "0+6x20 126+6x40"},
			{"ragwatch_slo_weight_total", "0+6x20 126+6x40"},
			{"ragwatch_slo_weight_squared_total", "0+6x20 126+6x40"},
			{"ragwatch_slo_weighted_value_total", "0+5.4x20 111+3x40"},
			{"ragwatch_slo_weighted_value_negative_total", "0+0x60"},
			{"ragwatch_slo_weighted_value_squared_total", "0+4.86x20 98.7+1.5x40"},
		} {
			series.WriteString("      - series: '" + s[0] + l + "'\n        values: '" + s[1] + "'\n")
		}
		// faithfulness: 10 scored a minute, 2 good (80% bad) → burns 16x a 5% budget.
		fl := `{slo="faithful",service="search",instance="` + inst + `"}`
		series.WriteString("      - series: 'ragwatch_slo_samples_total" + fl + "'\n        values: '0+10x90'\n")
		series.WriteString("      - series: 'ragwatch_slo_weight_total" + fl + "'\n        values: '0+10x90'\n")
		series.WriteString("      - series: 'ragwatch_slo_weighted_value_total" + fl + "'\n        values: '0+2x90'\n")
	}
	test := `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
` + series.String() + `    alert_rule_test:
      - eval_time: 15m
        alertname: RagwatchSLOViolated
        exp_alerts: []
      - eval_time: 50m
        alertname: RagwatchSLOViolated
        exp_alerts:
          - exp_labels: {alertname: RagwatchSLOViolated, slo: cp, service: search, severity: page, team: search}
            exp_annotations:
              summary: 'SLO cp: citation_precision 95% bound 0.5 below 0.7 for search'
              description: 'The 95% confidence interval of the weighted (1/p) mean of citation_precision over 15m, across all replicas, is entirely below 0.7.'
              runbook_url: https://runbooks.example/cp
      - eval_time: 80m
        alertname: RagwatchErrorBudgetBurn
        exp_alerts:
          - exp_labels: {alertname: RagwatchErrorBudgetBurn, slo: faithful, service: search, severity: page}
            exp_annotations:
              summary: 'SLO faithful: error budget burning for search (bad ratio 0.8)'
              description: 'faithfulness is good when >= 0.5; objective 0.95 over 30d. The error budget burns faster than the page thresholds across all replicas.'
          - exp_labels: {alertname: RagwatchErrorBudgetBurn, slo: faithful, service: search, severity: ticket}
            exp_annotations:
              summary: 'SLO faithful: error budget burning for search (bad ratio 0.8)'
              description: 'faithfulness is good when >= 0.5; objective 0.95 over 30d. The error budget burns faster than the ticket thresholds across all replicas.'
    promql_expr_test:
      - expr: round(ragwatch:slo_mean:15m{slo="cp"}, 0.001)
        eval_time: 10m
        exp_samples:
          - labels: '{slo="cp",service="search"}'
            value: 0.9
      - expr: round(ragwatch:slo_upper_bound:15m{slo="cp"}, 0.001)
        eval_time: 50m
        exp_samples:
          - labels: '{slo="cp",service="search"}'
            value: 0.5
      - expr: ragwatch:slo_samples:increase15m{slo="cp"}
        eval_time: 50m
        exp_samples:
          - labels: 'ragwatch:slo_samples:increase15m{slo="cp",service="search"}'
            value: 180
`
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// decision: mean compares the window's mean, not its 95% bound, as the engine does.
func TestDecisionMeanRule(t *testing.T) {
	c, err := config.Parse([]byte("slos:\n  - {name: cp, metric: citation_precision, alert_below: 0.7, decision: mean}\ndrift: {detectors: []}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Groups[0].Rules
	a := rules[len(rules)-1]
	if a.Expr != "ragwatch:slo_mean:15m{slo=\"cp\"} < 0.7\nand\nragwatch:slo_samples:increase15m{slo=\"cp\"} >= 30" ||
		a.Annotations["description"] != "The weighted (1/p) mean of citation_precision over 15m, across all replicas, is below 0.7." {
		t.Fatalf("mean rule: %q %q", a.Expr, a.Annotations["description"])
	}
}

// TestSignalRuleNamesItsMetric: an alert on a request signal says what one value is and which
// metric shows the same values (the signal catalog), so the paged person finds it on the
// dashboard.
func TestSignalRuleNamesItsMetric(t *testing.T) {
	c, err := config.Parse([]byte(`
slos:
  - {name: long, metric: answer_tokens, alert_above: 10, window: 1m, min_samples: 10, decision: mean}
  - {name: slow, metric: latency_seconds, alert_above: 2}
drift: {detectors: [{name: tok, signal: answer_tokens}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	last := func(g Group) string { return g.Rules[len(g.Rules)-1].Annotations["description"] }
	for i, want := range []string{
		"The weighted (1/p) mean of answer_tokens over 1m, across all replicas, is above 10. Per request, answer_tokens (tokens) is the answer's output tokens from the usage, else the answer's words (records with an answer); ragwatch_answer_tokens shows the same values.",
		"The 95% confidence interval of the weighted (1/p) mean of latency_seconds over 15m, across all replicas, is entirely above 2. Per request, latency_seconds (seconds) is the whole request's duration (when measured); ragwatch_request_duration_seconds{stage=\"total\"} shows the same values.",
		"The answer_tokens distribution over the last 1h moved away from its reference on at least one replica (highest PSI across replicas). Per request, answer_tokens (tokens) is the answer's output tokens from the usage, else the answer's words (records with an answer); ragwatch_answer_tokens shows the same values.",
	} {
		if got := last(f.Groups[i]); got != want {
			t.Errorf("group %s description\n got %q\nwant %q", f.Groups[i].Name, got, want)
		}
	}
}

// Every rule file alerts on a replica whose embedded store cannot write, SLOs or not.
func TestStoreWriteFailingRuleIsAlwaysThere(t *testing.T) {
	f, err := Generate(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	g := f.Groups[len(f.Groups)-1]
	if g.Name != "ragwatch-store" || len(g.Rules) != 1 {
		t.Fatalf("last group = %+v, want ragwatch-store with one rule", g)
	}
	r := g.Rules[0]
	if r.Alert != "RagwatchStoreWriteFailing" || r.Expr != `max_over_time(ragwatch_store_write_failing[5m]) > 0` ||
		r.For != "5m" || r.Labels["severity"] != "warning" || !strings.Contains(r.Annotations["summary"], "{{ $labels.store }}") {
		t.Fatalf("store rule = %+v", r)
	}
}

// TestComparisonRules: `ragwatch rules` emits RagwatchCandidateWorse per comparison, firing in
// Prometheus' own engine once per (service, candidate, metric) that some replica's test calls
// candidate_worse, valued at the worst replica's delta; a metric still inconclusive does not fire.
func TestComparisonRules(t *testing.T) {
	bin := promtool(t)
	c, err := config.Parse([]byte(`
comparisons:
  - {name: prompt-v2, metrics: [faithfulness, citation_precision], baseline: stable, margin: 0.05, severity: page, labels: {team: rag}}
`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Plain(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var series strings.Builder
	add := func(name, labels, values string) {
		series.WriteString("      - series: '" + name + "{comparison=\"prompt-v2\",service=\"search\",candidate=\"canary\"," + labels + "}'\n        values: '" + values + "'\n")
	}
	for _, inst := range []string{"a", "b"} {
		l := `instance="` + inst + `",metric=`
		// faithfulness: candidate_worse on replica a from minute 10, never on b.
		worse, est := "0x10 1x20", "-0.02x10 -0.3x20"
		if inst == "b" {
			worse, est = "0x30", "-0.1x30"
		}
		add("ragwatch_comparison_state", l+`"faithfulness",state="candidate_worse"`, worse)
		add("ragwatch_comparison_delta", l+`"faithfulness",bound="estimate"`, est)
		// citation_precision: inconclusive everywhere.
		add("ragwatch_comparison_state", l+`"citation_precision",state="candidate_worse"`, "0x30")
		add("ragwatch_comparison_delta", l+`"citation_precision",bound="estimate"`, "-0.04x30")
	}
	test := `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
` + series.String() + `    alert_rule_test:
      - eval_time: 5m
        alertname: RagwatchCandidateWorse
        exp_alerts: []
      - eval_time: 20m
        alertname: RagwatchCandidateWorse
        exp_alerts:
          - exp_labels: {alertname: RagwatchCandidateWorse, comparison: prompt-v2, baseline: stable, service: search, candidate: canary, metric: faithfulness, severity: page, team: rag}
            exp_annotations:
              summary: 'Comparison prompt-v2: faithfulness of canary is worse than stable for search (delta -0.3, margin 0.05)'
              description: 'The always-valid 95% confidence sequence of the candidate''s weighted mean minus the baseline''s lies entirely below the margin on at least one replica.'
`
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\nrules:\n%s", err, out, b)
	}
}

// With a golden set configured the fleet gets RagwatchJudgeDrift from each replica's drift
// gauge; without one there is no such group.
func TestJudgeDriftRuleWithGoldenSet(t *testing.T) {
	c := config.Default()
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups {
		if g.Name == "ragwatch-golden" {
			t.Fatal("a golden group without golden.file")
		}
	}
	c.Golden.File = "golden.jsonl"
	if f, err = Generate(c); err != nil {
		t.Fatal(err)
	}
	g := f.Groups[len(f.Groups)-1]
	if g.Name != "ragwatch-golden" || len(g.Rules) != 1 || g.Rules[0].Alert != NameJudgeDrift ||
		g.Rules[0].Expr != `max by (judge, metric) (ragwatch_golden_drift) > 0` || g.Rules[0].Labels["severity"] != "warning" {
		t.Fatalf("golden group %+v", g)
	}
}

// TestChangeSLORule: Prometheus cannot run the sequential detector, so a change SLO's rule
// reads the detector's verdict, fleet-wide, under the in-process alert's name and labels.
func TestChangeSLORule(t *testing.T) {
	c, err := config.Parse([]byte("slos:\n  - {name: faith, kind: change, metric: faithfulness, severity: ticket, variant: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	g := f.Groups[0]
	if g.Name != "ragwatch-slo-faith" || len(g.Rules) != 1 {
		t.Fatalf("group: %+v", g)
	}
	r := g.Rules[0]
	if r.Alert != "RagwatchSLOViolated" || r.Expr != `max by (slo, service) (ragwatch_slo_change_detected{slo="faith"}) == 1` ||
		r.For != "" || r.KeepFiringFor != "1m" ||
		!reflect.DeepEqual(r.Labels, map[string]string{"severity": "ticket", "slo": "faith", "variant": "b"}) ||
		!strings.Contains(r.Annotations["description"], "0.1 or more (one false alarm per 1/30d per series)") {
		t.Fatalf("rule: %+v", r)
	}
}
