package diagnosis

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts/diagnose"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/score"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newDiagnoser(t *testing.T) *Diagnoser {
	t.Helper()
	d, err := New(Settings{Thresholds: diagnose.Thresholds{Low: 0.6, High: 0.8, MinSamples: 20, Drop: 0.1}, Window: 10 * time.Minute},
		cardinality.NewServiceSet(10), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestVariantDiagnosisIsBounded: a service keeps apart the statistics of at most
// maxDiagVariants variants; the others still count in the service's own.
func TestVariantDiagnosisIsBounded(t *testing.T) {
	d := newDiagnoser(t)
	for i := range maxDiagVariants + 4 {
		d.Scores([]score.Result{{TraceID: fmt.Sprint(i), Service: "search", Variant: fmt.Sprintf("v%d", i),
			Metric: score.Faithfulness, Value: 0.5, Weight: 1}}, t0)
	}
	if n, total := d.variants["search"], len(d.windows); n != maxDiagVariants || total != maxDiagVariants+1 {
		t.Fatalf("variants kept %d, keys %d; want %d and %d", n, total, maxDiagVariants, maxDiagVariants+1)
	}
	b := d.windows[diagKey{service: "search"}].At(t0)
	if m := b.Means[score.Faithfulness]; m.N != int64(maxDiagVariants+4) {
		t.Fatalf("the service's own count %d, want %d", m.N, maxDiagVariants+4)
	}
}

// TestRecordAndScoresFeedTheWindows: a record's top retrieval score and the scores of one
// request reach the service's window and the variant's, and Diagnose finds the pattern they
// show (the model hallucinates: low faithfulness, high relevancy), which For attaches.
func TestRecordAndScoresFeedTheWindows(t *testing.T) {
	d := newDiagnoser(t)
	now := t0
	for i := range 40 {
		d.Record("search", "canary", 0.9, 2, now)
		d.Scores([]score.Result{
			{TraceID: fmt.Sprint(i), Service: "search", Variant: "canary", Metric: score.Faithfulness, Value: 0.3, Weight: 1},
			{TraceID: fmt.Sprint(i), Service: "search", Variant: "canary", Metric: score.AnswerRelevancy, Value: 0.9, Weight: 1},
		}, now)
		now = now.Add(10 * time.Second)
	}
	top := d.windows[diagKey{service: "search", variant: "canary"}].At(now.Add(-10 * time.Second)).Means[diagnose.RetrievalScoreTop]
	if top.N == 0 {
		t.Fatal("the record's top score did not reach the variant's window")
	}
	d.Diagnose(now)
	if f := d.For("search", "canary", score.Faithfulness); f.Pattern != diagnose.Hallucination {
		t.Fatalf("diagnosis %+v, want %s", f, diagnose.Hallucination)
	}
	if f := d.For("elsewhere", "", score.Faithfulness); f.Pattern != diagnose.None || f.Numbers == nil {
		t.Fatalf("a service never seen: %+v", f)
	}
}
