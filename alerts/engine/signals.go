package engine

import (
	"github.com/ragwatch/ragwatch/internal/record"
)

// Signals are the per-request values an SLO or drift detector can watch besides eval metrics.
// Rates are 0/1 per request so that their mean is the rate.
var Signals = []string{
	"retrieval_score", "retrieved_documents", "empty_retrieval_rate", "answer_tokens", "input_tokens",
	"latency_seconds", "retrieval_latency_seconds", "generation_latency_seconds", "citation_count",
	"uncited_answer_rate", "negative_feedback_rate", "feedback_score",
}

// eachSignal calls fn with every signal a record carries.
func eachSignal(r *record.Record, fn func(name string, v float64)) {
	if scores := r.Scores(); len(scores) > 0 {
		top := scores[0]
		for _, s := range scores[1:] {
			top = max(top, s)
		}
		fn("retrieval_score", top)
	}
	fn("retrieved_documents", float64(len(r.Documents)))
	fn("empty_retrieval_rate", b2f(len(r.Documents) == 0))
	if r.Usage.OutputTokens > 0 {
		fn("answer_tokens", float64(r.Usage.OutputTokens))
	}
	if r.Usage.InputTokens > 0 {
		fn("input_tokens", float64(r.Usage.InputTokens))
	}
	if r.Latency.Total > 0 {
		fn("latency_seconds", r.Latency.Total/1000)
	}
	if r.Latency.Retrieval > 0 {
		fn("retrieval_latency_seconds", r.Latency.Retrieval/1000)
	}
	if r.Latency.Generation > 0 {
		fn("generation_latency_seconds", r.Latency.Generation/1000)
	}
	if r.Answer != "" {
		fn("citation_count", float64(len(r.Citations)))
		fn("uncited_answer_rate", b2f(len(r.Citations) == 0))
	}
}

// eachFeedbackSignal calls fn with the signals of a feedback event.
func eachFeedbackSignal(f *record.Feedback, fn func(name string, v float64)) {
	fn("negative_feedback_rate", b2f(f.Score < 0))
	fn("feedback_score", f.Score)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
