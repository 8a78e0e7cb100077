package decide

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// A labelled record is always sampled: probability 1 whatever sampling.rate and the
// probability rules say, past max_per_minute, and within the budget's feedback reserve. Only a
// never rule (privacy) or a spent budget keeps it.
func TestLabelledRecordAlwaysSampled(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	b := NewBudget(config.SamplingBudget{USDPerDay: 1, FeedbackReserveUSD: 0.2}, c.now, nil, nil)
	zero := 0.0
	d, _ := newTestDecider(t, config.Sampling{Rate: 0, MaxPerMinute: 1, Rules: []config.SamplingRule{
		{Name: "cheap", Probability: &zero, Match: config.SamplingMatch{Services: []string{"search"}}},
		{Name: "private", Never: true, Match: config.SamplingMatch{Services: []string{"billing"}}},
	}}, b, c)
	labelled := &record.Record{TraceID: idLow, Service: "search", Labels: &record.Label{Values: map[string]float64{"faithfulness": 1}}}
	plain := &record.Record{TraceID: idLow, Service: "search"}
	if got := d.Decide(plain, Ingest); got.Sample || got.Reason != ReasonRate {
		t.Fatalf("unlabelled record: %+v", got)
	}
	private := &record.Record{TraceID: idHigh, Service: "billing", Labels: labelled.Labels}
	if got := d.Decide(private, Ingest); got.Sample || got.Reason != ReasonRule {
		t.Fatalf("labelled record on a never rule: %+v", got)
	}
	for i := range 3 { // max_per_minute 1 would stop the second
		if got := d.Decide(labelled, Ingest); !got.Sample || got.Probability != 1 || got.Reason != ReasonLabelled {
			t.Fatalf("labelled record %d: %+v", i, got)
		}
	}
	if got := testutil.ToFloat64(d.sampled.WithLabelValues("search", ReasonLabelled)); got != 3 {
		t.Fatalf("ragwatch_sampled_total{reason=labelled} = %v", got)
	}
	if m := d.Mark(labelled, d.Decide(labelled, Ingest)); Weight(m.Sampling) != 1 || m.Sampling.Reason != ReasonLabelled {
		t.Fatalf("marked %+v", m.Sampling)
	}
	b.Spend(0.9) // into the reserve: labelled records still pass
	if got := d.Decide(labelled, Ingest); !got.Sample {
		t.Fatalf("labelled record within the reserve: %+v", got)
	}
	b.Spend(0.1) // the whole day's budget is spent
	if got := d.Decide(labelled, Ingest); got.Sample || got.Reason != ReasonBudget {
		t.Fatalf("labelled record past the budget: %+v", got)
	}
}
