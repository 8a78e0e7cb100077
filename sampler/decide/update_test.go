package decide

import (
	"sync"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

func TestUpdateSwapsPolicyAndBudget(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	b := NewBudget(config.SamplingBudget{USDPerDay: 10}, c.now, nil, nil)
	d, _ := newTestDecider(t, config.Sampling{Rate: 0, MaxPerMinute: 2}, b, c)
	mid := &record.Record{TraceID: idMid, Service: "chat"}
	if dec := d.Decide(mid, Ingest); dec.Sample || dec.Reason != ReasonRate {
		t.Fatalf("rate 0: %+v", dec)
	}
	d.Update(config.Sampling{Rate: 0.5, MaxPerMinute: 2})
	if dec := d.Decide(mid, Ingest); !dec.Sample || dec.Probability != 0.5 {
		t.Fatalf("rate 0.5: %+v", dec)
	}
	// max_per_minute unchanged: the same bucket, one token left of two.
	d.Update(config.Sampling{Rate: 1, MaxPerMinute: 2})
	if dec := d.Decide(mid, Ingest); !dec.Sample {
		t.Fatalf("second token: %+v", dec)
	}
	if dec := d.Decide(mid, Ingest); dec.Sample || dec.Reason != ReasonRateLimit {
		t.Fatalf("bucket kept across the update: %+v", dec)
	}
	// A rule now applies.
	d.Update(config.Sampling{Rate: 1, Rules: []config.SamplingRule{
		{Name: "private", Match: config.SamplingMatch{Services: []string{"chat"}}, Never: true}}})
	if dec := d.Decide(mid, Ingest); dec.Sample || dec.Reason != ReasonRule {
		t.Fatalf("never rule: %+v", dec)
	}

	b.Spend(6)
	if !b.Allow(false) || b.Remaining() != 4 {
		t.Fatalf("before update: allow %v remaining %v", b.Allow(false), b.Remaining())
	}
	b.Update(config.SamplingBudget{USDPerDay: 5})
	if b.Allow(false) || b.Remaining() != 0 || b.Spent() != 6 {
		t.Fatalf("lowered budget: allow %v remaining %v spent %v", b.Allow(false), b.Remaining(), b.Spent())
	}
	b.Update(config.SamplingBudget{})
	if !b.Allow(false) || b.Limited() {
		t.Fatal("budget removed: sampling must be allowed")
	}

	// Updates race with decisions without a data race (go test -race).
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			d.Update(config.Sampling{Rate: float64(i%2) / 2, MaxPerMinute: i % 3})
			b.Update(config.SamplingBudget{USDPerDay: float64(i)})
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			d.Decide(mid, Feedback)
		}
	}()
	wg.Wait()
}

func TestRulesFollowsUpdate(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	d, _ := newTestDecider(t, config.Sampling{Rate: 0.1}, nil, c)
	one := 1.0
	steps := []struct {
		rules    []config.SamplingRule
		n        int
		feedback bool
	}{
		{nil, 0, false},
		{[]config.SamplingRule{{Name: "private", Match: config.SamplingMatch{Routes: []string{"/admin"}}, Never: true}}, 1, false},
		{[]config.SamplingRule{
			{Name: "private", Match: config.SamplingMatch{Routes: []string{"/admin"}}, Never: true},
			{Name: "negative_feedback", Match: config.SamplingMatch{NegativeFeedback: true}, Probability: &one}}, 2, true},
		{[]config.SamplingRule{}, 0, false},
	}
	for i, s := range steps {
		d.Update(config.Sampling{Rate: 0.1, Rules: s.rules})
		if n, fb := d.Rules(); n != s.n || fb != s.feedback {
			t.Fatalf("step %d: Rules() = %d, %v; want %d, %v", i, n, fb, s.n, s.feedback)
		}
	}
}

// MaxWeight bounds the weights of results read from NATS: 1 / the smallest probability any
// policy since start could give, so records sampled before a reload keep their valid weights.
func TestMaxWeight(t *testing.T) {
	p := func(v float64) *float64 { return &v }
	for _, tt := range []struct {
		name string
		cfg  config.Sampling
		want float64
	}{
		{"rate", config.Sampling{Rate: 0.1}, 10},
		{"rule lower", config.Sampling{Rate: 0.5, Rules: []config.SamplingRule{{Name: "a", Probability: p(0.01)}}}, 100},
		{"never rule and rate 0", config.Sampling{Rate: 0, Rules: []config.SamplingRule{{Name: "a", Never: true}}}, 1},
		{"rate 1", config.Sampling{Rate: 1}, 1},
	} {
		if got := MaxWeight(tt.cfg); got < tt.want*(1-1e-9) || got > tt.want*(1+1e-9) {
			t.Errorf("%s: MaxWeight = %v, want %v", tt.name, got, tt.want)
		}
	}
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	d, _ := newTestDecider(t, config.Sampling{Rate: 0.25}, nil, c)
	if got := d.MaxWeight(); got != 4 {
		t.Fatalf("rate 0.25: %v", got)
	}
	d.Update(config.Sampling{Rate: 0.05})
	if got := d.MaxWeight(); got != 20 {
		t.Fatalf("after lowering the rate: %v", got)
	}
	d.Update(config.Sampling{Rate: 1})
	if got := d.MaxWeight(); got != 20 {
		t.Fatalf("after raising the rate: %v, want 20 (records queued at 0.05 are still scored)", got)
	}
}
