package diagnose

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Pattern ids: the `pattern` label of ragwatch_diagnosis and the alert's diagnosis.pattern.
const (
	None = "none"
	// Hallucination: low faithfulness with high answer relevancy.
	Hallucination = "hallucination"
	// ContextIgnored: high context recall with low faithfulness.
	ContextIgnored = "context_ignored"
	// RankingNoise: low precision@k with high NDCG@k.
	RankingNoise = "ranking_noise"
	// NoisyContext: high hit rate (hit@k) with low context precision.
	NoisyContext = "noisy_context"
	// RetrievalShift: the top retrieval score and citation precision falling together.
	RetrievalShift = "retrieval_shift"
)

// Patterns lists every pattern id but None, in the order Diagnose reports them.
var Patterns = []string{Hallucination, ContextIgnored, RankingNoise, NoisyContext, RetrievalShift}

// Explanations are the one-line reading of each pattern.
var Explanations = map[string]string{
	None:           "no known pattern in the metric pairs",
	Hallucination:  "the model understands but hallucinates: look at the prompt/model, retrieval is fine",
	ContextIgnored: "the context is there but the answer is wrong: look at the prompt/model",
	RankingNoise:   "top-1 is good, the rest is noise: cut k or rerank",
	NoisyContext:   "something relevant is retrieved, but the context is mostly noise: filter or rerank",
	RetrievalShift: "retrieval scores and citation precision fall together: the index or embeddings changed",
}

// RetrievalScoreTop is the signal the retrieval-shift pattern watches with citation precision.
const RetrievalScoreTop = "retrieval_score_top"

// Thresholds decide what is low and high. A metric is low below Low and high above High; a mean
// counts with at least MinSamples values (a pair's correlation likewise). A trend is a fall by
// more than Drop between the older and newer half of the window.
type Thresholds struct {
	Low        float64
	High       float64
	MinSamples int64
	Drop       float64
}

// DefaultThresholds are the defaults of alerting.diagnosis.
func DefaultThresholds() Thresholds {
	return Thresholds{Low: 0.6, High: 0.8, MinSamples: 20, Drop: 0.1}
}

// Number is one figure behind a finding.
type Number struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Finding is one recognised pattern with the figures behind it.
type Finding struct {
	Pattern     string   `json:"pattern"`
	Explanation string   `json:"explanation"`
	Numbers     []Number `json:"numbers"`
	// Metrics are the two metrics of the pair.
	Metrics []string `json:"-"`
}

// Watched reports whether a metric feeds some pattern: the engine keeps statistics only for
// these.
func Watched(metric string) bool {
	switch metric {
	case score.Faithfulness, score.AnswerRelevancy, score.ContextRecall, score.ContextPrecision,
		score.CitationPrecision, RetrievalScoreTop:
		return true
	}
	return strings.HasPrefix(metric, score.PrecisionAt) || strings.HasPrefix(metric, score.NDCGAt) ||
		strings.HasPrefix(metric, score.HitAt)
}

// PairsOf lists, for a set of metrics measured on one request, the pairs (a, b) whose joint
// moments are kept. Each pair is given in the order the patterns name it.
func PairsOf(metrics []string) [][2]string {
	has := func(m string) bool { return slices.Contains(metrics, m) }
	var out [][2]string
	if has(score.Faithfulness) && has(score.AnswerRelevancy) {
		out = append(out, [2]string{score.Faithfulness, score.AnswerRelevancy})
	}
	if has(score.ContextRecall) && has(score.Faithfulness) {
		out = append(out, [2]string{score.ContextRecall, score.Faithfulness})
	}
	for _, m := range metrics {
		if k, ok := strings.CutPrefix(m, score.PrecisionAt); ok && has(score.NDCGAt+k) {
			out = append(out, [2]string{m, score.NDCGAt + k})
		}
		if k, ok := strings.CutPrefix(m, score.HitAt); ok && has(score.ContextPrecision) {
			out = append(out, [2]string{score.ContextPrecision, score.HitAt + k})
		}
	}
	return out
}

