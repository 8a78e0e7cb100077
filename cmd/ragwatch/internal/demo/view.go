package demo

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/diagnose"
)

// observe records when each alert fired and resolved.
func (d *demo) observe() {
	list := d.app.Alerts.Alerts()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, al := range list {
		ev, ok := d.alerts[al.Fingerprint]
		if !ok || (ev.Resolved != 0 && al.Status == alerts.StatusFiring && al.StartsAt.Sub(d.start) > ev.Resolved) {
			if al.Status != alerts.StatusFiring {
				continue
			}
			ev = &AlertEvent{Rule: al.Rule, Kind: al.Kind, Severity: al.Severity, FiredAt: d.since(), Diagnosis: diagnose.None}
			key := al.Fingerprint
			if ok {
				key = fmt.Sprintf("%s#%d", al.Fingerprint, len(d.order))
			}
			d.alerts[al.Fingerprint] = ev
			d.alerts[key] = ev
			d.order = append(d.order, key)
			d.logf("ALERT FIRING %s (%s): value %.3f %s threshold %.3f", al.Rule, al.Severity, al.Value, al.Comparator, al.Threshold)
			if al.ChangeTime != nil {
				ev.ChangeAt, ev.HasChange = al.ChangeTime.Sub(d.start), true
				d.logf("  change began at %s (%s into the demo): %s before, %s after", al.ChangeTimeText(),
					ev.ChangeAt.Round(100*time.Millisecond), al.LevelBefore.Text(), al.LevelAfter.Text())
			}
			d.logf("  diagnosis: %s", diagnosisText(&al))
			if al.Diagnosis != nil {
				ev.Diagnosis = al.Diagnosis.Pattern
			}
		} else if al.Status == alerts.StatusFiring && al.Diagnosis != nil && ev.Resolved == 0 &&
			al.Diagnosis.Pattern != diagnose.None && al.Diagnosis.Pattern != ev.Diagnosis {
			// The pattern often shows a few seconds after the alert: the pairs need samples too.
			ev.Diagnosis = al.Diagnosis.Pattern
			d.logf("ALERT DIAGNOSIS %s: %s", al.Rule, diagnosisText(&al))
		}
		ev.Value = al.Value
		if len(al.Evidence) > 0 {
			ev.Worst = ev.Worst[:0]
			for _, e := range al.Evidence {
				ev.Worst = append(ev.Worst, e.TraceID)
			}
		}
		if al.Status == alerts.StatusResolved && ev.Resolved == 0 {
			ev.Resolved = d.since()
			d.logf("ALERT RESOLVED %s after %s", al.Rule, (ev.Resolved - ev.FiredAt).Round(time.Second))
		}
	}
}

func diagnosisText(a *alerts.Alert) string {
	if t := a.DiagnosisText(); t != "" {
		return t
	}
	return diagnose.None
}

// logf prints a line in plain mode and keeps it for the live view. d.mu must be held.
func (d *demo) logf(format string, args ...any) {
	line := fmt.Sprintf("[%6.1fs] ", time.Since(d.start).Seconds()) + fmt.Sprintf(format, args...)
	d.lastLines = append(d.lastLines, line)
	if len(d.lastLines) > 6 {
		d.lastLines = d.lastLines[len(d.lastLines)-6:]
	}
	if d.opts.Plain {
		fmt.Fprintln(d.out, line)
	}
}

func (d *demo) printIntro() {
	o := d.opts
	fmt.Fprintf(d.out, "ragwatch demo: a synthetic RAG app sends %.0f req/s of OpenInference traces over OTLP gRPC to %s\n", o.Rate, o.GRPCEndpoint)
	fmt.Fprintf(d.out, "  metrics:  http://%s/metrics   (point Prometheus here; Grafana dashboard: deploy/grafana/ragwatch-dashboard.json)\n", o.HTTPEndpoint)
	fmt.Fprintf(d.out, "  alerts:   http://%s/api/v1/alerts   scores: http://%s/api/v1/scores\n", o.HTTPEndpoint, o.HTTPEndpoint)
	if o.DegradeFor > 0 {
		fmt.Fprintf(d.out, "  the index breaks at %s and is repaired at %s\n", o.DegradeAfter, o.DegradeAfter+o.DegradeFor)
	} else {
		fmt.Fprintf(d.out, "  the index breaks at %s\n", o.DegradeAfter)
	}
}

