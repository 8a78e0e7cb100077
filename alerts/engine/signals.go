package engine

import (
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Signals are the per-request values an SLO or drift detector can watch besides eval metrics.
// Rates are 0/1 per request so that their mean is the rate.
var Signals = []string{
	score.SignalRetrievalScoreTop, score.SignalRetrievalScoreMean, score.SignalRetrievalScore, score.SignalRetrievedDocuments, score.SignalEmptyRetrievalRate, score.SignalAnswerTokens, score.SignalInputTokens,
	score.SignalLatencySeconds, score.SignalRetrievalLatencySeconds, score.SignalGenerationLatencySeconds, score.SignalCitationCount,
	score.SignalUncitedAnswerRate, score.SignalNegativeFeedbackRate, score.SignalFeedbackScore,
}

// A recordSignal indexes the signals eachSignal reports (recordSignalNames), so that the
// engine finds what watches one in an array (Engine.bySignal), not a map of names.
type recordSignal uint8

const (
	sigRetrievalScoreTop recordSignal = iota
	sigRetrievalScoreMean
	sigRetrievalScore
	sigRetrievedDocuments
	sigEmptyRetrievalRate
	sigAnswerTokens
	sigInputTokens
	sigLatencySeconds
	sigRetrievalLatencySeconds
	sigGenerationLatencySeconds
	sigCitationCount
	sigUncitedAnswerRate
	numRecordSignals
)

var recordSignalNames = [numRecordSignals]string{
	sigRetrievalScoreTop:        score.SignalRetrievalScoreTop,
	sigRetrievalScoreMean:       score.SignalRetrievalScoreMean,
	sigRetrievalScore:           score.SignalRetrievalScore,
	sigRetrievedDocuments:       score.SignalRetrievedDocuments,
	sigEmptyRetrievalRate:       score.SignalEmptyRetrievalRate,
	sigAnswerTokens:             score.SignalAnswerTokens,
	sigInputTokens:              score.SignalInputTokens,
	sigLatencySeconds:           score.SignalLatencySeconds,
	sigRetrievalLatencySeconds:  score.SignalRetrievalLatencySeconds,
	sigGenerationLatencySeconds: score.SignalGenerationLatencySeconds,
	sigCitationCount:            score.SignalCitationCount,
	sigUncitedAnswerRate:        score.SignalUncitedAnswerRate,
}

// eachSignal calls fn with every signal a record carries.
func eachSignal(r *record.Record, fn func(sig recordSignal, v float64)) {
	if top, sum, n := r.ScoreStats(); n > 0 {
		fn(sigRetrievalScoreTop, top)
		fn(sigRetrievalScoreMean, sum/float64(n))
		fn(sigRetrievalScore, top) // the deprecated name of retrieval_score_top
	}
	fn(sigRetrievedDocuments, float64(len(r.Documents)))
	fn(sigEmptyRetrievalRate, b2f(len(r.Documents) == 0))
	if r.Usage.OutputTokens > 0 {
		fn(sigAnswerTokens, float64(r.Usage.OutputTokens))
	}
	if r.Usage.InputTokens > 0 {
		fn(sigInputTokens, float64(r.Usage.InputTokens))
	}
	if r.Latency.Total > 0 {
		fn(sigLatencySeconds, r.Latency.Total/1000)
	}
	if r.Latency.Retrieval > 0 {
		fn(sigRetrievalLatencySeconds, r.Latency.Retrieval/1000)
	}
	if r.Latency.Generation > 0 {
		fn(sigGenerationLatencySeconds, r.Latency.Generation/1000)
	}
	if r.Answer != "" {
		fn(sigCitationCount, float64(len(r.Citations)))
		fn(sigUncitedAnswerRate, b2f(len(r.Citations) == 0))
	}
}

// eachFeedbackSignal calls fn with the signals of a feedback event.
func eachFeedbackSignal(f *record.Feedback, fn func(name string, v float64)) {
	fn(score.SignalNegativeFeedbackRate, b2f(f.Score < 0))
	fn(score.SignalFeedbackScore, f.Score)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
