package rules

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// File is a Prometheus rule file.
type File struct {
	Groups []Group `yaml:"groups"`
}

// Group is a rule group.
type Group struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is a recording or alerting rule.
type Rule struct {
	Record        string            `yaml:"record,omitempty"`
	Alert         string            `yaml:"alert,omitempty"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// Recording rule names. The window is appended, e.g. ragwatch:slo_mean:15m.
const (
	RecSamples    = "ragwatch:slo_samples:increase"
	RecWeight     = "ragwatch:slo_weight:increase"
	RecWeight2    = "ragwatch:slo_weight_squared:increase"
	RecWX         = "ragwatch:slo_weighted_value:increase"
	RecWXX        = "ragwatch:slo_weighted_value_squared:increase"
	RecMean       = "ragwatch:slo_mean:"
	RecLower      = "ragwatch:slo_lower_bound:"
	RecUpper      = "ragwatch:slo_upper_bound:"
	RecErrorRatio = "ragwatch:slo_error_ratio:rate"
	RecBudget     = "ragwatch:slo_error_budget_remaining:"
)

func dur(d model.Duration) string { return d.String() }

func sumIncrease(metric, sloName string, w model.Duration) string {
	return fmt.Sprintf(`sum by (slo, service) (increase(%s{slo=%q}[%s]))`, metric, sloName, dur(w))
}

func sel(record, sloName string) string { return fmt.Sprintf(`%s{slo=%q}`, record, sloName) }

// prom prints a number without binary noise (0.05, not 0.050000000000000044).
func prom(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }

// forDur is a rule's `for`/`keep_firing_for`, omitted when zero.
func forDur(d model.Duration) string {
	if d <= 0 {
		return ""
	}
	return dur(d)
}

// Generate builds the rule file for the config's SLOs, drift detectors and comparisons.
func Generate(c *config.Config) (*File, error) {
	if err := config.CheckAlertRefs(c); err != nil {
		return nil, err
	}
	f := &File{Groups: []Group{}}
	for _, s := range c.SLOs {
		var g Group
		switch s.Kind {
		case config.SLOBurnRate:
			g = burnRate(s, c.Alerting.DashboardURL.Reveal())
		case config.SLOChange:
			g = change(s, c.Alerting.DashboardURL.Reveal())
		default:
			g = threshold(s, c.Alerting.DashboardURL.Reveal())
		}
		f.Groups = append(f.Groups, g)
	}
	if len(c.Drift.Detectors) > 0 {
		g := Group{Name: "ragwatch-drift"}
		for _, d := range c.Drift.Detectors {
			g.Rules = append(g.Rules, Rule{
				Alert: alerts.NameDrift,
				Expr: fmt.Sprintf(`max by (detector, service) (%s{detector=%q}) > %s`,
					alerts.MetricDriftScore, d.Name, prom(d.Threshold)),
				For: forDur(d.For), KeepFiringFor: forDur(d.KeepFiringFor),
				Labels: withVariant(withLabels(d.Labels, d.Severity, "detector", d.Name), d.Variant),
				Annotations: annotations(
					fmt.Sprintf(`Drift in %s for {{ $labels.service }}: %s {{ $value | printf "%%.3g" }} > %s`, d.Signal, strings.ToUpper(d.Method), prom(d.Threshold)),
					fmt.Sprintf(`The %s distribution over the last %s moved away from its reference on at least one replica (highest %s across replicas).`, d.Signal, dur(c.Drift.Window), strings.ToUpper(d.Method))+signalNote(d.Signal),
					d.RunbookURL.Reveal(), first(d.DashboardURL.Reveal(), c.Alerting.DashboardURL.Reveal())),
			})
		}
		f.Groups = append(f.Groups, g)
	}
	if len(c.Comparisons) > 0 {
		f.Groups = append(f.Groups, comparisonGroup(c.Comparisons, c.Alerting.DashboardURL.Reveal()))
	}
	f.Groups = append(f.Groups, storeGroup())
	if c.Golden.File != "" {
		f.Groups = append(f.Groups, goldenGroup())
	}
	return f, nil
}

// comparisonGroup alerts, per comparison, service, candidate and metric, while some replica's
// always-valid test says the candidate is worse than the baseline (ragwatch_comparison_state):
// the in-process engine's RagwatchCandidateWorse, one alert per worse metric. The value is the
// estimated difference, candidate minus baseline (ragwatch_comparison_delta); the interval is
// each replica's own, on its dashboard and in GET /api/v1/comparisons.
func comparisonGroup(defs []config.Comparison, dashboard string) Group {
	g := Group{Name: "ragwatch-comparisons"}
	for _, d := range defs {
		by := "comparison, service, candidate, metric"
		worse := fmt.Sprintf(`max by (%s) (%s{comparison=%q,state="candidate_worse"}) == 1`, by, comparison.MetricComparisonState, d.Name)
		pick := "min"
		side := "below"
		if d.LowerIsBetter {
			pick, side = "max", "above"
		}
		// The worst replica's estimate: the lowest delta, or the highest when lower is better.
		delta := fmt.Sprintf(`%s by (%s) (%s{comparison=%q,bound="estimate"})`, pick, by, comparison.MetricComparisonDelta, d.Name)
		labels := withLabels(d.Labels, d.Severity, "comparison", d.Name)
		labels["baseline"] = d.Baseline
		g.Rules = append(g.Rules, Rule{
			Alert:  comparison.NameComparison,
			Expr:   delta + " and on (" + by + ") (" + worse + ")",
			Labels: labels,
			Annotations: annotations(
				fmt.Sprintf(`Comparison %s: {{ $labels.metric }} of {{ $labels.candidate }} is worse than %s for {{ $labels.service }} (delta {{ $value | printf "%%.4g" }}, margin %s)`, d.Name, d.Baseline, prom(d.Margin)),
				fmt.Sprintf(`The always-valid %s%% confidence sequence of the candidate's weighted mean minus the baseline's lies entirely %s the margin on at least one replica.`, prom(100*(1-d.Alpha)), side),
				d.RunbookURL.Reveal(), first(d.DashboardURL.Reveal(), dashboard)),
		})
	}
	return g
}

// NameJudgeDrift is the alert of a judge whose golden-set answers moved or whose agreement
// with the people fell (sampler/golden); the service sends it from the run that found it.
const NameJudgeDrift = "RagwatchJudgeDrift"

// goldenGroup alerts on ragwatch_golden_drift, set by each replica's last golden run: the same
// alert as the in-process one, for a fleet whose notifications go through Alertmanager.
func goldenGroup() Group {
	return Group{Name: "ragwatch-golden", Rules: []Rule{{
		Alert:  NameJudgeDrift,
		Expr:   `max by (judge, metric) (ragwatch_golden_drift) > 0`,
		Labels: map[string]string{"severity": "warning"},
		Annotations: annotations(
			`Judge {{ $labels.judge }} drifted on {{ $labels.metric }} (golden set)`,
			`The last run of the golden set found the judge's agreement with the human judgements fell, or its answers on the same items moved beyond golden.tolerance (ragwatch_golden_agreement, ragwatch_golden_items_changed). The in-process alert names the items; see docs/offline-eval.md.`,
			"", ""),
	}}}
}

