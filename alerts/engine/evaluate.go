package engine

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/internal/lifecycle"
)

// Evaluate runs one evaluation at the engine's clock: it steps every alert, updates the
// gauges, hands firing and recently resolved alerts to the sink and returns the firing and
// just-resolved ones.
func (e *Engine) Evaluate(ctx context.Context) []alerts.Alert {
	now := e.now()
	e.diag.Diagnose(now) // before the lock: the diagnoser has its own
	e.mu.Lock()
	e.dropEvicted()
	var out, resend []alerts.Alert
	firing := map[[2]string]int{}
	for _, r := range e.rules {
		for _, service := range slices.Sorted(maps.Keys(r.instances)) {
			in := r.instances[service]
			for _, ev := range r.evaluate(e, service, in, now) {
				m := in.Machines[ev.severity]
				if m == nil {
					m = &Machine{Phase: phaseInactive}
					in.Machines[ev.severity] = m
				}
				tr := m.Step(now, ev.breach, ev.recovered, r.forDur, r.keep)
				a := ev.alert
				a.Diagnosis = e.diag.For(service, r.variant, r.metric)
				switch {
				case m.Firing():
					a.Status, a.StartsAt = alerts.StatusFiring, m.FiringSince
					firing[[2]string{r.name, ev.severity}]++
				case tr == Resolved:
					a.Status, a.EndsAt = alerts.StatusResolved, now
					if last := in.Last[ev.severity]; last != nil {
						a.StartsAt = last.StartsAt
					}
				default:
					// A resolve is offered again for ResolvedResend so that one failed or
					// rate-limited delivery does not leave an incident open; notifiers
					// send it once.
					if last := in.Last[ev.severity]; last != nil && last.Status == alerts.StatusResolved &&
						now.Sub(last.EndsAt) < ResolvedResend {
						resend = append(resend, *last)
					}
					continue
				}
				if tr == Fired {
					e.logger.Warn("alert firing", "alert", a.Name, "rule", r.name, "service", service,
						"severity", a.Severity, "value", a.Value, "n", a.N)
				} else if tr == Resolved {
					e.logger.Info("alert resolved", "alert", a.Name, "rule", r.name, "service", service, "severity", a.Severity)
				}
				cp := a
				in.Last[ev.severity] = &cp
				out = append(out, a)
			}
		}
		for _, sev := range r.severities() {
			e.m.firing.WithLabelValues(r.name, sev).Set(float64(firing[[2]string{r.name, sev}]))
		}
	}
	out = append(out, e.cmp.Evaluate(now, e.diag.For)...)
	e.mu.Unlock()
	if e.sink != nil && len(out)+len(resend) > 0 {
		e.sink.Send(ctx, append(append([]alerts.Alert(nil), out...), resend...))
	}
	return out
}

// ResolvedResend is how long after resolving an alert is still handed to the sink.
const ResolvedResend = 5 * time.Minute

// Alerts lists firing alerts and those resolved within alerting.resolved_retention, firing
// first, newest first.
func (e *Engine) Alerts() []alerts.Alert {
	now := e.now()
	e.mu.Lock()
	out := []alerts.Alert{}
	for _, r := range e.rules {
		for _, in := range r.instances {
			for sev, a := range in.Last {
				m := in.Machines[sev]
				if cp, ok := lifecycle.Listed(a, m != nil && m.Firing(), now, e.retention); ok {
					out = append(out, cp)
				}
			}
		}
	}
	out = append(out, e.cmp.Alerts(now, e.retention)...)
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Firing() != out[j].Firing() {
			return out[i].Firing()
		}
		if !out[i].StartsAt.Equal(out[j].StartsAt) {
			return out[i].StartsAt.After(out[j].StartsAt)
		}
		return out[i].Fingerprint < out[j].Fingerprint
	})
	return out
}
