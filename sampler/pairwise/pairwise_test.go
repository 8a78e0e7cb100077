package pairwise

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestCombine(t *testing.T) {
	tests := []struct {
		first, second   string // second already mapped back to a/b
		winner, outcome string
	}{
		{WinnerB, WinnerB, WinnerB, Win},
		{WinnerA, WinnerA, WinnerA, Loss},
		{WinnerTie, WinnerTie, WinnerTie, Tie},
		{WinnerA, WinnerB, WinnerTie, Inconsistent}, // each order prefers the first position
		{WinnerB, WinnerA, WinnerTie, Inconsistent},
		{WinnerB, WinnerTie, WinnerTie, Inconsistent},
		{WinnerTie, WinnerA, WinnerTie, Inconsistent},
	}
	for _, tt := range tests {
		w, o := Combine(tt.first, tt.second)
		if w != tt.winner || o != tt.outcome {
			t.Errorf("Combine(%s, %s) = %s, %s; want %s, %s", tt.first, tt.second, w, o, tt.winner, tt.outcome)
		}
	}
	if Swap(WinnerA) != WinnerB || Swap(WinnerB) != WinnerA || Swap(WinnerTie) != WinnerTie {
		t.Fatal("Swap does not exchange a and b")
	}
	if Credit(Win) != 1 || Credit(Loss) != 0 || Credit(Tie) != 0.5 || Credit(Inconsistent) != 0.5 {
		t.Fatal("Credit does not count ties half")
	}
}

func TestOrient(t *testing.T) {
	comps := []config.Comparison{
		{Name: "rerank", Service: "shop", Baseline: "v1", Candidate: "v2"},
		{Name: "any-vs-stable", Baseline: "stable"},
	}
	rec := func(service, variant string) *record.Record {
		return &record.Record{TraceID: variant, Service: service, Variant: variant}
	}
	tests := []struct {
		name             string
		a, b             *record.Record
		base, cand, comp string
	}{
		{"baseline first", rec("shop", "v1"), rec("shop", "v2"), "v1", "v2", "rerank"},
		{"candidate first is swapped", rec("shop", "v2"), rec("shop", "v1"), "v1", "v2", "rerank"},
		{"other service", rec("blog", "v2"), rec("blog", "v1"), "v2", "v1", NoComparison},
		{"any candidate", rec("blog", "canary"), rec("blog", "stable"), "stable", "canary", "any-vs-stable"},
		{"no variant", rec("blog", ""), rec("blog", "stable"), "stable", "", NoComparison},
		{"same variant", rec("blog", "stable"), rec("blog", "stable"), "stable", "stable", NoComparison},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, cand, comp := Orient(comps, tt.a, tt.b)
			if tt.name == "no variant" {
				// No match keeps the arrival order.
				if base != tt.a || cand != tt.b || comp != NoComparison {
					t.Fatalf("got %s/%s %s", base.Variant, cand.Variant, comp)
				}
				return
			}
			if base.Variant != tt.base || cand.Variant != tt.cand || comp != tt.comp {
				t.Fatalf("got %s vs %s (%s), want %s vs %s (%s)", cand.Variant, base.Variant, comp, tt.cand, tt.base, tt.comp)
			}
		})
	}
}

func TestWilson(t *testing.T) {
	tests := []struct{ p, n, lo, hi float64 }{
		{0.8, 100, 0.7112, 0.8666},
		{0.5, 10, 0.2366, 0.7634},
		{0, 10, 0, 0.2775},
		{1, 5, 0.5655, 1},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.p, tt.n, z95)
		if math.Abs(lo-tt.lo) > 1e-4 || math.Abs(hi-tt.hi) > 1e-4 {
			t.Errorf("Wilson(%v, %v) = [%.4f, %.4f], want [%.4f, %.4f]", tt.p, tt.n, lo, hi, tt.lo, tt.hi)
		}
	}
	if lo, hi := Wilson(0.5, 0, z95); lo != 0 || hi != 1 {
		t.Errorf("no trials: [%v, %v]", lo, hi)
	}
}

func TestTallyWeights(t *testing.T) {
	var tl Tally
	if r := tl.Rate("x"); r.Estimate != 0.5 || r.Lower != 0 || r.Upper != 1 || r.Pairs != 0 {
		t.Fatalf("empty tally %+v", r)
	}
	// 8 wins, 1 loss, 1 tie at weight 1: (8 + 0.5) / 10.
	for range 8 {
		tl.Add(Win, 1)
	}
	tl.Add(Loss, 1)
	tl.Add(Tie, 1)
	r := tl.Rate("x")
	if r.Estimate != 0.85 || r.Pairs != 10 || r.Wins != 8 || r.Losses != 1 || r.Ties != 1 || r.EffectiveN != 10 {
		t.Fatalf("rate %+v", r)
	}
	lo, hi := Wilson(0.85, 10, z95)
	if r.Lower != lo || r.Upper != hi {
		t.Fatalf("interval [%v, %v], want [%v, %v]", r.Lower, r.Upper, lo, hi)
	}
	// A loss sampled at p = 0.1 weighs 10: (8.5) / 20, effective n 20²/(10+100).
	tl.Add(Loss, 10)
	r = tl.Rate("x")
	if math.Abs(r.Estimate-8.5/20) > 1e-12 || math.Abs(r.EffectiveN-400.0/110) > 1e-12 {
		t.Fatalf("weighted rate %+v", r)
	}
}

func TestWinRates(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := NewWinRates(reg)
	rec.Record("rerank", Win, 1)
	rec.Record("rerank", Win, 1)
	rec.Record("rerank", Inconsistent, 1)
	rec.Record("", Loss, 1)
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_total", map[string]string{"comparison": "rerank", "outcome": "win"}); got != 2 {
		t.Fatalf("wins %v", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_total", map[string]string{"comparison": "none", "outcome": "loss"}); got != 1 {
		t.Fatalf("none losses %v", got)
	}
	want := 2.5 / 3
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_win_rate", map[string]string{"comparison": "rerank", "bound": "estimate"}); math.Abs(got-want) > 1e-12 {
		t.Fatalf("estimate %v, want %v", got, want)
	}
	lo, hi := Wilson(want, 3, z95)
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_win_rate", map[string]string{"comparison": "rerank", "bound": "lower"}); got != lo {
		t.Fatalf("lower %v, want %v", got, lo)
	}
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_win_rate", map[string]string{"comparison": "rerank", "bound": "upper"}); got != hi {
		t.Fatalf("upper %v, want %v", got, hi)
	}

	w := httptest.NewRecorder()
	rec.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/pairwise", nil))
	var body struct{ Comparisons []Rate }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Comparisons) != 2 || body.Comparisons[0].Comparison != "none" || body.Comparisons[1].Comparison != "rerank" ||
		body.Comparisons[1].Wins != 2 || body.Comparisons[1].Inconsistent != 1 || body.Comparisons[1].Upper != hi {
		t.Fatalf("API body %s", w.Body.String())
	}

	// The label set is bounded.
	for i := range MaxComparisons + 5 {
		rec.Record(string(rune('A'+i%26))+string(rune('a'+i/26)), Tie, 1)
	}
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_total", map[string]string{"comparison": OtherComparison}); got != 7 {
		t.Fatalf("other %v, want 7", got)
	}
}