// NameStoreWriteFailing is the alert of a replica whose embedded NATS store cannot write.
const NameStoreWriteFailing = "RagwatchStoreWriteFailing"

// storeGroup alerts on ragwatch_store_write_failing (natsconn.StoreHealth), whatever the
// config: a sidecar heals by itself within seconds of its volume having room (or descriptors
// coming back), so the alert is for a store that stays failing. max_over_time holds it through
// a reload that fails again at the next write while the volume is still nearly full.
func storeGroup() Group {
	return Group{Name: "ragwatch-store", Rules: []Rule{{
		Alert:  NameStoreWriteFailing,
		Expr:   `max_over_time(ragwatch_store_write_failing[5m]) > 0`,
		For:    "5m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: annotations(
			`ragwatch cannot write its {{ $labels.store }} store on {{ $labels.instance }}`,
			`The embedded NATS server's store fails writes (its volume is full, or the process ran out of file descriptors): what ragwatch writes there is dropped and counted (ragwatch_scoring_dropped_total{reason="storage_full"}, ragwatch_join_state_errors_total{op="storage_full"}, ragwatch_alert_state_saves_total{outcome="error"}). ragwatch reloads the stream by itself within 5 s of the store dir (nats.store_dir) taking a write again: free or grow its volume.`,
			"", ""),
	}}}
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// withLabels is the static label set: severity, the rule's own label (slo or detector, also
// present in the expression, set here so that every rule is distinct) and the user's labels.
func withLabels(l map[string]string, severity, key, name string) map[string]string {
	out := map[string]string{"severity": severity, key: name}
	for k, v := range l {
		out[k] = v
	}
	return out
}

