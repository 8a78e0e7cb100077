package diagnose

import (
	"math"
	"testing"

	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/internal/score"
)

// stream builds a window from n requests; values gives each metric's value for request i.
func stream(n int, w float64, values map[string]func(i int) float64) Window {
	win := Window{Means: map[string]slo.Sums{}, Older: map[string]slo.Sums{}, Newer: map[string]slo.Sums{}, Pairs: map[string]Moments{}}
	for i := 0; i < n; i++ {
		var names []string
		got := map[string]float64{}
		for m, f := range values {
			x := f(i)
			got[m] = x
			names = append(names, m)
			add(win.Means, m, x, w)
			if i < n/2 {
				add(win.Older, m, x, w)
			} else {
				add(win.Newer, m, x, w)
			}
		}
		for _, p := range PairsOf(names) {
			mo := win.Pairs[PairKey(p[0], p[1])]
			mo.Add(got[p[0]], got[p[1]], w)
			win.Pairs[PairKey(p[0], p[1])] = mo
		}
	}
	return win
}

func add(m map[string]slo.Sums, k string, x, w float64) {
	s := m[k]
	s.Add(x, w)
	m[k] = s
}

func alt(a, b float64) func(int) float64 {
	return func(i int) float64 {
		if i%2 == 0 {
			return a
		}
		return b
	}
}

func step(before, after float64, n int) func(int) float64 {
	return func(i int) float64 {
		if i < n/2 {
			return before
		}
		return after
	}
}

func number(f Finding, name string) float64 {
	for _, n := range f.Numbers {
		if n.Name == name {
			return n.Value
		}
	}
	return math.NaN()
}

func TestDiagnosePatterns(t *testing.T) {
	th := DefaultThresholds()
	cases := []struct {
		name   string
		values map[string]func(int) float64
		want   string
		num    string
		value  float64
	}{
		{"hallucination", map[string]func(int) float64{
			score.Faithfulness: alt(0.3, 0.5), score.AnswerRelevancy: alt(0.9, 0.95)}, Hallucination, score.Faithfulness, 0.4},
		{"context ignored", map[string]func(int) float64{
			score.ContextRecall: alt(0.9, 1), score.Faithfulness: alt(0.2, 0.4)}, ContextIgnored, score.ContextRecall, 0.95},
		{"ranking noise", map[string]func(int) float64{
			"precision@5": alt(0.2, 0.2), "ndcg@5": alt(0.9, 0.92)}, RankingNoise, "precision@5", 0.2},
		{"noisy context", map[string]func(int) float64{
			score.ContextPrecision: alt(0.3, 0.1), "hit@10": alt(1, 1)}, NoisyContext, "hit@10", 1},
		{"retrieval shift", map[string]func(int) float64{
			RetrievalScoreTop: step(0.8, 0.5, 40), score.CitationPrecision: step(0.9, 0.6, 40)}, RetrievalShift, "citation_precision_now", 0.6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Diagnose(stream(40, 10, c.values), th)
			if len(got) != 1 || got[0].Pattern != c.want {
				t.Fatalf("findings = %+v, want one %s", got, c.want)
			}
			if v := number(got[0], c.num); math.Abs(v-c.value) > 1e-9 {
				t.Errorf("%s = %v, want %v", c.num, v, c.value)
			}
			if got[0].Explanation != Explanations[c.want] {
				t.Errorf("explanation = %q", got[0].Explanation)
			}
		})
	}
}

func TestDiagnoseNone(t *testing.T) {
	th := DefaultThresholds()
	healthy := stream(40, 10, map[string]func(int) float64{
		score.Faithfulness: alt(0.9, 0.8), score.AnswerRelevancy: alt(0.9, 0.95), score.ContextRecall: alt(0.9, 1),
		"precision@5": alt(0.7, 0.8), "ndcg@5": alt(0.9, 0.92), score.ContextPrecision: alt(0.8, 0.9), "hit@10": alt(1, 1),
		RetrievalScoreTop: step(0.8, 0.78, 40), score.CitationPrecision: step(0.9, 0.88, 40),
	})
	if got := Diagnose(healthy, th); len(got) != 0 {
		t.Fatalf("healthy stream: findings = %+v, want none", got)
	}
	if f := Pick(nil, score.Faithfulness); f.Pattern != None || f.Explanation != Explanations[None] {
		t.Errorf("Pick(nil) = %+v", f)
	}
	// Too few samples: the same hallucinating values say nothing below min_samples.
	few := stream(19, 10, map[string]func(int) float64{score.Faithfulness: alt(0.3, 0.5), score.AnswerRelevancy: alt(0.9, 0.95)})
	if got := Diagnose(few, th); len(got) != 0 {
		t.Fatalf("19 samples: findings = %+v, want none", got)
	}
}

func TestCorrelationAndWeights(t *testing.T) {
	// y = 1 - x: correlation -1 whatever the weights.
	var m Moments
	for i, x := range []float64{0.1, 0.4, 0.5, 0.9} {
		m.Add(x, 1-x, float64(i+1))
	}
	if c := m.Correlation(); math.Abs(c+1) > 1e-9 {
		t.Errorf("correlation = %v, want -1", c)
	}
	// The weighted mean weighs by 1/p: one value at p=0.1 counts as ten at p=1.
	var s slo.Sums
	s.Add(1, 10)
	s.Add(0, 1)
	s.Add(0, 1)
	if v := s.Mean(); math.Abs(v-10.0/12) > 1e-12 {
		t.Errorf("weighted mean = %v, want %v", v, 10.0/12)
	}
	f := Diagnose(stream(40, 1, map[string]func(int) float64{
		score.Faithfulness: alt(0.3, 0.5), score.AnswerRelevancy: alt(0.85, 0.95)}), DefaultThresholds())
	if len(f) != 1 || math.Abs(number(f[0], "correlation")-1) > 1e-9 || number(f[0], "n_pairs") != 40 {
		t.Errorf("finding = %+v, want correlation 1 over 40 pairs", f)
	}
}

func TestPick(t *testing.T) {
	fs := []Finding{
		{Pattern: Hallucination, Metrics: []string{score.Faithfulness, score.AnswerRelevancy}},
		{Pattern: RetrievalShift, Metrics: []string{RetrievalScoreTop, score.CitationPrecision}},
	}
	for metric, want := range map[string]string{
		score.CitationPrecision: RetrievalShift, "retrieval_score_mean": RetrievalShift,
		score.AnswerRelevancy: Hallucination, "latency_seconds": None,
	} {
		if got := Pick(fs, metric).Pattern; got != want {
			t.Errorf("Pick(%s) = %s, want %s", metric, got, want)
		}
	}
}

// An alert on a metric no finding involves is not given another metric's pattern (a
// citation-precision alert labelled hallucination was): its diagnosis is None and says what the
// service shows elsewhere.
func TestPickIsAboutTheAlertsMetric(t *testing.T) {
	fs := []Finding{{Pattern: Hallucination, Metrics: []string{score.Faithfulness, score.AnswerRelevancy}}}
	f := Pick(fs, score.CitationPrecision)
	if f.Pattern != None {
		t.Fatalf("Pick(citation_precision) = %s, want none: the only finding is about faithfulness", f.Pattern)
	}
	want := "no known pattern involves citation_precision; the service shows hallucination (faithfulness, answer_relevancy) on other metrics"
	if f.Explanation != want {
		t.Errorf("explanation = %q, want %q", f.Explanation, want)
	}
	if f.Numbers == nil {
		t.Error("numbers = nil, want an empty list (the API writes [])")
	}
}
