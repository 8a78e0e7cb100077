package score

import (
	"strconv"
	"strings"
)

// MaxK bounds the cut-off of a retrieval metric ("ndcg@10"): a ranking longer than a record's
// documents (at most 1000) measures nothing more.
const MaxK = 1000

// scored are the metrics scorers produce with a fixed name; signals are not among them, since
// they are read from records, never published as scores.
var scored = map[string]bool{
	Faithfulness: true, AnswerRelevancy: true, ContextPrecision: true, ContextRecall: true,
	CitationPrecision: true, CitationRecall: true, AnswerSimilarity: true, RefusalCorrect: true,
	RubricRelevance: true, RubricCompleteness: true, RubricAccuracy: true, RubricCitationQuality: true,
	MRR: true,
}

// KnownMetric reports whether some scorer can produce a result named metric: a metric above,
// or a retrieval family with a cut-off k in [1, MaxK] ("precision@3"). Results from outside
// the process (NATS) are checked with it, so a forged name cannot create a series.
func KnownMetric(metric string) bool {
	if scored[metric] {
		return true
	}
	for _, family := range []string{PrecisionAt, RecallAt, NDCGAt, HitAt} {
		if k, ok := strings.CutPrefix(metric, family); ok {
			n, err := strconv.Atoi(k)
			return err == nil && n >= 1 && n <= MaxK && strconv.Itoa(n) == k
		}
	}
	return false
}
