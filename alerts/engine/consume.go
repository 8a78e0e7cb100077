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
	"github.com/ragwatch/ragwatch/internal/score"
)

// ConsumeRecord implements record.Consumer: the record's signals feed the SLOs and detectors
// watching them, with weight 1 (every request is observed).
func (e *Engine) ConsumeRecord(_ context.Context, r *record.Record) error {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.diagRecord(r, now)
	var err error
	eachSignal(r, func(name string, v float64) {
		if e2 := e.observe(name, r.Service, v, 1, slo.Sample{TraceID: r.TraceID, SpanID: r.SpanID, Value: v, Time: now}, now); e2 != nil && err == nil {
			err = e2
		}
	})
	return err
}

// ConsumeFeedback implements record.FeedbackConsumer: negative_feedback_rate and
// feedback_score.
func (e *Engine) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var err error
	eachFeedbackSignal(&f, func(name string, v float64) {
		if e2 := e.observe(name, f.Service, v, 1, slo.Sample{TraceID: f.TraceID, SpanID: f.SpanID, Value: v, Time: now}, now); e2 != nil && err == nil {
			err = e2
		}
	})
	return err
}

// ConsumeScores implements score.Consumer: each result feeds the SLOs and detectors on its
// metric with weight 1/p (Result.Weight; 0 means 1).
func (e *Engine) ConsumeScores(_ context.Context, results []score.Result) error {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.diagScores(results, now)
	var errs []error
	for i := range results {
		res := &results[i]
		w := res.Weight
		if w == 0 {
			w = 1
		}
		if err := e.observe(res.Metric, res.Service, res.Value, w,
			slo.Sample{TraceID: res.TraceID, SpanID: res.SpanID, Value: res.Value, Time: now}, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// observe adds one value to every rule on metric. Called with e.mu held.
func (e *Engine) observe(metric, service string, x, w float64, s slo.Sample, now time.Time) error {
	rules := e.byMetric[metric]
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
	var label string
	for _, r := range rules {
		key := r.service
		if key != "" {
			if service != key {
				continue
			}
		} else {
			if label == "" {
				label = e.services.Label(service)
			}
			key = label
		}
		r.add(e.instance(r, key), now, x, w, s)
	}
	return nil
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