func annotations(summary, description, runbook, dashboard string) map[string]string {
	a := map[string]string{"summary": summary, "description": description}
	if runbook != "" {
		a["runbook_url"] = runbook
	}
	if dashboard != "" {
		a["dashboard_url"] = dashboard
	}
	return a
}

// sumsRules records the window sums of one SLO.
func sumsRules(name string, w model.Duration, withSquares bool) []Rule {
	ws := dur(w)
	rules := []Rule{
		record(RecSamples+ws, name, sumIncrease(alerts.MetricSamples, name, w)),
		record(RecWeight+ws, name, sumIncrease(alerts.MetricWeight, name, w)),
		record(RecWX+ws, name, sumIncrease(alerts.MetricWeightedValue, name, w)+"\n  - "+
			sumIncrease(alerts.MetricWeightedValueNeg, name, w)),
	}
	if withSquares {
		rules = append(rules,
			record(RecWeight2+ws, name, sumIncrease(alerts.MetricWeightSquared, name, w)),
			record(RecWXX+ws, name, sumIncrease(alerts.MetricWeightedValueSquared, name, w)))
	}
	return rules
}

// record is a recording rule for one SLO. The static slo label repeats the expression's so
// that rules of several SLOs sharing a window are distinct to promtool's duplicate check.
func record(name, sloName, expr string) Rule {
	return Rule{Record: name, Expr: expr, Labels: map[string]string{"slo": sloName}}
}

// threshold mirrors slo.Sums.Interval: mean ± 1.96·sqrt(var/(n_eff−1)), n_eff = W²/W2.
func threshold(s config.SLO, dashboard string) Group {
	ws := dur(s.Window)
	g := Group{Name: "ragwatch-slo-" + s.Name, Rules: sumsRules(s.Name, s.Window, true)}
	mean := fmt.Sprintf("%s\n/\n%s", sel(RecWX+ws, s.Name), sel(RecWeight+ws, s.Name))
	se := fmt.Sprintf(`sqrt(
  clamp_min(%s / %s - %s ^ 2, 0)
  /
  (%s ^ 2 / %s - 1)
)`, sel(RecWXX+ws, s.Name), sel(RecWeight+ws, s.Name), sel(RecMean+ws, s.Name),
		sel(RecWeight+ws, s.Name), sel(RecWeight2+ws, s.Name))
	g.Rules = append(g.Rules,
		record(RecMean+ws, s.Name, mean),
		record(RecLower+ws, s.Name, fmt.Sprintf("%s - %s * %s", sel(RecMean+ws, s.Name), prom(slo.Z95), se)),
		record(RecUpper+ws, s.Name, fmt.Sprintf("%s + %s * %s", sel(RecMean+ws, s.Name), prom(slo.Z95), se)),
	)
	bound, op, limit, side := RecUpper, "<", 0.0, "below"
	if s.AlertBelow != nil {
		limit = *s.AlertBelow
	} else {
		bound, op, limit, side = RecLower, ">", *s.AlertAbove, "above"
	}
	what, whole := "95% bound", "The 95% confidence interval of the weighted (1/p) mean"
	if s.Decision == config.DecisionMean {
		bound, what, whole = RecMean, "mean", "The weighted (1/p) mean"
	}
	g.Rules = append(g.Rules, Rule{
		Alert: alerts.NameThreshold,
		Expr: fmt.Sprintf("%s %s %s\nand\n%s >= %d", sel(bound+ws, s.Name), op, prom(limit),
			sel(RecSamples+ws, s.Name), s.MinSamples),
		For: forDur(s.For), KeepFiringFor: forDur(s.KeepFiringFor),
		Labels: withVariant(withLabels(s.Labels, s.Severity, "slo", s.Name), s.Variant),
		Annotations: annotations(
			fmt.Sprintf(`SLO %s: %s %s {{ $value | printf "%%.3g" }} %s %s for {{ $labels.service }}`, s.Name, s.Metric, what, side, prom(limit)),
			fmt.Sprintf(`%s of %s over %s, across all replicas, is %s %s.`, whole, s.Metric, ws, entirely(s.Decision)+side, prom(limit))+signalNote(s.Metric),
			s.RunbookURL.Reveal(), first(s.DashboardURL.Reveal(), dashboard)),
	})
	return g
}