// Diagnose lists the patterns the window shows, in the order of Patterns.
func Diagnose(w Window, th Thresholds) []Finding {
	var out []Finding
	mean := func(m string) (float64, bool) {
		s, ok := w.Means[m]
		v := s.Mean()
		return v, ok && s.N >= th.MinSamples && !math.IsNaN(v)
	}
	pair := func(id, a, b string, aLow bool) {
		va, okA := mean(a)
		vb, okB := mean(b)
		if !okA || !okB {
			return
		}
		low, high := va, vb
		if !aLow {
			low, high = vb, va
		}
		if !(low < th.Low && high > th.High) {
			return
		}
		f := Finding{Pattern: id, Explanation: Explanations[id], Metrics: []string{a, b},
			Numbers: []Number{{a, va}, {b, vb}, {"n_" + a, float64(w.Means[a].N)}, {"n_" + b, float64(w.Means[b].N)}}}
		if m, ok := w.Pairs[PairKey(a, b)]; ok && m.N >= th.MinSamples {
			if c := m.Correlation(); !math.IsNaN(c) {
				f.Numbers = append(f.Numbers, Number{"correlation", c}, Number{"n_pairs", float64(m.N)})
			}
		}
		out = append(out, f)
	}
	pair(Hallucination, score.Faithfulness, score.AnswerRelevancy, true)
	pair(ContextIgnored, score.ContextRecall, score.Faithfulness, false)
	for _, k := range cutoffs(w.Means, score.PrecisionAt) {
		n := len(out)
		pair(RankingNoise, score.PrecisionAt+k, score.NDCGAt+k, true)
		if len(out) > n {
			break
		}
	}
	for _, k := range cutoffs(w.Means, score.HitAt) {
		n := len(out)
		pair(NoisyContext, score.ContextPrecision, score.HitAt+k, true)
		if len(out) > n {
			break
		}
	}
	if f, ok := falling(w, th, RetrievalScoreTop, score.CitationPrecision); ok {
		out = append(out, f)
	}
	return out
}

// falling reports both metrics' newer half below their older half by more than th.Drop, each
// half holding at least half of th.MinSamples values.
func falling(w Window, th Thresholds, a, b string) (Finding, bool) {
	half := max(1, th.MinSamples/2)
	var nums []Number
	for _, m := range []string{a, b} {
		o, n := w.Older[m], w.Newer[m]
		if o.N < half || n.N < half || !(o.Mean()-n.Mean() > th.Drop) {
			return Finding{}, false
		}
		nums = append(nums, Number{m + "_before", o.Mean()}, Number{m + "_now", n.Mean()})
	}
	return Finding{Pattern: RetrievalShift, Explanation: Explanations[RetrievalShift], Numbers: nums, Metrics: []string{a, b}}, true
}

// cutoffs lists the k of a metric family present in means, smallest first.
func cutoffs(means map[string]slo.Sums, family string) []string {
	var ks []int
	for m := range means {
		if k, ok := strings.CutPrefix(m, family); ok {
			if n, err := strconv.Atoi(k); err == nil {
				ks = append(ks, n)
			}
		}
	}
	slices.Sort(ks)
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = strconv.Itoa(k)
	}
	return out
}

// Pick chooses the finding to attach to an alert on metric: the first whose pair includes the
// metric (or, for a retrieval-score alert, the retrieval shift). When no finding is about the
// metric the diagnosis is None, and its explanation names the patterns the service shows on
// other metrics: an alert is never given a diagnosis that is not about it.
func Pick(findings []Finding, metric string) Finding {
	for _, f := range findings {
		for _, m := range f.Metrics {
			if m == metric || (m == RetrievalScoreTop && strings.HasPrefix(metric, "retrieval_score")) {
				return f
			}
		}
	}
	none := Finding{Pattern: None, Explanation: Explanations[None], Numbers: []Number{}}
	if len(findings) == 0 {
		return none
	}
	other := make([]string, 0, len(findings))
	for _, f := range findings {
		other = append(other, f.Pattern+" ("+strings.Join(f.Metrics, ", ")+")")
	}
	none.Explanation = "no known pattern involves " + metric + "; the service shows " + strings.Join(other, "; ") + " on other metrics"
	return none
}
