package engine

import (
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
)

// Update applies a reloaded config's SLOs and drift detectors, plus alerting.trace_url_template,
// alerting.dashboard_url and alerting.resolved_retention, without a restart (as Prometheus's
// rules manager Update does). A rule keeps its window state and alert phase per service when
// its name, kind, metric and service filter are unchanged and its windows have the same shape
// (for burn-rate SLOs also the same good_when, for drift detectors the same bins): a changed
// threshold, min_samples, for, labels or notifiers then applies to the data already seen. Any
// other rule starts empty, and a removed rule's state and gauges go away.
//
// alerting.evaluation_interval, alerting.save_interval and alerting.state_bucket are read once
// by New, and drift.baseline_file once at wiring (Options.Baseline); alerting.agreement is the
// judgeagreement.Tracker's (its Update). c comes from a config that config.Load validated,
// cross-section references included: Update does not check it again, and cannot fail.
func (e *Engine) Update(c Sections) {
	var next []*rule
	for _, s := range c.SLOs {
		next = append(next, newSLORule(s, c.Alerting.DashboardURL.Reveal()))
	}
	for _, d := range c.Drift.Detectors {
		next = append(next, newDriftRule(d, c.Drift, c.Alerting.DashboardURL.Reveal()))
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	e.cmp.Update(c.Comparisons, c.MaxVariants, c.Alerting.DashboardURL.Reveal(), c.Alerting.TraceURLTemplate.Reveal())
	old := map[string]*rule{}
	for _, r := range e.rules {
		old[r.storeKey()] = r
	}
	e.rules, e.byMetric = nil, map[string][]*rule{}
	for _, r := range next {
		if prev := old[r.storeKey()]; prev != nil {
			delete(old, r.storeKey())
			if sameWindows(prev, r) {
				r.instances = prev.instances
				for _, in := range r.instances {
					for _, a := range in.Last {
						a.Notifiers = r.notifiers
					}
				}
			}
			// Severities the rule no longer has leave the firing gauge.
			keep := map[string]bool{}
			for _, sev := range r.severities() {
				keep[sev] = true
			}
			for _, sev := range prev.severities() {
				if !keep[sev] {
					e.m.firing.DeleteLabelValues(prev.name, sev)
				}
			}
		}
		e.addRule(r)
	}
	for _, r := range old { // removed rules
		for _, sev := range r.severities() {
			e.m.firing.DeleteLabelValues(r.name, sev)
		}
		if r.kind == alerts.KindDrift {
			e.m.drift.DeletePartialMatch(prometheus.Labels{"detector": r.name})
			continue
		}
		for _, g := range []*prometheus.GaugeVec{e.m.value, e.m.bound, e.m.budget, e.m.burn, e.m.changeDetected, e.m.changeStatistic} {
			g.DeletePartialMatch(prometheus.Labels{"slo": r.name})
		}
	}
	e.indexSignals()
	e.traceTmpl = c.Alerting.TraceURLTemplate.Reveal()
	e.retention = time.Duration(c.Alerting.ResolvedRetention)
}

// sameWindows reports whether next can take over prev's instances: the same values go into
// windows of the same shape and mean the same thing.
func sameWindows(prev, next *rule) bool {
	if prev.kind != next.kind || prev.metric != next.metric || prev.service != next.service {
		return false
	}
	switch next.kind {
	case alerts.KindBurnRate:
		if !reflect.DeepEqual(prev.sloCfg.GoodWhen, next.sloCfg.GoodWhen) {
			return false
		}
	case alerts.KindChange:
		if prev.change.Up != next.change.Up {
			return false // the bank's statistics are for the other direction
		}
	case alerts.KindDrift:
		if !reflect.DeepEqual(prev.edges, next.edges) || prev.driftWindow != next.driftWindow || prev.refWindow != next.refWindow {
			return false
		}
	}
	for _, in := range prev.instances {
		if !next.compatible(in) {
			return false
		}
	}
	return true
}