// change is a change SLO's rule. Prometheus cannot run the sequential detector (its state is
// per sample, in the process), so the rule reads the detector's own verdict,
// ragwatch_slo_change_detected, and fires when any replica holds a detected change: the same
// alert name and labels as the in-process alert, for Alertmanager to group them.
func change(s config.SLO, dashboard string) Group {
	word := "drop"
	if s.Direction == config.DirectionUp {
		word = "rise"
	}
	return Group{Name: "ragwatch-slo-" + s.Name, Rules: []Rule{{
		Alert: alerts.NameThreshold,
		Expr:  fmt.Sprintf(`max by (slo, service) (%s{slo=%q}) == 1`, alerts.MetricChangeDetected, s.Name),
		For:   forDur(s.For), KeepFiringFor: forDur(s.KeepFiringFor),
		Labels: withVariant(withLabels(s.Labels, s.Severity, "slo", s.Name), s.Variant),
		Annotations: annotations(
			fmt.Sprintf(`SLO %s: a %s of %s detected for {{ $labels.service }}`, s.Name, word, s.Metric),
			fmt.Sprintf(`A ragwatch replica's change detector holds a %s of %s of %s or more (one false alarm per %s per series); `+
				`%s shows the level and GET /api/v1/alerts the change time and the levels before and after.`,
				word, s.Metric, prom(s.MinShift), s.FalseAlarms.String(), alerts.MetricSLOValue)+signalNote(s.Metric),
			s.RunbookURL.Reveal(), first(s.DashboardURL.Reveal(), dashboard)),
	}}}
}

// signalNote tells, for an alert on a request signal, what one value is and which metric shows
// the same values (the signal catalog), so that whoever is paged finds it on the dashboard; ""
// for an eval metric.
func signalNote(metric string) string {
	sig, ok := reqsignal.ByName(metric)
	if !ok {
		return ""
	}
	note := fmt.Sprintf(" Per request, %s (%s) is %s", metric, sig.Unit, sig.Help)
	switch {
	case sig.Metric != nil && sig.Shows != "" && !strings.Contains(sig.Shows, " "):
		note += fmt.Sprintf("; %s{%s} shows the same values", sig.Metric.Name, sig.Shows)
	case sig.Metric != nil && sig.Shows != "":
		note += fmt.Sprintf("; %s shows the same values (%s)", sig.Metric.Name, sig.Shows)
	case sig.Metric != nil:
		note += fmt.Sprintf("; %s shows the same values", sig.Metric.Name)
	}
	return note + "."
}

func entirely(decision string) string {
	if decision == config.DecisionMean {
		return ""
	}
	return "entirely "
}

