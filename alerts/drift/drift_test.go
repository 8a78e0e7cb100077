package drift

import (
	"math"
	"slices"
	"testing"
	"time"
)

func hist(counts ...float64) Hist {
	var n int64
	for _, c := range counts {
		n += int64(c)
	}
	return Hist{Counts: counts, N: n}
}

func TestScoresAgainstHandComputedValues(t *testing.T) {
	cur := hist(20, 30, 50)
	ref := hist(50, 30, 20)
	// Shares with ε=1e-4 then renormalised: p=(0.2,0.3,0.5)+ε over 1+3ε.
	e := Epsilon
	n := 1 + 3*e
	p := []float64{(0.2 + e) / n, (0.3 + e) / n, (0.5 + e) / n}
	q := []float64{(0.5 + e) / n, (0.3 + e) / n, (0.2 + e) / n}
	want := 0.0
	for i := range p {
		want += (p[i] - q[i]) * math.Log(p[i]/q[i])
	}
	if got := PSI(cur, ref); math.Abs(got-want) > 1e-12 || math.Abs(got-2*0.3*math.Log(2.5)) > 1e-3 {
		t.Fatalf("PSI = %v, want %v (≈0.5498)", got, want)
	}
	// CDFs: cur 0.2, 0.5, 1; ref 0.5, 0.8, 1 → KS 0.3.
	if got := KS(cur, ref); math.Abs(got-0.3) > 1e-12 {
		t.Fatalf("KS = %v, want 0.3", got)
	}
	// JS: identical → 0; disjoint → 1 bit.
	if got := JS(cur, cur); got != 0 {
		t.Fatalf("JS(same) = %v", got)
	}
	if got := JS(hist(10, 0), hist(0, 10)); math.Abs(got-1) > 1e-12 {
		t.Fatalf("JS(disjoint) = %v, want 1", got)
	}
	if got := PSI(cur, cur); got != 0 {
		t.Fatalf("PSI(same) = %v", got)
	}
	if got := MostOverRepresented(cur, ref); got != 2 {
		t.Fatalf("over-represented bin = %d, want 2", got)
	}
}

func TestBinsAndBaseline(t *testing.T) {
	edges := DefaultEdges("retrieved_documents")
	if Bin(edges, 0) != 0 || Bin(edges, 1) != 1 || Bin(edges, 20) != 20 || Bin(edges, 500) != 21 {
		t.Fatalf("document bins: %d %d %d %d", Bin(edges, 0), Bin(edges, 1), Bin(edges, 20), Bin(edges, 500))
	}
	d := Detector{Name: "docs", Signal: "retrieved_documents", Method: MethodPSI}
	b := NewBuilder([]Detector{d}, "test", time.Unix(0, 0))
	b.Add("retrieved_documents", "svc", 3, 1)
	b.Add("retrieved_documents", "other", 5, 1)
	b.Add("answer_tokens", "svc", 3, 1)
	bl := b.Baseline()
	h, ok := bl.Reference(d, "svc")
	if !ok || h.N != 1 || h.Counts[3] != 1 {
		t.Fatalf("svc reference: %v %+v", ok, h)
	}
	h, ok = bl.Reference(d, "unknown")
	if !ok || h.N != 2 || h.Counts[3] != 1 || h.Counts[5] != 1 {
		t.Fatalf("fallback reference: %v %+v", ok, h)
	}
	d.Buckets = []float64{1, 2}
	if _, ok := bl.Reference(d, "svc"); ok {
		t.Fatal("a baseline with other bins must not be used")
	}
}

// TestDefaultEdgesPerSignal pins the default bins of each family of signals (read from the
// signal catalog): a change would invalidate every pinned baseline.
func TestDefaultEdgesPerSignal(t *testing.T) {
	counts := []float64{0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5, 17.5, 18.5, 19.5, 20.5}
	tokens := []float64{8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	latency := []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64}
	var unit []float64
	for i := 0; i <= 20; i++ {
		unit = append(unit, float64(i)*0.05)
	}
	for signal, want := range map[string][]float64{
		"retrieved_documents": counts, "citation_count": counts,
		"answer_tokens": tokens, "input_tokens": tokens,
		"latency_seconds": latency, "retrieval_latency_seconds": latency, "generation_latency_seconds": latency,
		"retrieval_score_top": unit, "empty_retrieval_rate": unit, "faithfulness": unit,
	} {
		if got := DefaultEdges(signal); !slices.Equal(got, want) {
			t.Errorf("DefaultEdges(%s) = %v, want %v", signal, got, want)
		}
	}
	DefaultEdges("answer_tokens")[0] = -1 // a caller's copy: the catalog keeps its edges
	if got := DefaultEdges("answer_tokens"); got[0] != 8 {
		t.Errorf("the catalog's edges changed through a copy: %v", got)
	}
}