// render prints the view: a redrawn screen, or one status line per refresh in plain mode.
func (d *demo) render() {
	fams, _ := d.app.Registry.Gather()
	m := metricsOf(fams)
	d.mu.Lock()
	defer d.mu.Unlock()
	el := time.Since(d.start).Seconds()
	if d.opts.Plain {
		if int(el)%5 == 0 {
			fmt.Fprintf(d.out, "[%6.1fs] %s: sent=%d records=%.0f sampled=%.0f scored=%.0f citation_precision=%s retrieval_score=%s psi=%s firing=%d\n",
				el, d.phase, d.sent.Load(), m.sum("ragwatch_requests_total", nil), m.sum("ragwatch_sampled_total", nil),
				m.count("ragwatch_eval_score", map[string]string{"metric": "citation_precision"}),
				m.fmtGauge("ragwatch_slo_value", map[string]string{"slo": "citation-precision"}),
				fmtMean(m.mean("ragwatch_retrieval_score", nil)),
				m.fmtGauge("ragwatch_drift_score", map[string]string{"detector": "retrieval-score-psi"}),
				d.firing())
		}
		return
	}
	var b strings.Builder
	b.WriteString("\033[H\033[2J")
	fmt.Fprintf(&b, "ragwatch demo  t=%5.1fs  phase: %s\n\n", el, strings.ToUpper(d.phase))
	fmt.Fprintf(&b, "TRAFFIC   sent %d traces (%.1f/s)   feedback %d   send errors %d\n", d.sent.Load(), float64(d.sent.Load())/el, d.feedback.Load(), d.sendErrs.Load())
	fmt.Fprintf(&b, "SIGNALS   records %.0f   mean retrieval score %s   mean top score %s   empty retrievals %.0f\n",
		m.sum("ragwatch_requests_total", nil), fmtMean(m.mean("ragwatch_retrieval_score", nil)),
		fmtMean(m.mean("ragwatch_retrieval_top_score", nil)), m.sum("ragwatch_empty_retrievals_total", nil))
	fmt.Fprintf(&b, "          feedback +%.0f / -%.0f\n", m.sum("ragwatch_feedback_total", map[string]string{"sentiment": "positive"}), m.sum("ragwatch_feedback_total", map[string]string{"sentiment": "negative"}))
	fmt.Fprintf(&b, "SCORING   sampled %.0f   queue depth %.0f   dropped %.0f\n", m.sum("ragwatch_sampled_total", nil), m.sum("ragwatch_scoring_queue_depth", nil), m.sum("ragwatch_scoring_dropped_total", nil))
	for _, metric := range []string{"faithfulness", "citation_precision", "citation_recall", "answer_relevancy"} {
		sel := map[string]string{"metric": metric}
		fmt.Fprintf(&b, "          %-20s n=%-5.0f mean=%s\n", metric, m.count("ragwatch_eval_score", sel), fmtMean(m.mean("ragwatch_eval_score", sel)))
	}
	fmt.Fprintf(&b, "SLO       citation-precision  value %s  (alert below 0.70 over 20s)\n", m.fmtGauge("ragwatch_slo_value", map[string]string{"slo": "citation-precision"}))
	fmt.Fprintf(&b, "DRIFT     retrieval-score-psi %s  (alert above 0.20)\n", m.fmtGauge("ragwatch_drift_score", map[string]string{"detector": "retrieval-score-psi"}))
	for _, c := range d.app.Alerts.Comparisons() {
		fmt.Fprintf(&b, "CANARY    %s %s vs %s  %-18s delta %+.3f %s  %s\n", c.Comparison, c.Candidate, c.Baseline,
			c.Metric, c.Delta, boundsText(c.Lower, c.Upper), strings.ToUpper(c.State))
	}
	b.WriteString("ALERTS\n")
	if len(d.order) == 0 {
		b.WriteString("          none yet\n")
	}
	for _, k := range d.order {
		ev := d.alerts[k]
		state := "FIRING"
		if ev.Resolved != 0 {
			state = fmt.Sprintf("resolved at %s", ev.Resolved.Round(time.Second))
		}
		fmt.Fprintf(&b, "          %-22s %-6s fired at %-6s %s  value %.3f%s\n", ev.Rule, ev.Severity, ev.FiredAt.Round(time.Second), state, ev.Value, changeText(ev))
		if len(ev.Worst) > 0 {
			fmt.Fprintf(&b, "            worst traces: %s\n", strings.Join(ev.Worst, " "))
		}
	}
	b.WriteString("\nEVENTS\n")
	for _, l := range d.lastLines {
		b.WriteString("          " + l + "\n")
	}
	fmt.Fprintf(&b, "\nmetrics: http://%s/metrics   alerts: http://%s/api/v1/alerts   Ctrl-C stops\n", d.opts.HTTPEndpoint, d.opts.HTTPEndpoint)
	fmt.Fprint(d.out, b.String())
}

func (d *demo) firing() int {
	n := 0
	for _, k := range d.order {
		if d.alerts[k].Resolved == 0 {
			n++
		}
	}
	return n
}

func (d *demo) summary() Summary {
	fams, _ := d.app.Registry.Gather()
	m := metricsOf(fams)
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Summary{Requests: d.sent.Load(), SendErrors: d.sendErrs.Load(), Feedback: d.feedback.Load(),
		Scores: map[string]scoreStat{}, DegradedFrom: d.degradedFrom, DegradedTo: d.degradedTo}
	for _, metric := range m.labelValues("ragwatch_eval_score", "metric") {
		sel := map[string]string{"metric": metric}
		s.Scores[metric] = scoreStat{N: uint64(m.count("ragwatch_eval_score", sel)), Mean: m.mean("ragwatch_eval_score", sel)}
	}
	for _, k := range d.order {
		s.Alerts = append(s.Alerts, *d.alerts[k])
	}
	s.Comparisons = d.app.Alerts.Comparisons()
	return s
}

