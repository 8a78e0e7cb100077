package trec

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/ragwatch/ragwatch/sampler/eval"
	"github.com/ragwatch/ragwatch/sampler/scorers/retrieval"
)

// DefaultK are the cut-offs of `ragwatch eval --qrels` when --k is not given.
var DefaultK = []int{1, 5, 10}

// Options configures Evaluate.
type Options struct {
	K []int // cut-offs for P, recall, ndcg_cut and success; DefaultK when empty
	// Complete is trec_eval's -c: average over every query of the qrels, a query the run
	// lacks contributing 0 to every measure. Off (trec_eval's default), only queries in both
	// files are evaluated.
	Complete bool
}

// Result is a run's evaluation.
type Result struct {
	Measures []string                      // measure names in output order
	Queries  []string                      // evaluated query ids, sorted
	PerQuery map[string]map[string]float64 // query id → measure → value
	Means    []eval.Summary                // per measure: n, mean over Queries, 95% CI; in Measures order
	// RunOnly counts run queries without judgements (ignored, as trec_eval does); QrelsOnly
	// counts judged queries the run lacks (ignored, or 0 with Complete).
	RunOnly, QrelsOnly int
	// NoRelevant counts evaluated queries whose judgements hold no relevant document: trec_eval
	// scores them 0 on every measure and keeps them in the mean.
	NoRelevant int
}

// MeasureNames returns trec_eval's names of the measures for cut-offs ks, in output order:
// P_k, recall_k, ndcg_cut_k, success_k for each k, then recip_rank and map.
func MeasureNames(ks []int) []string {
	var out []string
	for _, family := range []string{"P_", "recall_", "ndcg_cut_", "success_"} {
		for _, k := range ks {
			out = append(out, family+strconv.Itoa(k))
		}
	}
	return append(out, "recip_rank", "map")
}

// ParseK parses a --k list such as "1,5,10": positive, no duplicates, sorted on return.
func ParseK(s string) ([]int, error) {
	var ks []int
	seen := map[int]bool{}
	for _, f := range splitComma(s) {
		k, err := strconv.Atoi(f)
		if err != nil || k <= 0 {
			return nil, fmt.Errorf("--k: %q is not a positive integer", f)
		}
		if seen[k] {
			return nil, fmt.Errorf("--k: %d given twice", k)
		}
		seen[k] = true
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("--k: no cut-offs")
	}
	sort.Ints(ks)
	return ks, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if f := s[start:i]; len(f) > 0 {
				out = append(out, f)
			}
			start = i + 1
		}
	}
	return out
}

// Query computes every measure for one ranking against one query's judgements with
// trec_eval's definitions (relevance level 1; measures undefined without a relevant document
// are 0). The arithmetic is sampler/scorers/retrieval's, the one implementation of these
// metrics in ragwatch.
func Query(ranked []string, qrels map[string]int, ks []int) map[string]float64 {
	out := make(map[string]float64, 4*len(ks)+2)
	for _, k := range ks {
		s := strconv.Itoa(k)
		out["P_"+s] = retrieval.Precision(ranked, qrels, k)
		out["recall_"+s], _ = retrieval.Recall(ranked, qrels, k)
		out["ndcg_cut_"+s], _ = retrieval.NDCG(ranked, qrels, k)
		out["success_"+s] = retrieval.Hit(ranked, qrels, k)
	}
	out["recip_rank"] = retrieval.MRR(ranked, qrels)
	out["map"], _ = retrieval.AveragePrecision(ranked, qrels)
	return out
}

// Evaluate scores run against qrels, query by query, and averages each measure as trec_eval
// does. It fails when no query is evaluated (trec_eval's "No queries with both results and
// relevance info").
func Evaluate(qrels Qrels, run Run, o Options) (*Result, error) {
	ks := o.K
	if len(ks) == 0 {
		ks = DefaultK
	}
	res := &Result{Measures: MeasureNames(ks), PerQuery: map[string]map[string]float64{}}
	for qid := range run {
		if _, ok := qrels[qid]; !ok {
			res.RunOnly++
		}
	}
	for qid, judged := range qrels {
		if _, ok := run[qid]; !ok {
			res.QrelsOnly++
			if !o.Complete {
				continue
			}
		}
		res.Queries = append(res.Queries, qid)
		res.PerQuery[qid] = Query(run.Ranking(qid), judged, ks)
		if !anyRelevant(judged) {
			res.NoRelevant++
		}
	}
	if len(res.Queries) == 0 {
		return nil, fmt.Errorf("no query has both results and judgements (%d run queries, %d judged queries)", len(run), len(qrels))
	}
	sort.Strings(res.Queries)
	for _, m := range res.Measures {
		vals := make([]float64, len(res.Queries))
		for i, q := range res.Queries {
			vals[i] = res.PerQuery[q][m]
		}
		s := eval.Summarize(vals)
		s.Metric = m
		res.Means = append(res.Means, s)
	}
	return res, nil
}

func anyRelevant(judged map[string]int) bool {
	for _, g := range judged {
		if g >= 1 {
			return true
		}
	}
	return false
}

// Report returns the means as an eval.Report, so that the deploy gate and baseline files of
// `ragwatch eval` apply to a run unchanged.
func (r *Result) Report() *eval.Report {
	return &eval.Report{Records: len(r.Queries), Metrics: append([]eval.Summary(nil), r.Means...)}
}
