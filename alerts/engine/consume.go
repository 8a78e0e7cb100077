package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
	"github.com/ragwatch/ragwatch/internal/score"
)

// ConsumeRecord implements record.Consumer: the record's signals (reqsignal.Measure, the
// measurement the metrics record too), and those of the feedback it carries inline, feed the
// SLOs and detectors watching them, with weight 1 (every request is observed).
func (e *Engine) ConsumeRecord(_ context.Context, r *record.Record) error {
	var m reqsignal.Measurement
	measured := e.watchesSignals.Load()
	if measured {
		m = reqsignal.Measure(r) // before the lock: it reads the answer
	}
	now := e.now()
	svc := serviceLabel{name: r.Service, now: now}
	if top, _, n := r.ScoreStats(); n > 0 {
		e.diag.Record(e.labelOf(&svc), r.Variant, top, r.UpstreamWeight(), now)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !measured {
		return nil
	}
	var err error
	eachSignal(&m, 0, reqsignal.Num, func(sig *reqsignal.Signal, v float64) {
		w := &e.bySignal[sig.ID]
		if len(w.rules) == 0 && !w.compared {
			return // most signals: nothing watches them
		}
		s := slo.Sample{TraceID: r.TraceID, SpanID: r.SpanID, Value: v, Time: now}
		if e2 := e.observeRules(w.rules, sig.Name, &svc, r.Variant, r.Turn, v, 1, s, now); e2 != nil && err == nil {
			err = e2
		}
		if w.compared {
			e.observeVariant(sig.Name, &svc, r.Variant, v, 1, s, now)
		}
	})
	return err
}

// ConsumeFeedback implements record.FeedbackConsumer: the feedback signals
// (negative_feedback_rate, feedback_score) of feedback joined after its record, with its
// record's variant.
func (e *Engine) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	m := reqsignal.MeasureFeedback(&f)
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	svc := serviceLabel{name: f.Service, now: now}
	if !m.HasFeedback { // a NaN score: no value, but not silently
		for id := reqsignal.NumRecord; id < reqsignal.Num; id++ {
			if len(e.bySignal[id].rules) > 0 {
				e.m.rejected.WithLabelValues("invalid_value").Inc()
				return fmt.Errorf("alert engine: %s value is not a finite number", reqsignal.All[id].Name)
			}
		}
		return nil
	}
	var err error
	eachSignal(&m, reqsignal.NumRecord, reqsignal.Num, func(sig *reqsignal.Signal, v float64) {
		w := &e.bySignal[sig.ID]
		s := slo.Sample{TraceID: f.TraceID, SpanID: f.SpanID, Value: v, Time: now}
		// f.Variant is the variant of the record the join met it with: SLOs with `variant`
		// and comparisons count late feedback where they count feedback on the record.
		if e2 := e.observeRules(w.rules, sig.Name, &svc, f.Variant, 0, v, 1, s, now); e2 != nil && err == nil {
			err = e2
		}
		if w.compared {
			e.observeVariant(sig.Name, &svc, f.Variant, v, 1, s, now)
		}
	})
	return err
}

// ConsumeScores implements score.Consumer: each result feeds the SLOs and detectors on its
// metric with weight 1/p (Result.Weight; 0 means 1).
func (e *Engine) ConsumeScores(_ context.Context, results []score.Result) error {
	now := e.now()
	e.diag.Scores(results, now) // before the lock: the diagnoser has its own
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for i := range results {
		res := &results[i]
		if !e.admitJudgeVersion(res.Metric, res.JudgeVersion) {
			continue
		}
		w := res.Weight
		if w == 0 {
			w = 1
		}
		s := slo.Sample{TraceID: res.TraceID, SpanID: res.SpanID, Value: res.Value, Time: now}
		svc := serviceLabel{name: res.Service, now: now}
		if err := e.observe(res.Metric, &svc, res.Variant, res.Turn, res.Value, w, s, now); err != nil {
			errs = append(errs, err)
			continue
		}
		e.observeVariant(res.Metric, &svc, res.Variant, res.Value, w, s, now)
	}
	return errors.Join(errs...)
}

// serviceLabel is a service's name and, once asked for, its label value (cardinality.ServiceSet):
// the signals of one record ask the set once, not once each, at the engine's reading of the
// clock for the record (now).
type serviceLabel struct {
	name, label string
	now         time.Time
}

// labelOf returns svc's label value.
func (e *Engine) labelOf(svc *serviceLabel) string {
	if svc.label == "" {
		svc.label = svc.name
		if e.services != nil {
			svc.label = e.services.LabelAt(svc.name, svc.now)
		}
	}
	return svc.label
}

// observe adds one value, of a record of variant at turn (0: unknown), to every rule on metric
// whose filters it passes. Called with e.mu held.
func (e *Engine) observe(metric string, svc *serviceLabel, variant string, turn int, x, w float64, s slo.Sample, now time.Time) error {
	return e.observeRules(e.byMetric[metric], metric, svc, variant, turn, x, w, s, now)
}

// observeRules is observe with the rules on metric given (e.byMetric[metric]).
func (e *Engine) observeRules(rules []*rule, metric string, svc *serviceLabel, variant string, turn int, x, w float64, s slo.Sample, now time.Time) error {
	if len(rules) == 0 {
		return nil
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		e.m.rejected.WithLabelValues("invalid_value").Inc()
		return fmt.Errorf("alert engine: %s value is not a finite number", metric)
	}
	if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		e.m.rejected.WithLabelValues("invalid_weight").Inc()
		return fmt.Errorf("alert engine: %s weight must be a finite non-negative number", metric)
	}
	var err error
	for _, r := range rules {
		if turn < r.minTurn || (r.variant != "" && r.variant != variant) {
			continue
		}
		if r.kind == alerts.KindChange && (x < 0 || x > 1) {
			// The detector's likelihood ratios are for values in [0,1] (alerts/changepoint).
			e.m.rejected.WithLabelValues("out_of_range").Inc()
			err = fmt.Errorf("alert engine: %s value %v is outside [0,1], which change SLO %s needs", metric, x, r.name)
			continue
		}
		key := r.service
		if key != "" {
			if svc.name != key {
				continue
			}
		} else {
			key = e.labelOf(svc)
		}
		r.add(e.instance(r, key), now, x, w, s)
	}
	return err
}

// instance returns (creating) a rule's state for a service. Called with e.mu held.
func (e *Engine) instance(r *rule, service string) *instance {
	in, ok := r.instances[service]
	if !ok {
		in = r.newInstance()
		r.instances[service] = in
	}
	if in.counters.samples == nil && r.kind != alerts.KindDrift {
		in.counters = e.m.sloCounters(r.name, service)
	}
	return in
}
