package score

// Metric names, exactly as they appear in Result.Metric, the `metric` label of
// ragwatch_eval_score and the `metric` key of an SLO. They are shared here because several
// scorers produce the same metric and the alert engine and config must agree with all of them.

// Answer-quality metrics. The built-in scorer, an LLM judge and NLI may each score them under
// the same name, so an SLO does not depend on which scorer the configuration picks.
const (
	Faithfulness      = "faithfulness"
	AnswerRelevancy   = "answer_relevancy"
	ContextPrecision  = "context_precision"
	ContextRecall     = "context_recall"
	CitationPrecision = "citation_precision"
	CitationRecall    = "citation_recall"
	AnswerSimilarity  = "answer_similarity"
	// RefusalCorrect is scored only for answers that decline to answer (text.IsRefusal): 1 when
	// the retrieved context does not support an answer (a correct refusal), 0 when it does (an
	// unwarranted refusal). Whichever scorer scores answer_relevancy scores it.
	RefusalCorrect = "refusal_correct"
	// BERTScore of the answer against the reference (sampler/scorers/bertscore).
	BERTScorePrecision = "bertscore_precision"
	BERTScoreRecall    = "bertscore_recall"
	BERTScoreF1        = "bertscore_f1"
)

// PairwiseWinRate is one judged shadow pair's outcome from the candidate's side: 1 the
// candidate won, 0.5 a tie (or the two position orders disagreed), 0 it lost; weighted 1/p of
// the pair's sampling. Its weighted mean is the win rate ragwatch_pairwise_win_rate estimates,
// so an SLO on it (`variant` naming the candidate) pages on a losing canary. The result names
// the candidate's record (trace, span, service, variant).
const PairwiseWinRate = "pairwise_win_rate"

// ClaimMetric reports whether metric judges the claims an answer makes and the citations
// behind them: faithfulness, citation precision and citation recall. An answer that declines
// for lack of information (text.IsRefusal) makes no claim, so every scorer — the builtin, the
// LLM judges and NLI — leaves these unscored for it (no result, no error; no mean or SLO counts
// it) and judges the refusal by RefusalCorrect alone: 1 for a correct refusal, 0 for an
// unwarranted one (docs/metrics.md, "Refusals").
func ClaimMetric(metric string) bool {
	switch metric {
	case Faithfulness, CitationPrecision, CitationRecall:
		return true
	}
	return false
}

// Rubric metrics, scored only by an LLM judge following a written rubric.
const (
	RubricRelevance       = "rubric_relevance"
	RubricCompleteness    = "rubric_completeness"
	RubricAccuracy        = "rubric_accuracy"
	RubricCitationQuality = "rubric_citation_quality"
)

// Retrieval metrics against relevance labels. All but MRR are families with a cut-off: the
// metric name is the prefix followed by k ("ndcg@10").
const (
	MRR         = "mrr"
	PrecisionAt = "precision@"
	RecallAt    = "recall@"
	NDCGAt      = "ndcg@"
	HitAt       = "hit@"
)

// Signals: values read from every record (and from feedback) rather than scored on a sample,
// which SLOs and drift detectors watch like metrics. Rates are 0 or 1 per request, so that
// their mean is the rate. What each one is, and how a record gives it, is the signal catalog's
// (internal/reqsignal).
const (
	// SignalRetrievalScoreTop is the top document's score, SignalRetrievalScoreMean the mean
	// over the record's scored documents (ragwatch_retrieval_score, statsd rag.avg_relevance).
	SignalRetrievalScoreTop  = "retrieval_score_top"
	SignalRetrievalScoreMean = "retrieval_score_mean"
	// SignalRetrievalScore is the deprecated name of SignalRetrievalScoreTop, still accepted
	// (`ragwatch validate` warns).
	SignalRetrievalScore           = "retrieval_score"
	SignalRetrievedDocuments       = "retrieved_documents"
	SignalEmptyRetrievalRate       = "empty_retrieval_rate"
	SignalAnswerTokens             = "answer_tokens"
	SignalInputTokens              = "input_tokens"
	SignalLatencySeconds           = "latency_seconds"
	SignalRetrievalLatencySeconds  = "retrieval_latency_seconds"
	SignalGenerationLatencySeconds = "generation_latency_seconds"
	SignalCitationCount            = "citation_count"
	SignalUncitedAnswerRate        = "uncited_answer_rate"
	SignalNegativeFeedbackRate     = "negative_feedback_rate"
	SignalFeedbackScore            = "feedback_score"
)

// TurnBucket is the `turn_bucket` label of a turn position: "1", "2", "3-5" or "6+"; "" for
// an unknown turn (0), which no by-turn series counts.
func TurnBucket(turn int) string {
	switch {
	case turn <= 0:
		return ""
	case turn == 1:
		return "1"
	case turn == 2:
		return "2"
	case turn <= 5:
		return "3-5"
	}
	return "6+"
}

// TurnBuckets lists the turn buckets in order.
var TurnBuckets = []string{"1", "2", "3-5", "6+"}