// printSummary writes the summary; the lines starting with "alert " and "comparison " are stable
// for scripts.
func printSummary(w io.Writer, s Summary) {
	fmt.Fprintf(w, "\n=== ragwatch demo summary ===\n")
	fmt.Fprintf(w, "requests %d  feedback %d  send errors %d\n", s.Requests, s.Feedback, s.SendErrors)
	if s.DegradedFrom > 0 {
		fmt.Fprintf(w, "degraded from %s to %s\n", s.DegradedFrom.Round(time.Second), s.DegradedTo.Round(time.Second))
	}
	names := make([]string, 0, len(s.Scores))
	for k := range s.Scores {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "score %-20s n=%d mean=%.3f\n", k, s.Scores[k].N, s.Scores[k].Mean)
	}
	for _, c := range s.Comparisons {
		fmt.Fprintf(w, "comparison %s %s vs %s metric=%s state=%s delta=%.3f %s n=%d/%d; worst traces: %s\n",
			c.Comparison, c.Candidate, c.Baseline, c.Metric, c.State, c.Delta, boundsText(c.Lower, c.Upper),
			c.CandidateN, c.BaselineN, strings.Join(c.WorstTraceIDs, ","))
	}
	if len(s.Alerts) == 0 {
		fmt.Fprintln(w, "no alerts")
	}
	for _, a := range s.Alerts {
		resolved := "still firing"
		if a.Resolved != 0 {
			resolved = "resolved at " + a.Resolved.Round(time.Second).String()
		}
		diagnosis := ""
		if a.Diagnosis != "" {
			diagnosis = "; diagnosis: " + a.Diagnosis
		}
		fmt.Fprintf(w, "alert %s kind=%s severity=%s fired at %s, %s%s%s; worst traces: %s\n",
			a.Rule, a.Kind, a.Severity, a.FiredAt.Round(time.Second), resolved, changeText(&a), diagnosis, strings.Join(a.Worst, ","))
	}
}

// metrics reads gathered families.
type metrics map[string]*dto.MetricFamily

func metricsOf(fams []*dto.MetricFamily) metrics {
	m := metrics{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}

func matches(mt *dto.Metric, sel map[string]string) bool {
	for k, v := range sel {
		found := false
		for _, l := range mt.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// sum adds counters, gauges and histogram counts of the matching series.
func (m metrics) sum(name string, sel map[string]string) float64 {
	f := m[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, mt := range f.GetMetric() {
		if !matches(mt, sel) {
			continue
		}
		switch {
		case mt.Counter != nil:
			total += mt.Counter.GetValue()
		case mt.Gauge != nil:
			total += mt.Gauge.GetValue()
		case mt.Histogram != nil:
			total += float64(mt.Histogram.GetSampleCount())
		}
	}
	return total
}

func (m metrics) count(name string, sel map[string]string) float64 { return m.sum(name, sel) }

// mean is a histogram's sum over count across matching series (NaN when empty).
func (m metrics) mean(name string, sel map[string]string) float64 {
	f := m[name]
	if f == nil {
		return -1
	}
	var s float64
	var n uint64
	for _, mt := range f.GetMetric() {
		if mt.Histogram != nil && matches(mt, sel) {
			s += mt.Histogram.GetSampleSum()
			n += mt.Histogram.GetSampleCount()
		}
	}
	if n == 0 {
		return -1
	}
	return s / float64(n)
}

func (m metrics) fmtGauge(name string, sel map[string]string) string {
	f := m[name]
	if f == nil {
		return "  -  "
	}
	for _, mt := range f.GetMetric() {
		if mt.Gauge != nil && matches(mt, sel) {
			return fmt.Sprintf("%.3f", mt.Gauge.GetValue())
		}
	}
	return "  -  "
}

func (m metrics) labelValues(name, label string) []string {
	f := m[name]
	if f == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, mt := range f.GetMetric() {
		for _, l := range mt.GetLabel() {
			if l.GetName() == label && !seen[l.GetValue()] {
				seen[l.GetValue()] = true
				out = append(out, l.GetValue())
			}
		}
	}
	sort.Strings(out)
	return out
}

func fmtMean(v float64) string {
	if v < 0 {
		return "  -  "
	}
	return fmt.Sprintf("%.3f", v)
}

func boundsText(lower, upper *float64) string {
	if lower == nil || upper == nil {
		return "[unbounded]"
	}
	return fmt.Sprintf("[%.3f, %.3f]", *lower, *upper)
}

// changeText is "; change began at 20.4s" for a change SLO's alert, "" for others.
func changeText(ev *AlertEvent) string {
	if !ev.HasChange {
		return ""
	}
	return "; change began at " + ev.ChangeAt.Round(100*time.Millisecond).String()
}
