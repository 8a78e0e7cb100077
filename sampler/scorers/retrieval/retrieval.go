package retrieval

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// DefaultK are the cut-offs used when none are configured.
var DefaultK = []int{1, 3, 5, 10}

// relevant is trec_eval's rule: a grade below 1 (0, -1) is not relevant.
func relevant(grade int) bool { return grade >= 1 }

// Precision is P@k: relevant documents among the first k, divided by k even when fewer than k
// documents were returned.
func Precision(ranked []string, qrels map[string]int, k int) float64 {
	if k <= 0 {
		return 0
	}
	n := 0
	for i := 0; i < len(ranked) && i < k; i++ {
		if relevant(qrels[ranked[i]]) {
			n++
		}
	}
	return float64(n) / float64(k)
}

// Recall is recall@k: relevant documents among the first k, divided by every relevant labelled
// document. ok is false when no labelled document is relevant (the value is undefined).
func Recall(ranked []string, qrels map[string]int, k int) (v float64, ok bool) {
	total := countRelevant(qrels)
	if total == 0 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(ranked) && i < k; i++ {
		if relevant(qrels[ranked[i]]) {
			n++
		}
	}
	return float64(n) / float64(total), true
}

// MRR is the reciprocal rank of the first relevant document (0 when none was returned).
func MRR(ranked []string, qrels map[string]int) float64 {
	for i, id := range ranked {
		if relevant(qrels[id]) {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// Hit is hit@k (trec_eval's success@k): 1 when a relevant document is among the first k.
func Hit(ranked []string, qrels map[string]int, k int) float64 {
	for i := 0; i < len(ranked) && i < k; i++ {
		if relevant(qrels[ranked[i]]) {
			return 1
		}
	}
	return 0
}

// NDCG is NDCG@k with trec_eval's definition: the grade is the gain (grades below 1 give 0),
// the discount is log2(rank+1), and the ideal ranking orders every labelled grade, cut at k.
// k <= 0 means no cut-off. ok is false when no labelled document is relevant.
func NDCG(ranked []string, qrels map[string]int, k int) (v float64, ok bool) {
	var gains []int
	for _, g := range qrels {
		if relevant(g) {
			gains = append(gains, g)
		}
	}
	if len(gains) == 0 {
		return 0, false
	}
	sort.Sort(sort.Reverse(sort.IntSlice(gains)))
	cut := func(n int) int {
		if k > 0 && n > k {
			return k
		}
		return n
	}
	var dcg, ideal float64
	for i := 0; i < cut(len(ranked)); i++ {
		if g := qrels[ranked[i]]; relevant(g) {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	for i := 0; i < cut(len(gains)); i++ {
		ideal += float64(gains[i]) / math.Log2(float64(i+2))
	}
	return dcg / ideal, true
}

// AveragePrecision is trec_eval's map for one query: the precision at the rank of each relevant
// document returned, summed and divided by every relevant labelled document (unreturned ones
// count 0). ok is false when no labelled document is relevant; trec_eval then reports 0.
func AveragePrecision(ranked []string, qrels map[string]int) (v float64, ok bool) {
	total := countRelevant(qrels)
	if total == 0 {
		return 0, false
	}
	found, sum := 0, 0.0
	for i, id := range ranked {
		if relevant(qrels[id]) {
			found++
			sum += float64(found) / float64(i+1)
		}
	}
	return sum / float64(total), true
}

func countRelevant(qrels map[string]int) int {
	n := 0
	for _, g := range qrels {
		if relevant(g) {
			n++
		}
	}
	return n
}

// Compute returns every retrieval metric for one ranking, keyed by metric name ("precision@3",
// "mrr", ...). recall@k and ndcg@k are left out when no labelled document is relevant.
func Compute(ranked []string, qrels map[string]int, ks []int) map[string]float64 {
	out := map[string]float64{score.MRR: MRR(ranked, qrels)}
	for _, k := range ks {
		s := strconv.Itoa(k)
		out[score.PrecisionAt+s] = Precision(ranked, qrels, k)
		out[score.HitAt+s] = Hit(ranked, qrels, k)
		if v, ok := Recall(ranked, qrels, k); ok {
			out[score.RecallAt+s] = v
		}
		if v, ok := NDCG(ranked, qrels, k); ok {
			out[score.NDCGAt+s] = v
		}
	}
	return out
}

// Ranking returns the record's document ids in the order returned, keeping the first of
// repeated ids (trec_eval counts a document once).
func Ranking(r *record.Record) []string {
	seen := make(map[string]bool, len(r.Documents))
	out := make([]string, 0, len(r.Documents))
	for _, d := range r.Documents {
		if !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d.ID)
		}
	}
	return out
}

// Scorer scores records that carry relevance labels; others get no results.
type Scorer struct {
	ks   []int
	keep func(metric string) bool
	now  func() time.Time
}

var _ score.Scorer = (*Scorer)(nil)

// New returns a retrieval Scorer for the cut-offs ks (DefaultK when empty). keep, when not
// nil, selects which metric names are reported.
func New(ks []int, keep func(metric string) bool) *Scorer {
	if len(ks) == 0 {
		ks = DefaultK
	}
	return &Scorer{ks: append([]int(nil), ks...), keep: keep, now: time.Now}
}

// Name implements score.Scorer.
func (s *Scorer) Name() string { return "retrieval" }

// Relevance returns the relevance labels to score r against: a person's (Record.Labels) when
// they graded documents, else the record's own.
func Relevance(r *record.Record) map[string]int {
	if r.Labels != nil && len(r.Labels.Relevance) > 0 {
		return r.Labels.Relevance
	}
	return r.Relevance
}

// Score implements score.Scorer.
func (s *Scorer) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	qrels := Relevance(r)
	if len(qrels) == 0 {
		return nil, nil
	}
	values := Compute(Ranking(r), qrels, s.ks)
	names := make([]string, 0, len(values))
	for n := range values {
		if s.keep == nil || s.keep(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	now := s.now()
	out := make([]score.Result, 0, len(names))
	for _, n := range names {
		out = append(out, score.Result{
			TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Metric: n, Value: values[n],
			Weight: weight(r), Scorer: "retrieval", Time: now,
			Explanation: fmt.Sprintf("%d documents, %d relevant labels", len(r.Documents), countRelevant(qrels)),
		})
	}
	return out, nil
}

// weight is 1/p for a sampled record, else 1.
func weight(r *record.Record) float64 {
	if r.Sampling != nil && r.Sampling.Probability > 0 {
		return 1 / r.Sampling.Probability
	}
	return 1
}
