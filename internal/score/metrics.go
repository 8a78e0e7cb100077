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
)

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
// their mean is the rate.
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
