// Package dashboard builds ragwatch's Grafana dashboard from the metric names the code exports,
// so the committed deploy/grafana/ragwatch-dashboard.json never drifts from the metrics.
package dashboard

import (
	"bytes"
	"encoding/json"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/judgeagreement"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// Query is one PromQL target of a panel.
type Query struct {
	Expr   string `json:"expr"`
	Legend string `json:"legendFormat,omitempty"`
	RefID  string `json:"refId"`
	// Exemplar asks Grafana to show exemplars (trace ids) for the series.
	Exemplar bool   `json:"exemplar,omitempty"`
	Format   string `json:"format,omitempty"`
}

// panel is the subset of Grafana's panel model ragwatch uses.
type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Datasource  *datasource    `json:"datasource,omitempty"`
	GridPos     gridPos        `json:"gridPos"`
	Targets     []Query        `json:"targets,omitempty"`
	FieldConfig map[string]any `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	Panels      []panel        `json:"panels,omitempty"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

var promDS = &datasource{Type: "prometheus", UID: "${datasource}"}

// sel is the service selector every query carries.
const sel = `service=~"$service"`

// vsel adds the variant selector ($variant: All matches records without variant too).
const vsel = sel + `,variant=~"$variant"`

type spec struct {
	kind, title, desc, unit string
	queries                 []Query
	min, max                *float64
}

type row struct {
	title  string
	panels []spec
}

func f(v float64) *float64 { return &v }

func q(expr, legend string) Query { return Query{Expr: expr, Legend: legend} }

func qx(expr, legend string) Query { return Query{Expr: expr, Legend: legend, Exemplar: true} }

// rows is the dashboard's content, top to bottom: how a request flows, then what judges say,
// then what pages people.
func rows() []row {
	// The signal metrics, by the catalog's names.
	requests, duration, documents := reqsignal.MetricRequests.Name, reqsignal.MetricDuration.Name, reqsignal.MetricDocuments.Name
	score, topScore, empty := reqsignal.MetricScore.Name, reqsignal.MetricTopScore.Name, reqsignal.MetricEmpty.Name
	tokens, citations, feedback := reqsignal.MetricTokens.Name, reqsignal.MetricCitations.Name, reqsignal.MetricFeedback.Name
	return []row{
		{"Traffic and latency", []spec{
			{kind: "timeseries", title: "Requests per second", unit: "reqps", queries: []Query{
				q(`sum by (service) (rate(`+requests+`{`+sel+`}[$__rate_interval]))`, "{{service}}")}},
			{kind: "timeseries", title: "Latency p50 / p95 by stage", unit: "s", queries: []Query{
				qx(`histogram_quantile(0.95, sum by (le, stage) (rate(`+duration+`_bucket{`+sel+`}[$__rate_interval])))`, "p95 {{stage}}"),
				q(`histogram_quantile(0.5, sum by (le, stage) (rate(`+duration+`_bucket{`+sel+`}[$__rate_interval])))`, "p50 {{stage}}")}},
			{kind: "timeseries", title: "Spans received and rejected", unit: "ops", queries: []Query{
				q(`sum by (receiver) (rate(ragwatch_spans_received_total[$__rate_interval]))`, "spans {{receiver}}"),
				q(`sum by (receiver, reason) (rate(ragwatch_ingest_rejected_total[$__rate_interval])) or vector(0)`, "rejected {{receiver}} {{reason}}")}},
			{kind: "timeseries", title: "Records by outcome", unit: "ops", queries: []Query{
				q(`sum by (outcome) (rate(ragwatch_records_total[$__rate_interval]))`, "{{outcome}}"),
				q(`sum(rate(ragwatch_traces_evicted_total[$__rate_interval])) or vector(0)`, "evicted")}},
		}},
		{"Retrieval", []spec{
			{kind: "heatmap", title: "Mean retrieval score (distribution)", queries: []Query{
				{Expr: `sum by (le) (increase(` + score + `_bucket{` + sel + `}[$__rate_interval]))`, Legend: "{{le}}", Format: "heatmap"}}},
			{kind: "timeseries", title: "Retrieval score: mean and top", unit: "short", min: f(0), max: f(1), queries: []Query{
				qx(`sum(rate(`+score+`_sum{`+sel+`}[$__rate_interval])) / sum(rate(`+score+`_count{`+sel+`}[$__rate_interval]))`, "mean score"),
				q(`sum(rate(`+topScore+`_sum{`+sel+`}[$__rate_interval])) / sum(rate(`+topScore+`_count{`+sel+`}[$__rate_interval]))`, "mean top score")}},
			{kind: "timeseries", title: "Documents in context", unit: "short", queries: []Query{
				q(`sum(rate(`+documents+`_sum{`+sel+`}[$__rate_interval])) / sum(rate(`+documents+`_count{`+sel+`}[$__rate_interval]))`, "mean documents")}},
			{kind: "timeseries", title: "Empty retrievals", unit: "percentunit", queries: []Query{
				// Of the requests whose retrieval was seen: those whose trace showed none
				// (ragwatch_retrievals_not_seen_total) are no empty retrievals.
				q(`(sum(rate(`+empty+`{`+sel+`}[$__rate_interval])) or vector(0)) / (sum(rate(`+requests+`{`+sel+`}[$__rate_interval])) - (sum(rate(`+reqsignal.MetricNotSeen.Name+`{`+sel+`}[$__rate_interval])) or vector(0)))`, "empty share")}},
		}},
		{"Answers", []spec{
			{kind: "timeseries", title: "Answer tokens p50 / p95", unit: "short", queries: []Query{
				qx(`histogram_quantile(0.95, sum by (le) (rate(`+tokens+`_bucket{`+sel+`}[$__rate_interval])))`, "p95"),
				q(`histogram_quantile(0.5, sum by (le) (rate(`+tokens+`_bucket{`+sel+`}[$__rate_interval])))`, "p50")}},
			{kind: "timeseries", title: "Citations per answer", unit: "short", queries: []Query{
				q(`sum(rate(`+citations+`_sum{`+sel+`}[$__rate_interval])) / sum(rate(`+citations+`_count{`+sel+`}[$__rate_interval]))`, "mean citations")}},
		}},
		{"Feedback", []spec{
			{kind: "timeseries", title: "Feedback by sentiment", unit: "ops", queries: []Query{
				q(`sum by (sentiment) (rate(`+feedback+`{`+sel+`}[$__rate_interval]))`, "{{sentiment}}")}},
			{kind: "timeseries", title: "Negative feedback share", unit: "percentunit", queries: []Query{
				q(`(sum(rate(`+feedback+`{`+sel+`,sentiment="negative"}[$__rate_interval])) or vector(0)) / sum(rate(`+feedback+`{`+sel+`}[$__rate_interval]))`, "negative")}},
		}},
		{"Evaluation scores", []spec{
			{kind: "timeseries", title: "Weighted mean score by metric", unit: "short", min: f(0), max: f(1), queries: []Query{
				qx(`sum by (metric) (rate(ragwatch_eval_score_weighted_sum_total{`+sel+`}[$__rate_interval])) / sum by (metric) (rate(ragwatch_eval_score_weight_total{`+sel+`}[$__rate_interval]))`, "{{metric}}")}},
			{kind: "timeseries", title: "SLO value against threshold", unit: "short", min: f(0), max: f(1), queries: []Query{
				q(`ragwatch_slo_value`, "{{slo}}")}},
			{kind: "timeseries", title: "Records sampled for scoring", unit: "ops", queries: []Query{
				q(`sum by (reason) (rate(ragwatch_sampled_total{`+sel+`}[$__rate_interval]))`, "{{reason}}")}},
			{kind: "timeseries", title: "Quality by turn", unit: "short", min: f(0), max: f(1),
				desc: "Mean score by metric and conversation turn (1, 2, 3-5, 6+): a falling line at later turns means follow-up questions are answered worse.",
				queries: []Query{
					q(`sum by (metric, turn_bucket) (rate(ragwatch_eval_score_by_turn_sum{`+sel+`}[$__rate_interval])) / sum by (metric, turn_bucket) (rate(ragwatch_eval_score_by_turn_count{`+sel+`}[$__rate_interval]))`, "{{metric}} turn {{turn_bucket}}")}},
		}},
		{"Diagnosis, judges and refusals", []spec{
			{kind: "timeseries", title: "Diagnosis patterns", unit: "short", min: f(0), max: f(1),
				desc: "1 while a service's metric pairs show the pattern (hallucination, context_ignored, ranking_noise, noisy_context, retrieval_shift): where the problem is, retrieval or generation (docs/alerts.md#diagnosis).",
				queries: []Query{
					q(`max by (service, pattern) (`+alerts.MetricDiagnosis+`{`+sel+`})`, "{{service}} {{pattern}}")}},
			{kind: "timeseries", title: "Judge agreement with human labels", unit: "short",
				desc: "Agreement of each judge with people on the same records: spearman and kappa (higher is better), mae (lower is better); exported once min_samples pairs exist (docs/judges.md).",
				queries: []Query{
					q(judgeagreement.MetricJudgeAgreement, "{{judge}} {{metric}} {{statistic}}"),
					q(judgeagreement.MetricJudgeAgreementPairs, "{{judge}} {{metric}} pairs")}},
			{kind: "timeseries", title: "Pairwise win rate", unit: "percentunit", min: f(0), max: f(1),
				desc: "Share of shadow pairs the candidate won (ties count half), with its 95% interval: above 0.5 the candidate is better (docs/pairwise.md).",
				queries: []Query{
					q(`ragwatch_pairwise_win_rate`, "{{comparison}} {{bound}}")}},
			{kind: "timeseries", title: "Refusals", unit: "percentunit", min: f(0), max: f(1),
				desc: "Share of answers that decline for lack of information, and the share of scored refusals that were right (refusal_correct: the documents did not support an answer).",
				queries: []Query{
					q(`(sum(rate(`+reqsignal.MetricRefusals.Name+`{`+sel+`}[$__rate_interval])) or vector(0)) / sum(rate(`+requests+`{`+sel+`}[$__rate_interval]))`, "refusal share"),
					q(`sum(rate(ragwatch_eval_score_weighted_sum_total{`+sel+`,metric="refusal_correct"}[$__rate_interval])) / sum(rate(ragwatch_eval_score_weight_total{`+sel+`,metric="refusal_correct"}[$__rate_interval]))`, "correct refusals")}},
		}},
		{"Alerts and error budgets", []spec{
			{kind: "stat", title: "Alerts firing", unit: "short", queries: []Query{
				q(`sum(ragwatch_alerts_firing) or vector(0)`, "firing")}},
			{kind: "timeseries", title: "Error budget remaining", unit: "percentunit", queries: []Query{
				q(`ragwatch_slo_error_budget_remaining`, "{{slo}}")}},
			{kind: "timeseries", title: "Notifications", unit: "ops", queries: []Query{
				q(`sum by (notifier, outcome) (rate(ragwatch_notifications_total[$__rate_interval])) or vector(0)`, "{{notifier}} {{outcome}}")}},
		}},
		{"Drift", []spec{
			{kind: "timeseries", title: "Drift score by detector", unit: "short", queries: []Query{
				q(`ragwatch_drift_score`, "{{detector}}")}},
		}},
		{"Variants and comparisons", []spec{
			{kind: "timeseries", title: "Requests per second by variant", unit: "reqps",
				desc: "The variant comes from rag.variant, variants.attributes (feature flags) or service.version; empty: none (docs/variants.md).",
				queries: []Query{
					q(`sum by (variant) (rate(`+requests+`{`+vsel+`}[$__rate_interval]))`, "{{variant}}")}},
			{kind: "timeseries", title: "Mean score by variant", unit: "short", min: f(0), max: f(1), queries: []Query{
				qx(`sum by (variant, metric) (rate(ragwatch_eval_score_sum{`+vsel+`}[$__rate_interval])) / sum by (variant, metric) (rate(ragwatch_eval_score_count{`+vsel+`}[$__rate_interval]))`, "{{variant}} {{metric}}")}},
			{kind: "timeseries", title: "Latency p95 by variant", unit: "s", queries: []Query{
				qx(`histogram_quantile(0.95, sum by (le, variant) (rate(`+duration+`_bucket{`+vsel+`,stage="total"}[$__rate_interval])))`, "{{variant}}")}},
			{kind: "timeseries", title: "Comparisons: candidate − baseline", unit: "short",
				desc: "Delta of the weighted means with its always-valid confidence sequence; the candidate is worse when the upper bound is below −margin.",
				queries: []Query{
					q(`ragwatch_comparison_delta{`+sel+`,candidate=~"$variant"}`, "{{comparison}} {{candidate}} {{metric}} {{bound}}")}},
			{kind: "timeseries", title: "Comparison states", unit: "short", queries: []Query{
				q(`ragwatch_comparison_state{`+sel+`,candidate=~"$variant"} == 1`, "{{comparison}} {{candidate}} {{metric}} {{state}}")}},
		}},
		{"Scorer", []spec{
			{kind: "timeseries", title: "Queue depth and drops", unit: "short", queries: []Query{
				q(`ragwatch_scoring_queue_depth`, "queue depth"),
				q(`sum by (reason) (rate(ragwatch_scoring_dropped_total[$__rate_interval])) or vector(0)`, "dropped {{reason}}"),
				q(`sum(rate(ragwatch_scoring_dead_letter_total[$__rate_interval])) or vector(0)`, "dead letters")}},
			{kind: "timeseries", title: "Scoring attempts by outcome", unit: "ops", queries: []Query{
				q(`sum by (scorer, outcome) (rate(ragwatch_scoring_attempts_total[$__rate_interval]))`, "{{scorer}} {{outcome}}")}},
			{kind: "timeseries", title: "Scoring latency p95", unit: "s", queries: []Query{
				q(`histogram_quantile(0.95, sum by (le, scorer) (rate(ragwatch_scoring_duration_seconds_bucket[$__rate_interval])))`, "{{scorer}}")}},
			{kind: "timeseries", title: "Judge cost (USD per hour) and budget left", unit: "currencyUSD", queries: []Query{
				q(`sum by (model) (rate(ragwatch_scoring_cost_usd_total[$__rate_interval])) * 3600 or vector(0)`, "{{model}}"),
				q(`ragwatch_sampling_budget_remaining_usd`, "budget left today")}},
		}},
	}
}

// Queries returns every PromQL expression of the dashboard, for tests that run them.
func Queries() []string {
	var out []string
	for _, r := range rows() {
		for _, p := range r.panels {
			for _, t := range p.queries {
				out = append(out, t.Expr)
			}
		}
	}
	return out
}

// JSON renders the dashboard as Grafana dashboard JSON (schema 39).
func JSON() ([]byte, error) {
	var panels []panel
	id, y := 1, 0
	for _, r := range rows() {
		panels = append(panels, panel{ID: id, Type: "row", Title: r.title, GridPos: gridPos{H: 1, W: 24, X: 0, Y: y}, Collapsed: new(bool)})
		id++
		y++
		w := 24 / len(r.panels)
		if w < 6 {
			w = 6
		}
		x := 0
		for _, s := range r.panels {
			if x+w > 24 {
				x = 0
				y += 8
			}
			p := panel{ID: id, Type: s.kind, Title: s.title, Description: s.desc, Datasource: promDS,
				GridPos: gridPos{H: 8, W: w, X: x, Y: y}}
			for i, t := range s.queries {
				t.RefID = string(rune('A' + i))
				p.Targets = append(p.Targets, t)
			}
			defaults := map[string]any{}
			if s.unit != "" {
				defaults["unit"] = s.unit
			}
			if s.min != nil {
				defaults["min"] = *s.min
			}
			if s.max != nil {
				defaults["max"] = *s.max
			}
			p.FieldConfig = map[string]any{"defaults": defaults, "overrides": []any{}}
			if s.kind == "heatmap" {
				p.Options = map[string]any{"calculate": false, "yAxis": map[string]any{"unit": "short"}, "cellGap": 1}
			}
			panels = append(panels, p)
			id++
			x += w
		}
		y += 8
	}
	d := map[string]any{
		"title":         "ragwatch — RAG quality",
		"uid":           "ragwatch",
		"tags":          []string{"ragwatch", "rag", "llm"},
		"schemaVersion": 39,
		"version":       1,
		"editable":      true,
		"refresh":       "30s",
		"time":          map[string]string{"from": "now-1h", "to": "now"},
		"timezone":      "utc",
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": map[string]any{}},
			map[string]any{"name": "service", "label": "Service", "type": "query", "datasource": promDS,
				"query":   map[string]any{"query": "label_values(" + reqsignal.MetricRequests.Name + ", service)", "refId": "service"},
				"refresh": 2, "includeAll": true, "multi": true, "allValue": ".*", "current": map[string]any{"text": "All", "value": "$__all"}},
			map[string]any{"name": "variant", "label": "Variant", "type": "query", "datasource": promDS,
				"query":   map[string]any{"query": "label_values(" + reqsignal.MetricRequests.Name + ", variant)", "refId": "variant"},
				"refresh": 2, "includeAll": true, "multi": true, "allValue": ".*", "current": map[string]any{"text": "All", "value": "$__all"}},
		}},
		"annotations": map[string]any{"list": []any{}},
		"panels":      panels,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