func burnRate(s config.SLO, dashboard string) Group {
	g := Group{Name: "ragwatch-slo-" + s.Name}
	windows := map[model.Duration]bool{s.Period: true}
	for _, p := range s.BurnRates {
		windows[p.LongWindow], windows[p.ShortWindow] = true, true
	}
	for _, w := range slices.Sorted(maps.Keys(windows)) {
		g.Rules = append(g.Rules,
			record(RecSamples+dur(w), s.Name, sumIncrease(alerts.MetricSamples, s.Name, w)),
			record(RecErrorRatio+dur(w), s.Name, fmt.Sprintf("1 - (\n  %s\n/\n  %s\n)",
				sumIncrease(alerts.MetricWeightedValue, s.Name, w), sumIncrease(alerts.MetricWeight, s.Name, w))))
	}
	budget := 1 - s.Objective
	g.Rules = append(g.Rules, record(RecBudget+dur(s.Period), s.Name,
		fmt.Sprintf("1 - %s / %s", sel(RecErrorRatio+dur(s.Period), s.Name), prom(budget))))
	var sevs []string
	bySev := map[string][]string{}
	for _, p := range s.BurnRates {
		if _, ok := bySev[p.Severity]; !ok {
			sevs = append(sevs, p.Severity)
		}
		limit := prom(p.Factor * budget)
		bySev[p.Severity] = append(bySev[p.Severity], fmt.Sprintf("(\n  %s > %s\n  and\n  %s > %s\n  and\n  %s >= %d\n)",
			sel(RecErrorRatio+dur(p.LongWindow), s.Name), limit,
			sel(RecErrorRatio+dur(p.ShortWindow), s.Name), limit,
			sel(RecSamples+dur(p.LongWindow), s.Name), s.MinSamples))
	}
	for _, sev := range sevs {
		g.Rules = append(g.Rules, Rule{
			Alert: alerts.NameBurnRate, Expr: strings.Join(bySev[sev], "\nor\n"),
			For: forDur(s.For), KeepFiringFor: forDur(s.KeepFiringFor),
			Labels: withVariant(withLabels(s.Labels, sev, "slo", s.Name), s.Variant),
			Annotations: annotations(
				fmt.Sprintf(`SLO %s: error budget burning for {{ $labels.service }} (bad ratio {{ $value | printf "%%.3g" }})`, s.Name),
				fmt.Sprintf(`%s is good when %s; objective %s over %s. The error budget burns faster than the %s thresholds across all replicas.`,
					s.Metric, s.GoodWhen, prom(s.Objective), dur(s.Period), sev)+signalNote(s.Metric),
				s.RunbookURL.Reveal(), first(s.DashboardURL.Reveal(), dashboard)),
		})
	}
	return g
}

// Header starts every generated file.
const Header = "# Generated by `ragwatch rules` from the ragwatch config; do not edit by hand.\n"

// Plain renders a Prometheus rule file.
func Plain(f *File) ([]byte, error) { return marshal(f, Header) }

// OperatorOptions names the PrometheusRule object.
type OperatorOptions struct {
	Name      string
	Namespace string
	Labels    map[string]string
}

type prometheusRule struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   metadata `yaml:"metadata"`
	Spec       File     `yaml:"spec"`
}

type metadata struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace,omitempty"`
	Labels    map[string]string `yaml:"labels,omitempty"`
}

// Operator renders a prometheus-operator PrometheusRule object.
func Operator(f *File, o OperatorOptions) ([]byte, error) {
	if o.Name == "" {
		o.Name = "ragwatch"
	}
	labels := map[string]string{"app.kubernetes.io/name": "ragwatch"}
	for k, v := range o.Labels {
		labels[k] = v
	}
	return marshal(prometheusRule{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule",
		Metadata: metadata{Name: o.Name, Namespace: o.Namespace, Labels: labels}, Spec: *f}, Header)
}

func marshal(v any, header string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode rules: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// withVariant adds the variant an SLO or detector filters on, as the engine's own alert has it
// (the engine's counters of such a rule count that variant only, so the expressions need no
// variant matcher).
func withVariant(labels map[string]string, variant string) map[string]string {
	if variant != "" {
		labels["variant"] = variant
	}
	return labels
}
