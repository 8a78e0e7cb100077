package score

import (
	"strconv"
	"strings"
	"sync"
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
	MRR: true, PairwiseWinRate: true, BERTScorePrecision: true, BERTScoreRecall: true, BERTScoreF1: true,
}

// KnownMetric reports whether some scorer can produce a result named metric: a metric above,
// or a retrieval family with a cut-off k in [1, MaxK] ("precision@3"). Results from outside
// the process (NATS) are checked with it, so a forged name cannot create a series.
func KnownMetric(metric string) bool {
	if scored[metric] || judgeMetric(metric) {
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

// JudgePrefix starts the metric name of every judge defined in the `judges` config section:
// judge `tone` scores metric `judge_tone`.
const JudgePrefix = "judge_"

// judges are the judge metrics this process was configured with (RegisterJudgeMetrics).
var judges struct {
	sync.RWMutex
	names map[string]bool
}

// RegisterJudgeMetrics makes KnownMetric accept the given judge metric names ("judge_tone").
// The service calls it with the configured judges at start and on every reload; names are
// never removed, so results of a judge a reload dropped that are still in flight are kept.
func RegisterJudgeMetrics(names ...string) {
	judges.Lock()
	defer judges.Unlock()
	if judges.names == nil {
		judges.names = map[string]bool{}
	}
	for _, n := range names {
		judges.names[n] = true
	}
}

func judgeMetric(metric string) bool {
	if !strings.HasPrefix(metric, JudgePrefix) {
		return false
	}
	judges.RLock()
	defer judges.RUnlock()
	return judges.names[metric]
}
