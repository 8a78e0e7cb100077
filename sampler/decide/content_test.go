package decide

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// KeepsContent keeps the texts of exactly the traces Decide may sample at sampling.rate (the
// reference in exact arithmetic, on the id's hex form), and of every trace under a rule.
func TestKeepsContentMatchesTheRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range []float64{0, 1e-9, 0.01, 0.1, 0.5, 0.999, 1} {
		d, _ := newTestDecider(t, config.Sampling{Rate: p}, nil, &clock{})
		kept := 0
		for range 20000 {
			var id [16]byte
			for i := range id {
				id[i] = byte(rng.Uint32())
			}
			hexID := hex.EncodeToString(id[:])
			got := d.KeepsContent(id)
			if want := refSampled(hexID, p); got != want || got != Sampled(hexID, p) {
				t.Fatalf("p %v, id %s: KeepsContent %v, reference %v", p, hexID, got, want)
			}
			if got {
				kept++
			}
		}
		if p == 0.1 && (kept < 1800 || kept > 2200) {
			t.Errorf("p 0.1: kept %d of 20000", kept)
		}
	}
	var high [16]byte
	for i := 9; i < 16; i++ {
		high[i] = 0xff
	}
	d, _ := newTestDecider(t, config.Sampling{Rate: 0.5}, nil, &clock{})
	if d.KeepsContent([16]byte{}) || !d.KeepsContent(high) {
		t.Fatal("R = 0 kept, or R = 2^56-1 not kept, at p 0.5")
	}
	// Any rule may raise a record's probability from what it holds: every text is kept. A
	// reload applies at once.
	d.Update(config.Sampling{Rate: 0.5, Rules: []config.SamplingRule{{Name: "search", Probability: f(0), Match: config.SamplingMatch{Services: []string{"search"}}}}})
	if !d.KeepsContent([16]byte{}) {
		t.Fatal("a rule is in force and the texts were not kept")
	}
	d.Update(config.Sampling{Rate: 0})
	if d.KeepsContent(high) {
		t.Fatal("rate 0 after a reload still keeps the texts")
	}
}

// A record whose texts were elided is never sampled: a reload raised the rate, or a label came,
// after its spans arrived. It is counted as no_content, not as sampled, and spends no token.
func TestElidedRecordIsNotSampled(t *testing.T) {
	d, _ := newTestDecider(t, config.Sampling{Rate: 1, MaxPerMinute: 1}, nil, &clock{})
	el := &record.Record{TraceID: idHigh, Service: "s", Elided: true}
	if got := d.Decide(el, Ingest); got.Sample || got.Reason != ReasonNoContent || got.Probability != 1 {
		t.Fatalf("elided record: %+v", got)
	}
	labelled := *el
	labelled.Labels = &record.Label{Values: map[string]float64{"faithfulness": 1}}
	if got := d.Decide(&labelled, Ingest); got.Sample || got.Reason != ReasonNoContent {
		t.Fatalf("elided labelled record: %+v", got)
	}
	if n := skipped(t, d, ReasonNoContent); n != 2 {
		t.Fatalf("no_content skips %d, want 2", n)
	}
	if n := testutil.CollectAndCount(d.sampled); n != 0 {
		t.Fatalf("%d sampled series after elided records", n)
	}
	// The token bucket was not touched: the next full record takes its one token.
	if got := d.Decide(&record.Record{TraceID: idHigh, Service: "s"}, Ingest); !got.Sample {
		t.Fatalf("full record after elided ones: %+v", got)
	}
}
