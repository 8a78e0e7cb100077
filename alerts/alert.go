package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Alert kinds.
const (
	KindThreshold = "threshold"
	KindBurnRate  = "burn_rate"
	KindDrift     = "drift"
	// KindChange is an SLO watched by sequential change detection (alerts/changepoint): the
	// alert carries ChangeTime and the levels before and after.
	KindChange = "change"
)

// Alert statuses.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Alert names (the `alertname` label). The rules from `ragwatch rules` use the same names and
// labels, so Alertmanager groups an in-process alert with its fleet-wide twin.
const (
	NameThreshold = "RagwatchSLOViolated"
	NameBurnRate  = "RagwatchErrorBudgetBurn"
	NameDrift     = "RagwatchDrift"
)

// Evidence is one offending request: open its trace to see why.
type Evidence struct {
	TraceID string    `json:"trace_id"`
	SpanID  string    `json:"span_id,omitempty"`
	Value   float64   `json:"value"`
	Time    time.Time `json:"time"`
	URL     string    `json:"url,omitempty"`
}

// Interval is a confidence interval of the window's weighted mean.
type Interval struct {
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
	Level float64 `json:"level"`
}

// Level is a metric's weighted (1/p) mean over a stretch of time, with its confidence
// interval and the number of samples behind it.
type Level struct {
	Value    float64   `json:"value"`
	Interval *Interval `json:"interval,omitempty"`
	N        int64     `json:"n"`
}

// Text is e.g. "0.91 [0.9, 0.92] (95%, n=2400)".
func (l *Level) Text() string {
	if l == nil {
		return ""
	}
	s := FormatValue(l.Value)
	if l.Interval != nil {
		s += fmt.Sprintf(" [%s, %s] (%g%%, n=%d)", FormatValue(l.Interval.Lower), FormatValue(l.Interval.Upper), l.Interval.Level*100, l.N)
	} else {
		s += fmt.Sprintf(" (n=%d)", l.N)
	}
	return s
}

// ChangeTimeText is the change time in RFC 3339 (UTC), or "" without one.
func (a *Alert) ChangeTimeText() string {
	if a.ChangeTime == nil {
		return ""
	}
	return a.ChangeTime.UTC().Format(time.RFC3339)
}

// Alert is one firing or resolved alert with the facts every notifier shows.
type Alert struct {
	Fingerprint string            `json:"fingerprint"`
	Name        string            `json:"alertname"`
	Kind        string            `json:"kind"`
	Rule        string            `json:"rule"` // the SLO or detector name
	Service     string            `json:"service"`
	Severity    string            `json:"severity"`
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`

	Summary     string `json:"summary"`
	Description string `json:"description"`

	Metric     string         `json:"metric"`
	Value      float64        `json:"value"`
	Interval   *Interval      `json:"interval,omitempty"`
	Threshold  float64        `json:"threshold"`
	Comparator string         `json:"comparator"` // "<" or ">": fires when Value is on this side
	Window     model.Duration `json:"window"`     // "15m", "6h", "3d", "1w"
	N          int64          `json:"n"`
	// BudgetRemaining is the burn-rate SLO's error budget left over its period (1 = untouched).
	BudgetRemaining *float64 `json:"error_budget_remaining,omitempty"`

	StartsAt time.Time `json:"starts_at"`
	EndsAt   time.Time `json:"ends_at,omitzero"`

	RunbookURL   string     `json:"runbook_url,omitempty"`
	DashboardURL string     `json:"dashboard_url,omitempty"`
	Evidence     []Evidence `json:"evidence"`

	// ChangeTime is when a change SLO's detector estimates the change began (RFC 3339 in
	// JSON); LevelBefore and LevelAfter are the metric's level either side of it.
	ChangeTime  *time.Time `json:"change_time,omitempty"`
	LevelBefore *Level     `json:"level_before,omitempty"`
	LevelAfter  *Level     `json:"level_after,omitempty"`

	// Diagnosis says why, from the service's metric pairs at the time of the alert.
	Diagnosis *Diagnosis `json:"diagnosis,omitempty"`

	// Notifiers lists the notifier names to deliver to; empty means all.
	Notifiers []string `json:"-"`
}

// Diagnosis is the pattern the service's metric pairs show (alerts/diagnose), "none" when they
// show none, with the figures behind it.
type Diagnosis struct {
	Pattern     string   `json:"pattern"`
	Explanation string   `json:"explanation"`
	Numbers     []Figure `json:"numbers"`
}

// Figure is one named number behind a diagnosis.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// DiagnosisText is e.g. "hallucination: the model understands but hallucinates: ...
// (faithfulness=0.42, answer_relevancy=0.91)", or "" without a diagnosis.
func (a *Alert) DiagnosisText() string {
	d := a.Diagnosis
	if d == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(d.Pattern)
	b.WriteString(": ")
	b.WriteString(d.Explanation)
	if len(d.Numbers) > 0 {
		b.WriteString(" (")
		for i, f := range d.Numbers {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name)
			b.WriteByte('=')
			b.WriteString(FormatValue(f.Value))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Firing reports whether the alert is firing.
func (a *Alert) Firing() bool { return a.Status == StatusFiring }

// Fingerprint is a stable hash of a label set: the same alert gets the same fingerprint in
// every replica and across restarts (PagerDuty dedup_key, webhook id).
func Fingerprint(labels map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(labels[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// FormatValue prints a value with up to 4 significant decimals.
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// ThresholdText is e.g. "< 0.7".
func (a *Alert) ThresholdText() string { return a.Comparator + " " + FormatValue(a.Threshold) }

// IntervalText is e.g. "[0.41, 0.52] (95%)", or "" without an interval.
func (a *Alert) IntervalText() string {
	if a.Interval == nil {
		return ""
	}
	return fmt.Sprintf("[%s, %s] (%g%%)", FormatValue(a.Interval.Lower), FormatValue(a.Interval.Upper), a.Interval.Level*100)
}

// EvidenceText lists the evidence one per line: "trace_id value url".
func (a *Alert) EvidenceText() string {
	var b strings.Builder
	for i, e := range a.Evidence {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.TraceID)
		b.WriteString(" value=")
		b.WriteString(FormatValue(e.Value))
		if e.URL != "" {
			b.WriteByte(' ')
			b.WriteString(e.URL)
		}
	}
	return b.String()
}

// Annotations are the facts as Alertmanager annotations. Empty ones are left out.
func (a *Alert) Annotations() map[string]string {
	out := map[string]string{
		"summary":     a.Summary,
		"description": a.Description,
		"value":       FormatValue(a.Value),
		"threshold":   a.ThresholdText(),
		"window":      a.Window.String(),
		"n":           strconv.FormatInt(a.N, 10),
	}
	opt := map[string]string{
		"interval":      a.IntervalText(),
		"runbook_url":   a.RunbookURL,
		"dashboard_url": a.DashboardURL,
		"evidence":      a.EvidenceText(),
		"diagnosis":     a.DiagnosisText(),
		"change_time":   a.ChangeTimeText(),
		"level_before":  a.LevelBefore.Text(),
		"level_after":   a.LevelAfter.Text(),
	}
	if a.Diagnosis != nil {
		opt["diagnosis_pattern"] = a.Diagnosis.Pattern
	}
	if a.BudgetRemaining != nil {
		opt["error_budget_remaining"] = FormatValue(*a.BudgetRemaining)
	}
	for k, v := range opt {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// TraceURL fills a trace URL template: {trace_id} and {service} are replaced, query-escaped.
// An empty template gives "".
func TraceURL(template, traceID, service string) string {
	if template == "" {
		return ""
	}
	r := strings.NewReplacer("{trace_id}", url.QueryEscape(traceID), "{service}", url.QueryEscape(service))
	return r.Replace(template)
}
